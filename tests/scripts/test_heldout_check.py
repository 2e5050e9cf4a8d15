"""scripts/heldout_check.py (issue 26, item 5): the held-out runs' configs are the study's recorded configs with only
the design's keys changed, at the rates the study's results.csv chose; a cell without a chosen rate is refused in
one line; the whole check runs on a tiny digits ViT (train, resume, collect, report), --report-only rebuilds
results.md byte for byte, and the paired difference agrees with a computation by hand from runs.csv; a packed
study is read without unpacking; the language-model variant builds its config on a small text of its own."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import statistics
import sys
from pathlib import Path

import pytest

from layerscale.train.config.config_file import dotted_items

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import heldout_check  # noqa: E402

from evidence.heldout_report import RUN_FIELDS, reading  # noqa: E402
from killed_runs import kill_after_step, kill_before_first_checkpoint  # noqa: E402

#: a Fashion-MNIST-like study model, tiny: 28x28 at patch 7 (16 tokens), which the check moves to digits at patch 2
VIT = {"model": {"name": "vit", "depth": 2, "embed_dim": 16, "num_heads": 2, "patch_size": 7, "mlp_ratio": 1.0},
       "data": {"name": "fashion-mnist", "batch_size": 64, "eval_batch_size": 500, "validation_fraction": 0.1,
                "augment": False},
       "optim": {"epochs": 1, "max_steps": 0, "warmup_steps": 2},
       "run": {"progress": "none", "eval_every_steps": 12, "log_every_steps": 4, "checkpoint_every_steps": 1000,
               "keep_checkpoints": 1, "patience": 3},
       "diagnostics": {"enabled": False}}
GPT = {"model": {"name": "gpt", "depth": 2, "embed_dim": 16, "num_heads": 2, "block_size": 16, "mlp_ratio": 1.0},
       "data": {"name": "text", "path": "/usr/share/vim/vim90/doc/*.txt", "block_size": 16, "batch_size": 16,
                "eval_batch_size": 64, "validation_fraction": 0.05, "val_fraction": 0.1},
       "optim": {"epochs": 1, "max_steps": 10, "warmup_steps": 1},
       "run": {"progress": "none", "eval_every_steps": 5, "eval_batches": 2, "log_every_steps": 5,
               "checkpoint_every_steps": 1000, "keep_checkpoints": 1},
       "diagnostics": {"enabled": False}}
DIGITS = {"data.name": "digits", "data.path": None, "model.patch_size": 2}
STUDY_STEPS = 24           # the tiny study's planned steps: digits' 1,295 training images give 20 steps an epoch
RATES = {"prenorm": 0.001, "layerscale": 0.003}   # what the tiny study's results.csv chose at depth 2


def _resolved(base: dict, method: str, lr: float, seed: int, run_id: str) -> dict:
    from layerscale.train.config.schema import TrainConfig

    raw = json.loads(json.dumps(base))
    raw["model"]["residual"] = method
    raw["optim"]["lr"] = lr
    raw["run"]["seed"] = seed
    raw["run"]["out_dir"] = f"docs/results/tiny/runs/{run_id}"
    return TrainConfig.from_dict(raw).to_dict()


def _results_csv(path: Path, depth: int, rates: dict, unchosen_depth: int | None = None) -> None:
    """A study's results.csv: the tuned rows of both methods at ``depth`` (the compared one with its primary
    comparison), a shared row at another rate (never read), and a depth whose rates are not chosen yet."""
    fields = ["table", "method", "depth_from", "depth"] + list(heldout_check.STUDY_ROW_FIELDS)
    rows = [{"table": "tuned", "method": "prenorm", "depth": depth, "lr": rates["prenorm"], "params": 111,
             "test_mean": 80.0},
            {"table": "tuned", "method": "layerscale", "depth": depth, "lr": rates["layerscale"], "params": 222,
             "test_mean": 81.0, "diff_mean": 1.25, "diff_ci_low": 0.5, "diff_ci_high": 2.0, "diff_n": 5,
             "diff_per_seed": "1.0;1.5;1.25;1.0;1.5", "family": "primary", "p_raw": 0.004, "p_adj": 0.012,
             "adjustment": "holm", "verdict": "better", "verdict_unadjusted": "better", "bootstrap_low": 0.4,
             "bootstrap_high": 2.1},
            {"table": "shared", "method": "layerscale", "depth": depth, "lr": 0.1, "diff_mean": -9.0,
             "diff_ci_low": -10.0, "diff_ci_high": -8.0, "diff_n": 3, "family": "exploratory"}]
    if unchosen_depth is not None:
        rows += [{"table": "tuned", "method": "prenorm", "depth": unchosen_depth, "lr": 0.001},
                 {"table": "tuned", "method": "layerscale", "depth": unchosen_depth, "lr": "",
                  "family": "primary"}]
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=fields, lineterminator="\n", restval="")
        writer.writeheader()
        writer.writerows(rows)


def _study(root: Path, base: dict, data: dict, *, steps: int, rates: dict = RATES, seeds=(0, 1, 2),
           unchosen_depth: int | None = 4, others=(0.1,), equal_rates: bool = False) -> Path:
    """A finished tiny study in ``root/study`` (results.csv, runs.csv, every run's config.yaml and summary.json at
    two rates, the chosen one and another) and the design file of its held-out check."""
    from layerscale.train.config.config_file import dump_config

    study = root / "study"
    runs_csv = ["run_id,kind,method,depth,lr,seed,status,wall_time_s"]
    for method in ("prenorm", "layerscale"):
        for lr in sorted({rates[method], *others}):
            for seed in seeds:
                run_id = heldout_check.run_name(method, base["model"]["depth"], lr, seed)
                run = study / "runs" / run_id
                run.mkdir(parents=True)
                (run / "config.yaml").write_text(dump_config(_resolved(base, method, lr, seed, run_id)))
                (run / "summary.json").write_text(json.dumps({"step": steps, "total_steps": steps}))
                runs_csv.append(f"{run_id},final,{method},{base['model']['depth']},{lr},{seed},finished,60.0")
    (study / "runs.csv").write_text("\n".join(runs_csv) + "\n")
    _results_csv(study / "results.csv", base["model"]["depth"], rates, unchosen_depth)
    design = root / "design.json"
    design.write_text(json.dumps({"name": "tiny", "study": "study", "depth": base["model"]["depth"], "data": data,
                                  "seeds": list(seeds), "out": "study/heldout",
                                  "addendum": "DESIGN.md, addendum of today",
                                  **({"equal_rates": True} if equal_rates else {})}))
    return design


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def _differences(before: dict, after: dict) -> dict:
    b, a = dotted_items(before), dotted_items(after)
    assert set(a) == set(b)
    return {k: (b[k], a[k]) for k in a if b[k] != a[k]}


# --- the configs -----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("base, data, budget, per_epoch, expected", [
    (VIT, DIGITS, 1686, 20, {"data.name": ("fashion-mnist", "digits"), "model.patch_size": (7, 2),
                             "optim.max_steps": (0, 1686), "optim.epochs": (1, 85)}),
    (VIT, DIGITS, None, 20, {"data.name": ("fashion-mnist", "digits"), "model.patch_size": (7, 2)}),
    (GPT, {"data.path": "/usr/share/perl/5.36/pod/*.pod"}, 10, 7000,   # one epoch holds the budget: no change
     {"data.path": ("/usr/share/vim/vim90/doc/*.txt", "/usr/share/perl/5.36/pod/*.pod")}),
    (GPT, {"data.path": "/small/*.pod"}, 10, 3,
     {"data.path": ("/usr/share/vim/vim90/doc/*.txt", "/small/*.pod"), "optim.epochs": (1, 4)}),
])
def test_a_heldout_config_changes_only_the_designs_keys(base, data, budget, per_epoch, expected):
    study = _resolved(base, "layerscale", 0.003, 2, "layerscale-d2-lr0.003-s2")
    before = json.dumps(study, sort_keys=True)
    raw = heldout_check.heldout_config(study, data, 2, "OUT", budget_steps=budget, steps_per_epoch=per_epoch)
    assert _differences(study, raw) == {**expected, "run.out_dir": (study["run"]["out_dir"], "OUT")}
    assert json.dumps(study, sort_keys=True) == before  # the study's config is not edited
    recorded = heldout_check.changed_keys(study, raw)
    assert {c["key"]: (c["study"], c["heldout"]) for c in recorded} == expected


def test_a_split_smaller_than_one_batch_is_refused():
    study = _resolved(VIT, "prenorm", 0.001, 0, "x")
    with pytest.raises(heldout_check.Refusal, match="less than one batch"):
        heldout_check.heldout_config(study, DIGITS, 0, "OUT", budget_steps=10, steps_per_epoch=0)


def test_an_unchosen_cell_is_refused_in_one_line(tmp_path, capsys):
    design = _study(tmp_path, VIT, DIGITS, steps=STUDY_STEPS)
    raw = json.loads(design.read_text())
    raw["depth"] = 4
    design.write_text(json.dumps(raw))
    for extra in ([], ["--collect"]):
        assert heldout_check.main(["--design", str(design), *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith("heldout_check: error: ")
        assert "rate of layerscale at depth 4 is not chosen yet" in err
    assert not (tmp_path / "study" / "heldout").exists()
    assert heldout_check.main(["--design", str(design), "--estimate"]) == 0  # says it is not ready, trains nothing
    assert "not ready" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exited:  # a bad argument: one line, status 2
        heldout_check.main(["--design", str(design), "--shard", "2/2"])
    assert exited.value.code == 2 and capsys.readouterr().err == (
        "heldout_check: error: argument --shard: '2/2': expected I/N with 0 <= I < N, e.g. 0/2\n")


def test_the_studys_own_data_is_refused(tmp_path, capsys):
    design = _study(tmp_path, VIT, {"data.name": "fashion-mnist"}, steps=STUDY_STEPS)
    assert heldout_check.main(["--design", str(design)]) == 2
    assert "nothing would be held out" in capsys.readouterr().err


def test_a_packed_study_is_read_without_unpacking(tmp_path):
    from layerscale.study.run.archive import pack_runs

    design = heldout_check.Design.from_file(_study(tmp_path, VIT, DIGITS, steps=STUDY_STEPS))
    loose, loose_configs = heldout_check.prepare(design, write=False)
    pack_runs(design.study)
    import shutil

    shutil.rmtree(design.study / "runs")
    packed, packed_configs = heldout_check.prepare(design, write=False)
    assert (packed, packed_configs) == (loose, loose_configs)
    assert not (design.study / "runs").exists()  # nothing was unpacked into the study


# --- the whole check on a tiny digits ViT -----------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("heldout")
    design = _study(root, VIT, DIGITS, steps=STUDY_STEPS)
    assert heldout_check.main(["--design", str(design), "--shard", "1/2"]) == 0
    assert heldout_check.main(["--design", str(design), "--shard", "0/2"]) == 0
    assert heldout_check.main(["--design", str(design), "--collect"]) == 0
    return root, design, root / "study" / "heldout"


def test_the_runs_use_the_chosen_rates_and_only_the_designs_keys_change(pipeline):
    from layerscale.train.config.config_file import load_config_file

    root, _, out = pipeline
    check = json.loads((out / "check.json").read_text())
    assert check["rates"] == RATES  # the tuned rows of results.csv, not the shared row's 0.1
    assert {c["key"]: (c["study"], c["heldout"]) for c in check["changes"]} == {
        "data.name": ("fashion-mnist", "digits"), "model.patch_size": (7, 2), "optim.max_steps": (0, STUDY_STEPS),
        "optim.epochs": (1, 2)}
    assert check["budget"] == {"rule": "steps", "study_steps": STUDY_STEPS, "steps_per_epoch": 20,
                               "heldout_steps": STUDY_STEPS}
    assert check["study_row"]["verdict"] == "better" and check["study_row"]["p_adj"] == "0.012"
    for method, lr in RATES.items():
        for seed in (0, 1, 2):
            run_id = heldout_check.run_name(method, 2, lr, seed)
            study = load_config_file(root / "study" / "runs" / run_id / "config.yaml")
            held = load_config_file(out / "runs" / run_id / "config.yaml")
            assert _differences(study, held) == {
                "data.name": ("fashion-mnist", "digits"), "model.patch_size": (7, 2),
                "optim.max_steps": (0, STUDY_STEPS), "optim.epochs": (1, 2),
                "run.out_dir": (study["run"]["out_dir"], str(out / "runs" / run_id))}
    runs = _rows(out / "runs.csv")
    assert list(runs[0]) == RUN_FIELDS
    assert len(runs) == 6 and {r["status"] for r in runs} == {"finished"}
    assert {(r["method"], float(r["lr"])) for r in runs} == set(RATES.items())
    assert all(0 <= float(r["test"]) <= 100 and float(r["train_s"]) >= 0 for r in runs)
    assert all(int(r["steps"]) <= STUDY_STEPS for r in runs)  # early stopping may end a run sooner


def test_the_paired_difference_by_hand(pipeline):
    _, _, out = pipeline
    runs = _rows(out / "runs.csv")
    test = {m: {int(r["seed"]): float(r["test"]) for r in runs if r["method"] == m} for m in RATES}
    diffs = [test["layerscale"][s] - test["prenorm"][s] for s in (0, 1, 2)]
    mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
    rows = {(r["kind"], r["source"], r["method"]): r for r in _rows(out / "results.csv")}
    held = rows[("difference", "heldout", "layerscale")]
    assert float(held["mean"]) == pytest.approx(mean, abs=1e-12) and held["n"] == "3"
    assert held["adjustment"] == "none" and held["p_adj"] == ""
    text = (out / "results.md").read_text(encoding="utf-8")
    assert "no multiplicity adjustment" in text and "| study (primary) | fashion-mnist | 5 | +1.2 [0.5, 2.0]" in text
    if sd == 0:
        assert held["verdict"] == "no spread"
        return
    half = 4.302652729911275 * sd / math.sqrt(3)  # t_{0.975, 2}
    assert float(held["low"]) == pytest.approx(max(mean - half, -100), abs=1e-9)
    assert float(held["high"]) == pytest.approx(min(mean + half, 100), abs=1e-9)
    t = abs(mean) / (sd / math.sqrt(3))
    p = 1 - t / math.sqrt(t * t + 2)  # two-sided p of Student's t with 2 degrees of freedom
    assert float(held["p_raw"]) == pytest.approx(p, rel=1e-8)
    expected = "within noise" if p >= 0.05 else ("better" if mean > 0 else "worse")
    assert held["verdict"] == expected and f"Held-out verdict: {expected};" in text
    study = rows[("difference", "study", "layerscale")]
    assert (study["mean"], study["p_adj"], study["verdict"], study["adjustment"]) == ("1.25", "0.012", "better",
                                                                                       "holm")


def test_a_second_pass_retrains_nothing_and_report_only_is_byte_identical(pipeline):
    _, design, out = pipeline
    summaries = sorted((out / "runs").rglob("summary.json"))
    stamps = [p.stat().st_mtime_ns for p in summaries]
    assert heldout_check.main(["--design", str(design)]) == 0
    assert [p.stat().st_mtime_ns for p in summaries] == stamps
    before = {name: (out / name).read_bytes() for name in ("results.md", "results.csv")}
    for name in before:
        (out / name).unlink()
    assert heldout_check.main(["--design", str(design), "--report-only"]) == 0
    assert {name: (out / name).read_bytes() for name in before} == before


def test_the_results_page_block_is_the_report_at_its_heading_level(pipeline, tmp_path):
    from evidence.heldout_report import heldout_sections
    from evidence.results_page import Study, render_block

    _, _, out = pipeline
    report = (out / "results.md").read_text(encoding="utf-8")
    assert report.split("do not edit -->\n\n", 1)[1] == "\n".join(heldout_sections(out, "##"))
    block = render_block("fashion-heldout", {"fashion": Study("fashion", [], {}, [], out.parent)})
    assert block == "\n".join(heldout_sections(out, "####")) + "\n"
    assert block.startswith("Design: ") and "#### The comparison" in block and "| held-out | digits |" in block
    before = render_block("lm-heldout", {"lm": Study("lm", [], {}, [], tmp_path)})
    assert before.startswith("Not run yet: the held-out check runs once the redo has chosen")


def test_an_unfinished_run_without_a_checkpoint_is_trained_again_from_its_start(pipeline):
    _, design, out = pipeline
    run = out / "runs" / heldout_check.run_name("prenorm", 2, RATES["prenorm"], 2)
    kill_before_first_checkpoint(run)
    assert heldout_check.main(["--design", str(design), "--shard", "0/1"]) == 0
    assert (run / "summary.json").is_file() and not (run / "leftover").exists()


def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_one(pipeline, tmp_path,
                                                                                           capsys):
    import shutil

    from layerscale.study.run.retrain import resumable, run_outcome
    from layerscale.train.config.config_file import load_config_file

    _, design_path, out = pipeline
    run = out / "runs" / heldout_check.run_name("layerscale", 2, RATES["layerscale"], 1)
    uninterrupted = tmp_path / "uninterrupted"
    shutil.copytree(run, uninterrupted)
    raw = load_config_file(run / "config.yaml")  # the design's config, as the runner built it
    shutil.rmtree(run)
    kill_after_step(raw, run, 10)
    assert resumable(run, raw) and not resumable(run, {**raw, "optim": {**raw["optim"], "lr": 1e-2}})
    capsys.readouterr()
    assert heldout_check.main(["--design", str(design_path), "--shard", "0/1"]) == 0
    assert f"{run.name}: resumed and trained" in capsys.readouterr().out  # not trained again from step 0
    ends = [run_outcome(folder, True) for folder in (run, uninterrupted)]
    assert ends[0]["status"] == "finished" and ends[0]["steps"] == ends[1]["steps"]
    assert (ends[0]["val"], ends[0]["test"]) == (ends[1]["val"], ends[1]["test"])  # bitwise: the same path


# --- the language-model variant ---------------------------------------------------------------------------------------

def _pods(folder: Path) -> Path:
    folder.mkdir()
    (folder / "perlfoo.pod").write_text("=head1 NAME\n\nperlfoo - a tiny pod\n\n" + "Some text. " * 300)
    (folder / "perlbar.pod").write_text("=head1 NAME\n\nperlbar - another\n\n" + "More words here. " * 300)
    (folder / "notes.txt").write_text("not a pod " * 50)  # the glob leaves it out
    return folder


def test_the_language_model_check_builds_its_config_and_trains(tmp_path, capsys):
    import torch

    torch.set_num_threads(1)
    pods = _pods(tmp_path / "pod")
    data = {"data.path": str(pods / "*.pod")}
    design_path = _study(tmp_path, GPT, data, steps=10, seeds=(0,))
    design = heldout_check.Design.from_file(design_path)
    check, configs = heldout_check.prepare(design, write=False)
    assert {c["key"]: (c["study"], c["heldout"]) for c in check["changes"]} == {
        "data.path": ("/usr/share/vim/vim90/doc/*.txt", str(pods / "*.pod"))}
    assert not check["classification"] and check["metric"] == "test bits per byte"
    assert check["budget"]["heldout_steps"] == 10 and check["budget"]["steps_per_epoch"] > 10
    joined = (pods / "perlbar.pod").read_bytes() + b"\n" + (pods / "perlfoo.pod").read_bytes()  # sorted paths
    assert check["corpus"] == {"files": 2, "bytes": len(joined), "sha256": hashlib.sha256(joined).hexdigest()}
    raw = configs[("prenorm", RATES["prenorm"], 0)]
    assert raw["data"]["path"] == str(pods / "*.pod") and raw["optim"]["lr"] == RATES["prenorm"]
    assert heldout_check.main(["--design", str(design_path), "--shard", "0/2"]) == 0  # the reference's one run
    assert heldout_check.main(["--design", str(design_path), "--collect"]) == 0
    runs = {r["method"]: r for r in _rows(design.out / "runs.csv")}
    assert runs["prenorm"]["status"] == "finished" and runs["prenorm"]["steps"] == "10"
    assert 0 < float(runs["prenorm"]["test"]) < 8  # bits per byte
    assert runs["layerscale"]["status"] == "pending"
    text = (design.out / "results.md").read_text(encoding="utf-8")
    assert "not complete: 0 of 1 seeds paired" in text and "bits per byte" in text
    assert f"2 files, {len(joined):,} bytes joined" in text


def test_data_from_a_package_that_is_not_installed_is_refused(tmp_path, capsys):
    design = _study(tmp_path, GPT, {"data.path": str(_pods(tmp_path / "pod") / "*.pod")}, steps=10, seeds=(0,))
    raw = json.loads(design.read_text())
    design.write_text(json.dumps({**raw, "package": "layerscale-no-such-package"}))
    assert heldout_check.main(["--design", str(design)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Debian package layerscale-no-such-package" in err


def test_a_missing_corpus_is_refused_in_one_line(tmp_path, capsys):
    design = _study(tmp_path, GPT, {"data.path": str(tmp_path / "absent" / "*.pod")}, steps=10, seeds=(0,))
    assert heldout_check.main(["--design", str(design)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no text file matches" in err


@pytest.mark.parametrize("heldout, study, expected", [
    ("better", "better", "replicated:"), ("worse", "worse", "replicated:"),
    ("within noise", "better", "inconclusive: not replicated at this power"),
    ("within noise", "worse", "inconclusive: not replicated at this power"),
    ("worse", "better", "contradicted:"), ("better", "within noise", "inconclusive: a difference on the held-out"),
    ("within noise", "within noise", "inconclusive: within noise both times"),
    ("no spread", "better", "inconclusive: no spread"),
])
def test_the_held_out_verdict_reads_replicated_contradicted_or_inconclusive(heldout, study, expected):
    assert reading(heldout, study).startswith(expected)


# --- the equal-rate design (issue 60) -------------------------------------------------------------------------------

def test_the_equal_rate_design_runs_both_methods_at_each_ones_chosen_rate(tmp_path):
    """Each method at its chosen rate (the pre-registered comparison, first and in the same order as before), then
    both at the reference's rate and both at the compared method's: only the two new (method, rate) pairs are added,
    each from the study's recorded config of that method at that rate."""
    design_path = _study(tmp_path, VIT, DIGITS, steps=STUDY_STEPS, others=(0.001, 0.003), equal_rates=True)
    design = heldout_check.Design.from_file(design_path)
    assert design.equal_rates
    equal = heldout_check.equal_rates(design, RATES)
    assert equal == [0.001, 0.003]
    todo = heldout_check.units(design, RATES, equal)
    assert todo[:6] == [(m, RATES[m], s) for s in (0, 1, 2) for m in ("prenorm", "layerscale")]
    assert todo[6:] == [("layerscale", 0.001, s) for s in (0, 1, 2)] + [("prenorm", 0.003, s) for s in (0, 1, 2)]
    check, configs = heldout_check.prepare(design, write=False)
    assert check["equal_rates"] == [0.001, 0.003] and check["rates"] == RATES
    assert set(configs) == set(todo)
    for (method, lr, seed), raw in configs.items():
        assert raw["model"]["residual"] == method and raw["optim"]["lr"] == lr and raw["run"]["seed"] == seed
        assert raw["run"]["out_dir"] == str(design.out / "runs" / heldout_check.run_name(method, 2, lr, seed))
    plain = heldout_check.Design.from_file(_study(tmp_path / "plain", VIT, DIGITS, steps=STUDY_STEPS))
    assert heldout_check.units(plain, RATES, heldout_check.equal_rates(plain, RATES)) == todo[:6]
    assert "equal_rates" not in heldout_check.prepare(plain, write=False)[0]  # earlier checks read back unchanged


