"""scripts/grow_evidence.py (docs/results/grow/DESIGN.md): each arm's config changes exactly the design's keys; the
whole pipeline runs on a tiny digits ViT source (train, grow, the four arms, rate choice, effective depth, collect,
report), resumes without retraining, and --report-only rebuilds results.md byte for byte; a primary comparison
checked by hand against the per-seed values."""

from __future__ import annotations

import csv
import json
import math
import shutil
import statistics
import sys
from pathlib import Path

import pytest

from layerscale.train.config.config_file import dotted_items

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import grow_evidence  # noqa: E402

from killed_runs import kill_after_step, kill_before_first_checkpoint  # noqa: E402

FASHION_LIKE = {
    "model": {"name": "vit", "depth": 12, "embed_dim": 64, "residual": "layerscale"},
    "data": {"name": "fashion-mnist", "batch_size": 64, "validation_fraction": 0.1},
    "optim": {"epochs": 2, "max_steps": 0, "lr": 0.001, "warmup_steps": 84, "trainable": "all"},
    "run": {"out_dir": "docs/results/fashion/runs/x", "init_from": None, "seed": 0, "progress": "none",
            "patience": 3},
}
LM_LIKE = {
    "model": {"name": "gpt", "depth": 24, "embed_dim": 64, "residual": "layerscale"},
    "data": {"name": "text", "path": "/somewhere/*.txt", "batch_size": 16, "validation_fraction": 0.05},
    "optim": {"epochs": 1, "max_steps": 1200, "lr": 0.001, "warmup_steps": 60, "trainable": "all"},
    "run": {"out_dir": "docs/results/lm/runs/x", "init_from": None, "seed": 0, "progress": "none", "patience": 3},
}


def _changes(before: dict, after: dict) -> dict:
    b, a = dotted_items(before), dotted_items(after)
    assert set(a) >= set(b)
    return {k: a[k] for k in a if b.get(k, "<absent>") != a[k]}


@pytest.mark.parametrize("source, steps, expected", [
    (FASHION_LIKE, 1686, {
        "a": {"optim.max_steps": 1686, "optim.warmup_steps": 84, "run.init_from": "SRC"},
        "b": {"optim.max_steps": 1686, "optim.warmup_steps": 84, "run.init_from": "GROWN", "model.depth": 24},
        "c": {"optim.max_steps": 1686, "optim.warmup_steps": 84, "run.init_from": "GROWN", "model.depth": 24,
              "optim.trainable": "new_blocks"},
        "d": {"optim.max_steps": 3372, "optim.warmup_steps": 169, "model.depth": 24, "optim.epochs": 4}}),
    (LM_LIKE, 1200, {
        "a": {"optim.max_steps": 1200, "optim.warmup_steps": 60, "run.init_from": "SRC"},
        "b": {"optim.max_steps": 1200, "optim.warmup_steps": 60, "run.init_from": "GROWN", "model.depth": 48},
        "c": {"optim.max_steps": 1200, "optim.warmup_steps": 60, "run.init_from": "GROWN", "model.depth": 48,
              "optim.trainable": "new_blocks"},
        "d": {"optim.max_steps": 2400, "optim.warmup_steps": 120, "model.depth": 48, "optim.epochs": 2}}),
])
@pytest.mark.parametrize("lr, seed", [(3e-3, 2), (3e-4, 1)])
def test_each_arm_changes_exactly_the_designs_keys(source, steps, expected, lr, seed):
    for arm, changes in expected.items():
        raw = grow_evidence.arm_config(source, arm, lr, seed, source_steps=steps, source_dir="SRC",
                                       grown_dir="GROWN", out="OUT")
        wanted = {**changes, "optim.lr": lr, "run.seed": seed, "run.out_dir": "OUT", "run.patience": 0}
        flat = dotted_items(raw)
        assert {k: flat[k] for k in wanted} == wanted, arm  # every key the design sets has its value
        # and nothing else changed (a key already at its value is no change: the LM's 1200 steps, warmup 60)
        before = dotted_items(source)
        assert _changes(source, raw) == {k: v for k, v in wanted.items() if before.get(k, "<absent>") != v}
    assert source["optim"]["lr"] == 0.001 and source["model"]["depth"] in (12, 24)  # the source is not edited


