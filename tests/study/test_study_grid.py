import json
from pathlib import Path

import pytest

from layerscale.study.design.grid import StudySpec
from study_helpers import TINY_BASE


def test_final_runs_vary_only_method_depth_lr_seed_and_the_study_keys(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2, 4), (0, 1), TINY_BASE, lrs=(1e-3, 3e-3))
    chosen = {("prenorm", 2): 3e-3, ("prenorm", 4): 1e-3, ("layerscale", 2): 1e-3, ("layerscale", 4): 1e-3}
    runs = spec.final_runs(tmp_path, chosen)
    # prenorm at depth 2 needs its tuned 3e-3 and the shared 1e-3; the other cells share one rate
    assert len(runs) == 2 * 2 + 3 * 2 and len({r.run_id for r in runs}) == len(runs)
    first = runs[0]
    assert (first.method, first.depth, first.lr, first.seed, first.kind) == ("prenorm", 2, 3e-3, 0, "final")
    assert first.config["model"]["residual"] == "prenorm" and first.config["model"]["depth"] == 2
    assert first.config["optim"]["lr"] == 3e-3
    assert first.config["run"]["out_dir"] == str(tmp_path / "runs" / "prenorm-d2-lr0.003-s0")
    assert first.config["run"]["evaluate_test"] is True and first.config["run"]["stop_at_step"] == 0
    assert first.config["data"]["validation_fraction"] == 0.1
    assert {k: v for k, v in first.config["optim"].items() if k != "lr"} == \
        {k: v for k, v in TINY_BASE["optim"].items() if k != "lr"}
    assert "residual" not in TINY_BASE["model"]  # the base is not mutated


def test_tuning_runs_never_read_the_test_split_and_use_their_own_seed(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3))
    run = spec.run(tmp_path, "prenorm", 2, 3e-3, spec.tune_seed, "tune", stop_at_step=2)
    assert run.config["run"]["evaluate_test"] is False and run.config["run"]["stop_at_step"] == 2
    assert run.seed not in spec.seeds
    assert run.run_dir == tmp_path / "runs" / "tune" / "prenorm-d2-lr0.003-s1000"


@pytest.mark.parametrize("kwargs, message", [
    (dict(methods=("prenorm", "magic")), "unknown residual method 'magic' in --methods"),
    (dict(methods=()), "--methods is empty"),
    (dict(depths=(12, 0)), r"--depths must be positive integers, got \[12, 0\]"),
    (dict(depths=(12, 12)), r"--depths lists a value twice: \[12, 12\]"),
    (dict(seeds=()), "seeds must be integers"),
    (dict(lrs=(1e-3, -1.0)), r"--lrs must be positive numbers"),
    (dict(lrs=(1e-3, 1e-3)), "--lrs lists a value twice"),
    (dict(reference="rezero"), "--reference 'rezero' is not one of the studied methods"),
    (dict(lrs=(1e-3, 3e-3), validation_fraction=0.0), "needs a validation split"),
    (dict(seeds=(0, 1000)), "tuning seed 1000 is also a reporting seed"),
    (dict(halving_rate=1), "--halving-rate must be an integer >= 2"),
    (dict(min_budget=0.0), r"--min-budget must be in \(0, 1\]"),
])
def test_bad_designs_are_one_line_errors(kwargs, message):
    args = dict(methods=("prenorm",), depths=(2,), seeds=(0,), base=TINY_BASE)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        StudySpec(**args)


def test_the_reference_defaults_to_prenorm_else_the_first_method():
    assert StudySpec(("layerscale", "prenorm"), (2,), (0,)).reference_method == "prenorm"
    assert StudySpec(("layerscale", "rezero"), (2,), (0,)).reference_method == "layerscale"


def test_a_study_dir_of_another_design_is_refused(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE)
    (tmp_path / "study.json").write_text(json.dumps(spec.to_dict()))
    spec.check_compatible(tmp_path)  # same design: fine
    assert StudySpec.from_dict(spec.to_dict()) == spec
    with pytest.raises(ValueError, match="different depths"):
        StudySpec(("prenorm",), (2, 4), (0,), TINY_BASE).check_compatible(tmp_path)
    with pytest.raises(ValueError, match="different lrs"):
        StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3)).check_compatible(tmp_path)


def test_a_shape_sweep_sets_each_cells_width_and_needs_every_cell():
    shapes = (("prenorm", 2, 48), ("prenorm", 4, 32), ("hc", 2, 44), ("hc", 4, 32))
    spec = StudySpec(("prenorm", "hc"), (2, 4), (0,), TINY_BASE, shapes=shapes)
    run = spec.run(Path("/tmp/s"), "hc", 2, 1e-3, 0, "final")
    assert run.config["model"]["embed_dim"] == 44 and run.config["model"]["depth"] == 2
    assert StudySpec.from_dict(json.loads(json.dumps(spec.to_dict()))) == spec
    with pytest.raises(ValueError, match="--shapes must give one width per method and depth; missing: hc at depth 4"):
        StudySpec(("prenorm", "hc"), (2, 4), (0,), TINY_BASE, shapes=shapes[:3])