def test_the_equal_rate_design_keeps_the_committed_rows_of_runs_not_on_this_machine(tmp_path, capsys):
    """Run folders are not committed: a unit whose folder is absent and whose committed runs.csv row has ended is
    that record, neither trained again nor listed as to train; only the new equal-rate runs are."""
    design_path = _study(tmp_path, VIT, DIGITS, steps=STUDY_STEPS, others=(0.001, 0.003), equal_rates=True)
    design = heldout_check.Design.from_file(design_path)
    design.out.mkdir(parents=True)
    rows = ["method,lr,seed,status,val,test,train_s,steps"]
    rows += [f"{m},{RATES[m]},{s},finished,90.0,{91.0 + s},12.5,{STUDY_STEPS}" for s in (0, 1, 2)
             for m in ("prenorm", "layerscale")]
    (design.out / "runs.csv").write_text("\n".join(rows) + "\n")
    text = heldout_check.estimate(design)
    assert "12 runs: 6 already ended" in text and "6 to train" in text
    assert "layerscale-d2-lr0.001-s0" in text and "prenorm-d2-lr0.003-s2" in text
    assert "prenorm-d2-lr0.001-s0" not in text.split("to train: ")[1].splitlines()[0]
    check, _ = heldout_check.prepare(design, write=False)
    kept = heldout_check.run_rows(design, check)
    assert [r["status"] for r in kept[:6]] == ["finished"] * 6 and kept[0]["test"] == 91.0
    assert [r["status"] for r in kept[6:]] == ["pending"] * 6