def test_an_unknown_arm_is_refused():
    with pytest.raises(ValueError, match="unknown arm"):
        grow_evidence.arm_config(FASHION_LIKE, "e", 1e-3, 0, source_steps=10, source_dir="S", grown_dir="G",
                                 out="O")


def _tiny_study(root: Path) -> Path:
    from layerscale.train.config.schema import TrainConfig
    from layerscale.train.config.config_file import dump_config

    config = {"model": {"name": "vit", "embed_dim": 16, "depth": 2, "num_heads": 2, "patch_size": 4,
                        "residual": "layerscale"},
              "data": {"name": "digits", "batch_size": 64, "validation_fraction": 0.1, "eval_batch_size": 500,
                       "augment": False},
              "optim": {"epochs": 1, "max_steps": 12, "warmup_steps": 1, "lr": 1e-3},
              "run": {"seed": 0, "log_every_steps": 4, "progress": "none", "keep_checkpoints": 1,
                      "out_dir": "elsewhere"},
              "diagnostics": {"enabled": False}}
    run = root / "study" / "runs" / "ls-d2-s0"
    run.mkdir(parents=True)
    (run / "config.yaml").write_text(dump_config(TrainConfig.from_dict(config).to_dict()))
    (root / "study" / "runs.csv").write_text("run_id,test\nls-d2-s0,12.5\n")
    design = root / "design.json"
    design.write_text(json.dumps({"out": "out", "sources": [{"key": "tiny", "study": str(root / "study"),
                                                              "run_id": "ls-d2-s0"}],
                                  "rates": [0.001, 0.003], "seeds": [0, 1, 2], "examples": 200}))
    return design


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory):
    import torch

    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("grow")
    design = _tiny_study(root)
    assert grow_evidence.main(["--design", str(design), "--shard", "1/2"]) == 0  # half the runs; the source
    assert grow_evidence.main(["--design", str(design), "--shard", "0/2"]) == 0  # the rest, then every analysis
    assert grow_evidence.main(["--design", str(design), "--shard", "1/2"]) == 0  # nothing left to do
    assert grow_evidence.main(["--design", str(design), "--collect"]) == 0
    return root, design, root / "out"


def test_the_pipeline_writes_every_table_and_records_the_rate_choice(pipeline):
    root, _, out = pipeline
    for name in ("sources.csv", "runs.csv", "effective_depth.csv", "results.csv", "results.md"):
        assert (out / name).is_file(), name
    source = _rows(out / "sources.csv")[0]
    assert source["identical"] == "True" and abs(float(source["loss_difference"])) <= 1e-6 * float(source["source_loss"])
    assert float(source["committed_test"]) == 12.5 and source["steps"] == "12"
    runs = _rows(out / "runs.csv")
    assert len(runs) == 4 * 2 * 3 and all(r["status"] == "finished" for r in runs)
    assert {r["steps"] for r in runs if r["arm"] != "d"} == {"12"} and {r["steps"] for r in runs
                                                                         if r["arm"] == "d"} == {"24"}
    assert all(float(r["train_s"]) >= 0 for r in runs)
    cells = {r["arm"]: r for r in _rows(out / "results.csv") if r["kind"] == "cell"}
    assert set(cells) == {"a", "b", "c", "d"}
    for arm, cell in cells.items():
        chosen = float(cell["lr"])
        assert chosen in (0.001, 0.003) and cell["tied"]
        # the test metric only for the chosen rate
        assert all((r["test"] != "") == (float(r["lr"]) == chosen) for r in runs if r["arm"] == arm)
        assert [float(v) for v in cell["values"].split()] == [
            float(r["test"]) for r in runs if r["arm"] == arm and float(r["lr"]) == chosen]
    text = (out / "results.md").read_text(encoding="utf-8")
    assert "## Rate choice" in text and "## Effective depth" in text and "primary (Holm)" in text
    depths = _rows(out / "effective_depth.csv")
    assert len(depths) == 1 + 4 * 3  # the source and every final model at its chosen rate
    assert all(float(d["low"]) <= float(d["effective_depth"]) <= float(d["high"]) for d in depths)
    grown_config = (out / "runs" / "tiny" / "c-lr0.001-s0" / "config.yaml").read_text()
    assert "trainable: new_blocks" in grown_config and "depth: 4" in grown_config


