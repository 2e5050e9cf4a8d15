"""``layerscale study --estimate``: the run-time arithmetic against a hand count, the remaining runs read from the
run folders, and the command trains and writes nothing."""

import copy
import json

import pytest

from layerscale.study.run.estimate import CellCost, RunShape, estimate_text, run_seconds
from layerscale.study.design.grid import StudySpec
from study_helpers import TINY_BASE

# 100 steps, epochs of 30, evaluation every 25 steps on 2 batches, a test pass of 5 batches.
SHAPE = RunShape(total_steps=100, steps_per_epoch=30, eval_every=25, eval_batches=2, test_batches=5)
COST = CellCost(step=1.0, eval_batch=0.5)


def test_a_whole_final_run_by_hand():
    # evaluations at 25, 30, 50, 60, 75, 90, 100: 7 × 2 batches × 0.5 s; test 5 × 0.5 s
    assert run_seconds(COST, SHAPE, 0, 100, final=True) == 100 + 7 + 2.5


def test_a_resumed_final_run_counts_only_what_is_left():
    # from step 50: evaluations at 60, 75, 90, 100
    assert run_seconds(COST, SHAPE, 50, 100, final=True) == 50 + 4 + 2.5


def test_a_tuning_segment_evaluates_at_its_pause_and_has_no_test():
    # to step 40: evaluations at 25, 30 and at the pause, 40
    assert run_seconds(COST, SHAPE, 0, 40, final=False) == 40 + 3
    # a pause on an evaluation step is one evaluation, not two
    assert run_seconds(COST, SHAPE, 0, 50, final=False) == 50 + 3  # 25, 30, 50
    assert run_seconds(COST, SHAPE, 40, 40, final=False) == 0.0


def test_the_evaluation_at_the_last_step_reads_the_whole_split():
    # run.eval_batches cuts periodic evaluations to 2 batches; the one at step 100 reads all 8 of the split
    cut = RunShape(total_steps=100, steps_per_epoch=30, eval_every=25, eval_batches=2, test_batches=5,
                   final_eval_batches=8)
    assert run_seconds(COST, cut, 0, 100, final=True) == 100 + 6 + 4 + 2.5
    assert run_seconds(COST, cut, 0, 50, final=False) == 50 + 3  # a pause before the end: cut, as periodic ones


def _spec(tmp_path, lrs=(1e-3, 3e-3)):
    base = copy.deepcopy(TINY_BASE)
    return StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), base, lrs=lrs, tune_seeds=1, min_budget=0.25)


def _status(run_dir, status, step):
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "study_status.json").write_text(json.dumps({"status": status, "step": step}))


def test_remaining_runs_come_from_the_run_folders(tmp_path):
    spec = _spec(tmp_path)
    costs = {cell: COST for cell in spec.cells()}
    rung = 25  # a quarter of 100 steps
    fresh = estimate_text(spec, tmp_path, costs, SHAPE, jobs=2, threads=1)
    assert "remaining tuning: 4 run segment(s)" in fresh
    # before tuning: 6 final runs at the shared rate, up to 6 more at tuned rates not known yet
    assert "remaining final runs: 6–12 run(s) (depending on the tuned rates)" in fresh
    for lr in spec.lrs:  # prenorm's tuning done, layerscale's half way
        _status(spec.run(tmp_path, "prenorm", 2, lr, spec.tune_seed, "tune").run_dir, "paused", rung)
    _status(spec.run(tmp_path, "layerscale", 2, 1e-3, spec.tune_seed, "tune").run_dir, "paused", 10)
    (tmp_path / "tuning.json").write_text(json.dumps({"cells": [
        {"method": "prenorm", "depth": 2, "chosen_lr": 0.003}, {"method": "layerscale", "depth": 2,
                                                                "chosen_lr": None}]}))
    _status(spec.run(tmp_path, "prenorm", 2, 1e-3, 0, "final").run_dir, "finished", 100)
    text = estimate_text(spec, tmp_path, costs, SHAPE, jobs=2, threads=1)
    assert "remaining tuning: 2 run segment(s)" in text
    # prenorm: 2 shared + 3 tuned left (its tuned rate 3e-3 is known); layerscale: 3 shared + 0–3 tuned
    assert "remaining final runs: 8–11 run(s)" in text
    whole = run_seconds(COST, SHAPE, 0, 100, final=True)
    tuning = run_seconds(COST, SHAPE, 10, rung, final=False) + run_seconds(COST, SHAPE, 0, rung, final=False)
    assert f"{(tuning + 8 * whole) / 2 / 60:.0f} min–{(tuning + 11 * whole) / 2 / 60:.0f} min of wall time" in text