def _planted(rates: dict, equal: list, tests: dict) -> tuple[dict, list[dict]]:
    """A check.json and runs.csv rows (typed) from ``tests[(method, lr)] = [seed 0, 1, 2]``."""
    check = {"study": "tiny", "study_folder": "study", "addendum": "DESIGN.md", "method": "layerscale",
             "reference": "prenorm", "depth": 48, "seeds": [0, 1, 2], "classification": True,
             "metric": "test accuracy (%)", "rates": rates, "study_data": "fashion-mnist", "heldout_data": "digits",
             "study_row": {"family": "primary", "diff_n": "5", "diff_mean": "1.5", "diff_ci_low": "1.1",
                           "diff_ci_high": "1.8", "diff_truncated": "", "p_raw": "0.0003", "p_adj": "0.0013",
                           "adjustment": "holm", "verdict": "better", "diff_per_seed": "", "params": "1",
                           "bootstrap_low": "", "bootstrap_high": ""},
             "reference_row": {"params": "1"}, "data_description": "digits", "corpus": None, "changes": [],
             "budget": {"rule": "steps", "study_steps": 10, "steps_per_epoch": 5, "heldout_steps": 10},
             "params": {"prenorm": 1, "layerscale": 1}}
    if equal is not None:
        check["equal_rates"] = equal
    runs = [{"method": m, "lr": lr, "seed": s, "status": "finished", "val": 90.0, "test": v, "train_s": 1.0,
             "steps": 10} for (m, lr), values in tests.items() for s, v in enumerate(values)]
    return check, runs