def test_a_study_file_written_before_a_design_key_existed_still_matches(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3))
    older = spec.to_dict()
    del older["shapes"]  # a study.json written before shape sweeps existed
    (tmp_path / "study.json").write_text(json.dumps(older))
    spec.check_compatible(tmp_path)
    with pytest.raises(ValueError, match="different shapes"):
        StudySpec(("prenorm",), (2,), (0,), TINY_BASE, lrs=(1e-3, 3e-3),
                  shapes=(("prenorm", 2, 32),)).check_compatible(tmp_path)


def test_primary_seeds_add_seeds_to_the_primary_cells_only(tmp_path):
    spec = StudySpec(("prenorm", "layerscale", "rezero"), (2, 4), (0, 1, 2), TINY_BASE, lrs=(1e-3,),
                     primary=("layerscale@4",), primary_seeds=5)
    assert spec.primary_cells() == {("layerscale", 4), ("prenorm", 4)}
    assert spec.seeds_for("layerscale", 4) == spec.seeds_for("prenorm", 4) == (0, 1, 2, 3, 4)
    assert spec.seeds_for("rezero", 4) == spec.seeds_for("layerscale", 2) == (0, 1, 2)
    finals = spec.final_runs(tmp_path, {cell: 1e-3 for cell in spec.cells()})
    assert len(finals) == 2 * 5 + 4 * 3
    with pytest.raises(ValueError, match="--primary-seeds must be at least the 3 seeds"):
        StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), TINY_BASE, primary_seeds=2)


def test_reuse_copies_only_ended_runs_whose_config_is_the_designs(tmp_path):
    import yaml

    from layerscale.study.run.reuse import reuse_finished_runs
    from layerscale.train.config.schema import TrainConfig

    spec = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3), tuning="grid")
    old, new = tmp_path / "old", tmp_path / "new"
    for seed, status, lr_in_config in ((0, "finished", 1e-3), (1, "paused", 1e-3), (2, "finished", 2e-3)):
        run = spec.run(old, "prenorm", 2, 1e-3, seed, "final")
        run.run_dir.mkdir(parents=True)
        config = TrainConfig.from_dict({**run.config, "optim": {**run.config["optim"], "lr": lr_in_config}})
        (run.run_dir / "config.yaml").write_text(yaml.safe_dump(config.to_dict()))
        (run.run_dir / "study_status.json").write_text(json.dumps({"status": status}))
        (run.run_dir / "checkpoints").mkdir()
    messages = []
    copied = reuse_finished_runs(spec, new, old, log=messages.append)
    # seed 1 has not ended; seed 2's config has another learning rate under the same id: neither is reused
    assert copied == ["prenorm-d2-lr0.001-s0"] and "config differs: prenorm-d2-lr0.001-s2" in messages[0]
    target = new / "runs" / "prenorm-d2-lr0.001-s0"
    assert (target / "config.yaml").is_file() and not (target / "checkpoints").exists()
    assert not list((new / "runs").glob(".*"))  # no staging folder left behind
    with pytest.raises(ValueError, match="nowhere: not found; expected the folder of an earlier study"):
        reuse_finished_runs(spec, new, tmp_path / "nowhere")
    (tmp_path / "nowhere").mkdir()
    with pytest.raises(ValueError, match="no runs/ folder"):
        reuse_finished_runs(spec, new, tmp_path / "nowhere")


def test_the_summary_names_the_primary_cells_extra_seeds():
    from layerscale.study.report.results import Metric
    from layerscale.study.report.summary import plain_paragraph, study_cost, study_markdown

    spec = StudySpec(("prenorm", "layerscale"), (2, 4), (0, 1, 2), TINY_BASE, primary=("layerscale@4",),
                     primary_seeds=5)
    metric = Metric.for_language_model(False)
    assert ", over 3 seeds (5 in the primary family's cells); the test split" in plain_paragraph(spec, [], metric)
    markdown = study_markdown(spec, [], metric, study_cost(spec, [], {}), 8, 0)
    assert "mean over 3 seed(s) (5 in the primary family's cells) with the 95 % t-interval" in markdown
    plain = StudySpec(("prenorm", "layerscale"), (2, 4), (0, 1, 2), TINY_BASE)
    assert ", over 3 seeds; the test split" in plain_paragraph(plain, [], metric)


def test_a_base_config_that_is_no_mapping_is_refused_before_its_rate_is_read():
    with pytest.raises(ValueError, match=r"^the study's base config must be a mapping, got a list$"):
        StudySpec(("prenorm",), (2,), (0,), [1])


@pytest.mark.parametrize("lr", [-1.0, 0.0, float("nan"), float("inf"), "abc", True])
def test_a_shared_rate_that_is_not_a_positive_number_is_refused(lr, tmp_path, capsys):
    base = {**TINY_BASE, "optim": {**TINY_BASE["optim"], "lr": lr}}
    with pytest.raises(ValueError, match=r"config key optim.lr \(the shared learning rate, --lr\): expected a "
                                         r"positive number"):
        StudySpec(("prenorm", "layerscale"), (2,), (0,), base)
    if isinstance(lr, float):
        from layerscale.cli import main

        assert main(["study", "--dry-run", "--preset", "demo", "--out", str(tmp_path / "s"), f"--lr={lr}"]) == 2
        assert "expected a positive number" in capsys.readouterr().err and not (tmp_path / "s").exists()