def test_a_second_pass_retrains_nothing_and_report_only_is_byte_identical(pipeline):
    _, design, out = pipeline
    summaries = sorted((out / "runs").rglob("summary.json"))
    stamps = [p.stat().st_mtime_ns for p in summaries]
    assert grow_evidence.main(["--design", str(design), "--shard", "0/1"]) == 0
    assert [p.stat().st_mtime_ns for p in summaries] == stamps
    before = {name: (out / name).read_bytes() for name in ("results.md", "results.csv")}
    for name in before:
        (out / name).unlink()
    assert grow_evidence.main(["--design", str(design), "--report-only"]) == 0
    assert {name: (out / name).read_bytes() for name in before} == before


def test_an_unfinished_run_without_a_checkpoint_is_trained_again_from_its_start(pipeline):
    _, design, out = pipeline
    run = out / "runs" / "tiny" / "a-lr0.003-s2"
    kill_before_first_checkpoint(run)
    assert grow_evidence.main(["--design", str(design), "--shard", "0/1"]) == 0
    assert (run / "summary.json").is_file() and not (run / "leftover").exists()


def test_an_interrupted_run_resumes_from_its_checkpoint_and_ends_as_an_uninterrupted_one(pipeline, tmp_path,
                                                                                           capsys):
    from layerscale.study.run.retrain import committed_config, resumable, run_outcome
    import torch
    from safetensors.torch import load_file

    _, design_path, out = pipeline
    design = grow_evidence.Design.from_file(design_path)
    run = out / "runs" / "tiny" / "b-lr0.003-s1"
    uninterrupted = tmp_path / "uninterrupted"
    shutil.copytree(run, uninterrupted)
    shutil.rmtree(run)
    source = design.sources[0]
    raw = grow_evidence.arm_config(committed_config(design.study(source), source["run_id"]), "b", 3e-3, 1,
                                   source_steps=12, source_dir=out / "runs" / "tiny" / "source",
                                   grown_dir=out / "runs" / "tiny" / "grown", out=run)
    kill_after_step(raw, run, 5)
    assert not (run / "summary.json").is_file() and resumable(run, raw)
    capsys.readouterr()
    assert grow_evidence.main(["--design", str(design_path), "--shard", "0/1"]) == 0
    assert "tiny/b-lr0.003-s1: resumed and trained" in capsys.readouterr().out  # not trained again from step 0
    ends = [run_outcome(folder, True) for folder in (run, uninterrupted)]
    assert ends[0]["status"] == "finished" and ends[0]["steps"] == 12
    assert (ends[0]["val"], ends[0]["test"]) == (ends[1]["val"], ends[1]["test"])  # bitwise: same recipe, same path
    weights = [load_file(folder / "checkpoints" / "step_00000012" / "model.safetensors")
               for folder in (run, uninterrupted)]
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])  # the final weights, bitwise
    outcomes = [json.loads((folder / "test_outcomes.json").read_text()) for folder in (run, uninterrupted)]
    assert outcomes[0] == outcomes[1]
    other = {**raw, "optim": {**raw["optim"], "lr": 1e-3}}
    assert not resumable(run, other)  # a folder of another config is never resumed


def test_estimate_measures_the_runs_ended_and_what_remains(pipeline, capsys):
    _, design, out = pipeline
    assert grow_evidence.main(["--design", str(design), "--estimate"]) == 0
    text = capsys.readouterr().out
    assert all(f"tiny arm {arm}: 6 of 6 ended" in text for arm in "abcd")
    assert "pending: 0 runs, about 0.0 CPU-hours" in text
    summary = out / "runs" / "tiny" / "d-lr0.001-s1" / "summary.json"
    kept = summary.read_bytes()
    summary.unlink()  # as if the run were still going
    try:
        assert grow_evidence.main(["--design", str(design), "--estimate"]) == 0
        text = capsys.readouterr().out
    finally:
        summary.write_bytes(kept)
    assert "tiny arm d: 5 of 6 ended" in text and "pending: 1 runs" in text