TESTS = {("prenorm", 0.001): [95.8, 95.5, 95.5], ("layerscale", 0.003): [99.2, 98.1, 98.6],
         ("layerscale", 0.001): [97.0, 96.1, 96.9], ("prenorm", 0.003): [96.0, 96.4, 95.1]}


def test_equal_rate_comparisons_by_hand_with_holm_over_the_two():
    from evidence.heldout_report import equal_rate_comparisons, report_text, result_rows

    rates = {"prenorm": 0.001, "layerscale": 0.003}
    check, runs = _planted(rates, [0.001, 0.003], TESTS)
    plain_check, plain_runs = _planted(rates, None, {k: v for k, v in TESTS.items() if rates[k[0]] == k[1]})
    # the pre-registered reading is untouched by the extra runs
    assert result_rows(check, runs)[:4] == result_rows(plain_check, plain_runs)
    entries = equal_rate_comparisons(check, runs)
    p = {}
    for e in entries:
        diffs = [a - b for a, b in zip(TESTS[("layerscale", e["lr"])], TESTS[("prenorm", e["lr"])])]
        mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
        t = abs(mean) / (sd / math.sqrt(3))
        p[e["lr"]] = 1 - t / math.sqrt(t * t + 2)
        assert e["diff"].mean == pytest.approx(mean, abs=1e-12) and e["p"] == pytest.approx(p[e["lr"]], rel=1e-8)
        assert not e["same_as_chosen"] and e["adjustment"] == "holm (2 equal-rate)"
    low, high = sorted(p.values())
    expected = {lr: (2 * low if v == low else max(2 * low, high)) for lr, v in p.items()}
    for e in entries:
        assert e["p_adj"] == pytest.approx(min(1.0, expected[e["lr"]]), rel=1e-8)
        assert e["verdict"] == ("within noise" if e["p_adj"] >= 0.05 else "better" if e["diff"].mean > 0
                                else "worse")
        assert e["reading"].split(":")[0] in ("replicated", "contradicted", "inconclusive")
    rows = [r for r in result_rows(check, runs) if r["source"] == "heldout-equal-rate"]
    differences = [r for r in rows if r["kind"] == "difference"]
    assert [(r["lr"], r["reference_lr"]) for r in differences] == [(0.001, 0.001), (0.003, 0.003)]
    # the cells that are not the pre-registered comparison's: each method at the other's rate, with its interval
    cells = [r for r in rows if r["kind"] == "cell"]
    assert [(r["method"], r["lr"]) for r in cells] == [
        (m, lr) for lr in (0.001, 0.003) for m in ("prenorm", "layerscale") if rates[m] != lr]
    for r in cells:
        values = TESTS[(r["method"], r["lr"])]
        assert r["n"] == 3 and r["mean"] == pytest.approx(statistics.fmean(values), abs=1e-12)
        assert r["low"] < r["mean"] < r["high"]
    text = report_text(check, runs)
    assert "## Both methods at the same rate" in text and "12 of 12 runs ended" in text
    assert "| 0.001 | 3 |" in text and "| layerscale | 0.001 | " in text and "| prenorm | 0.003 | " in text
    assert "6 of 6 held-out runs ended" in text  # the pre-registered comparison counts its own runs