def test_the_command_times_the_cells_and_writes_nothing(tmp_path, capsys):
    from layerscale.cli import main

    out = tmp_path / "study"
    code = main(["study", "--preset", "demo", "--methods", "prenorm,layerscale", "--depths", "1", "--seeds", "2",
                 "--lrs", "1e-3,3e-3", "--tuning", "halving", "--out", str(out), "--steps", "20", "--estimate"])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "| prenorm | 1 |" in captured.out and "| layerscale | 1 |" in captured.out
    assert "remaining tuning: 8 run segment(s)" in captured.out  # 2 cells x 2 rates x 2 tuning seeds
    assert "remaining final runs: 4–8 run(s)" in captured.out
    assert not out.exists()


def test_bad_parallelism_is_one_line(tmp_path):
    from layerscale.study.run.estimate import estimate_study

    with pytest.raises(ValueError, match="--jobs and --threads must be >= 1, got 0 and 1"):
        estimate_study(_spec(tmp_path), tmp_path / "s", jobs=0, threads=1)


@pytest.mark.parametrize("flag", ["--dry-run", "--estimate"])
def test_zero_jobs_is_refused_not_taken_as_automatic(tmp_path, capsys, flag):
    from layerscale.cli import main

    out = tmp_path / "study"
    code = main(["study", "--preset", "demo", "--jobs", "0", "--out", str(out), flag])
    err = capsys.readouterr().err.strip()
    assert code == 2 and err == "layerscale study: error: --jobs and --threads must be >= 1, got 0 and 1"
    assert not out.exists()


def test_grid_tuning_counts_every_rate_of_every_seed_as_tuning(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), copy.deepcopy(TINY_BASE), lrs=(1e-3, 3e-3),
                     tuning="grid")
    text = estimate_text(spec, tmp_path, {cell: COST for cell in spec.cells()}, SHAPE, jobs=2, threads=1)
    # the rate other than the shared one, 3 seeds, 2 cells: 6 full runs of tuning; the shared rate is the final runs
    assert "remaining tuning: 6 run segment(s)" in text
    # the tuned rate's runs are among those: the finals add the shared rate's 6, not a range up to 12
    assert "remaining final runs: 6 run(s)" in text


def test_runs_an_earlier_study_gives_are_counted_as_done(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), copy.deepcopy(TINY_BASE), lrs=(1e-3, 3e-3),
                     tuning="grid")
    costs = {cell: COST for cell in spec.cells()}
    reused = frozenset({spec.run(tmp_path, "prenorm", 2, lr, seed, "final").run_id
                        for lr in spec.lrs for seed in spec.seeds})
    whole = run_seconds(COST, SHAPE, 0, 100, final=True)
    text = estimate_text(spec, tmp_path, costs, SHAPE, jobs=1, threads=1, reused=reused,
                         reuse_from=tmp_path / "old")
    assert "reused from " + str(tmp_path / "old") + ": 6 finished run(s), counted as done" in text
    # layerscale alone is left: 3 tuning runs at 3e-3, 3 final runs at the shared rate
    assert "remaining tuning: 3 run segment(s)" in text and "remaining final runs: 3 run(s)" in text
    assert f"{6 * whole / 60:.0f} min of wall time with 1 run(s) at a time" in text


def test_estimate_study_reads_the_earlier_study_through_reuse(tmp_path, monkeypatch):
    import layerscale.study.run.estimate as estimate

    spec = StudySpec(("prenorm",), (2,), (0,), copy.deepcopy(TINY_BASE), lrs=(1e-3,), tuning="grid")
    seen = {}

    def reusable(spec_, study_dir, source_dir):
        seen["args"] = (study_dir, source_dir)
        return [spec_.run(study_dir, "prenorm", 2, 1e-3, 0, "final").run_id]

    monkeypatch.setattr("layerscale.study.run.reuse.reusable_runs", reusable)
    monkeypatch.setattr(estimate, "time_cells", lambda spec_, study_dir, threads: ({(("prenorm", 2)): COST}, SHAPE))
    text = estimate.estimate_study(spec, tmp_path / "new", jobs=1, threads=1, reuse_from=tmp_path / "old")
    assert seen["args"] == (tmp_path / "new", tmp_path / "old")
    assert "1 finished run(s), counted as done" in text and "remaining final runs: 0 run(s), 0 s" in text