def test_a_primary_comparison_by_hand(pipeline):
    _, _, out = pipeline
    runs = _rows(out / "runs.csv")
    results = _rows(out / "results.csv")
    cells = {r["arm"]: float(r["lr"]) for r in results if r["kind"] == "cell"}
    primary = {r["comparison"]: r for r in results if r["kind"] == "comparison" and r["family"] == "primary"}
    assert set(primary) == {"b-a", "c-a"}
    by_hand = {}
    for name in ("b-a", "c-a"):
        first, second = name.split("-")
        test = {arm: {int(r["seed"]): float(r["test"]) for r in runs if r["arm"] == arm and float(r["lr"]) == cells[arm]}
                for arm in (first, second)}
        diffs = [test[first][s] - test[second][s] for s in (0, 1, 2)]
        mean, sd = statistics.fmean(diffs), statistics.stdev(diffs)
        row = primary[name]
        assert float(row["mean"]) == pytest.approx(mean, abs=1e-12)
        if sd == 0:
            by_hand[name] = None
            continue
        half = 4.302652729911275 * sd / math.sqrt(3)  # t_{0.975, 2}
        assert float(row["low"]) == pytest.approx(max(mean - half, -100), abs=1e-9)
        assert float(row["high"]) == pytest.approx(min(mean + half, 100), abs=1e-9)
        t = abs(mean) / (sd / math.sqrt(3))
        by_hand[name] = 1 - t / math.sqrt(t * t + 2)  # two-sided p of Student's t with 2 degrees of freedom
        assert float(row["p_raw"]) == pytest.approx(by_hand[name], rel=1e-8)
    present = sorted((p, n) for n, p in by_hand.items() if p is not None)
    assert present, "the tiny runs gave neither primary difference any spread"
    adjusted, running = {}, 0.0
    for rank, (p, name) in enumerate(present):  # Holm over the family
        running = max(running, min(1.0, (len(present) - rank) * p))
        adjusted[name] = running
    for name, p in adjusted.items():
        assert float(primary[name]["p_adj"]) == pytest.approx(p, rel=1e-8)


def test_the_identity_check_allows_last_bit_rounding_only():
    base = {"source_loss": 0.38085921164602043, "source_accuracy": 0.8619, "grown_accuracy": 0.8619}
    assert grow_evidence.with_identity({**base, "grown_loss": 0.38085921091369235})["identical"]  # measured
    assert not grow_evidence.with_identity({**base, "grown_loss": 0.3809})["identical"]
    assert not grow_evidence.with_identity({**base, "grown_loss": base["source_loss"], "grown_accuracy": 0.862})[
        "identical"]


def test_an_analysis_another_live_process_holds_is_left_to_it(tmp_path, monkeypatch):
    import fcntl

    design = grow_evidence.Design(out=tmp_path)
    lock = design.folder("fashion") / "depth" / "source.lock"
    lock.parent.mkdir(parents=True)
    import layerscale.analysis

    monkeypatch.setattr(layerscale.analysis, "analyze_run", lambda *a, **k: pytest.fail("analysed a held model"))
    with open(lock, "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        grow_evidence.analyse(design, "fashion", "source", tmp_path / "nowhere")
    assert not (lock.parent / "source.json").exists()
    with grow_evidence._locked(lock, wait=False) as mine:  # released: the next process may take it
        assert mine


def test_a_run_another_live_process_trains_is_waited_for_and_nothing_else(tmp_path):
    import fcntl

    design = grow_evidence.Design(out=tmp_path)
    unit = grow_evidence.units(design)[0]
    run_dir = design.folder(unit["source"]) / grow_evidence.run_name(unit["arm"], unit["lr"], unit["seed"])
    run_dir.mkdir(parents=True)
    assert not grow_evidence.trained_elsewhere(design)  # an unfinished run nobody holds: left to a later pass
    with open(run_dir / ".lock", "a") as other:
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert grow_evidence.trained_elsewhere(design)
    assert not grow_evidence.trained_elsewhere(design)


def test_the_analyses_wait_for_what_another_process_still_trains(tmp_path, monkeypatch):
    design = grow_evidence.Design(out=tmp_path)
    model = ("fashion", "b-lr0.001-s0", tmp_path / "run")
    # The other process trains the arm's last run for two looks; then the arm's models become analysable.
    looks = iter([[], [], [model], [model]])
    training = iter([True, True])
    done, slept = [], []
    monkeypatch.setattr(grow_evidence, "depth_units", lambda d: next(looks))
    monkeypatch.setattr(grow_evidence, "trained_elsewhere", lambda d: next(training, False))
    monkeypatch.setattr(grow_evidence, "analyse", lambda d, key, name, run_dir: done.append((key, name)))
    monkeypatch.setattr(grow_evidence.time, "sleep", slept.append)
    grow_evidence.analyse_all(design, wait_s=7)
    assert done == [("fashion", "b-lr0.001-s0")] and slept == [7, 7]