def test_a_rate_both_methods_chose_is_the_pre_registered_comparison_counted_once():
    from evidence.heldout_report import equal_rate_comparisons, heldout_comparison, report_text

    rates = {"prenorm": 0.003, "layerscale": 0.003}
    tests = {("prenorm", 0.003): [2.5, 2.6, 2.4], ("layerscale", 0.003): [2.45, 2.5, 2.41]}
    check, runs = _planted(rates, [0.003], tests)
    check["classification"], check["study_row"]["verdict"] = False, "within noise"
    (entry,) = equal_rate_comparisons(check, runs)
    *_, chosen_verdict, _ = heldout_comparison(check, runs)
    assert entry["same_as_chosen"] and entry["p_adj"] is None and entry["verdict"] == chosen_verdict
    assert entry["adjustment"] == "none"
    assert "the comparison above (counted once)" in report_text(check, runs)


def test_a_check_without_the_equal_rate_design_reports_as_before():
    from evidence.heldout_report import equal_rate_comparisons, report_text

    check, runs = _planted({"prenorm": 0.001, "layerscale": 0.003}, None,
                           {k: v for k, v in TESTS.items() if k in (("prenorm", 0.001), ("layerscale", 0.003))})
    assert equal_rate_comparisons(check, runs) == []
    assert "same rate" not in report_text(check, runs)
