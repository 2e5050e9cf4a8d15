"""``run.eval_batches`` cuts the periodic evaluations only: the evaluation a run ends on, which ``summary.json`` and
the final line report, reads the whole split (audit 2026-12-07, section 9: ``gpt_text``'s ``eval_batches: 20``
reported the first 12 % of its held-out text as the result)."""

import json

from train_helpers import tiny_config

from layerscale.train import run
from layerscale.train.records.metrics_log import read_metrics

DIGITS_TEST, DIGITS_VALIDATION = 359, 287  # digits at test_fraction 0.2; 20 % of the 1,437 training images


def _records(run_dir, split):
    return [r for r in read_metrics(run_dir / "metrics.jsonl") if r.get("split") == split and "event" not in r]


def _summary(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def test_the_evaluation_a_run_ends_on_reads_the_whole_split(tmp_path):
    config = tiny_config(data={"eval_batch_size": 32}, run={"eval_every_steps": 4, "eval_batches": 2})
    result = run(config, out=tmp_path / "r")
    evals = _records(tmp_path / "r", "eval")
    assert [(r["step"], r["samples"]) for r in evals] == [(4, 64), (8, 64), (12, DIGITS_TEST)]
    summary = _summary(tmp_path / "r")
    assert summary["metrics"]["samples"] == result.metrics["samples"] == DIGITS_TEST
    assert summary["metrics"]["loss"] == evals[-1]["loss"]


def test_an_early_stop_decided_on_part_of_the_split_reports_the_whole_split(tmp_path):
    config = tiny_config(data={"validation_fraction": 0.2, "eval_batch_size": 32},
                         optim={"max_steps": 40, "lr": 1e-9, "min_lr": 0.0},
                         run={"eval_every_steps": 2, "eval_batches": 1, "patience": 1})
    result = run(config, out=tmp_path / "r")
    stop = [r for r in read_metrics(tmp_path / "r" / "metrics.jsonl") if r.get("event") == "early_stop"]
    assert len(stop) == 1 and result.step == stop[0]["step"] < 40
    evals = _records(tmp_path / "r", "eval")
    assert [r["samples"] for r in evals[:-1]] == [32] * (len(evals) - 1)  # periodic: one batch each
    assert (evals[-1]["step"], evals[-1]["samples"]) == (result.step, DIGITS_VALIDATION)
    summary = _summary(tmp_path / "r")
    assert summary["metrics"]["samples"] == DIGITS_VALIDATION and summary["test"]["samples"] == DIGITS_TEST
    assert result.test == summary["test"]  # what the final line shows as the test numbers


def test_a_pause_evaluates_as_a_periodic_evaluation(tmp_path):
    """A pause is not the run's end: its evaluation is the one an uninterrupted run takes at that step (if any), so
    a paused and continued run stays the run never paused."""
    config = tiny_config(data={"eval_batch_size": 32}, run={"eval_every_steps": 4, "eval_batches": 2,
                                                            "stop_at_step": 4})
    run(config, out=tmp_path / "r")
    assert [(r["step"], r["samples"]) for r in _records(tmp_path / "r", "eval")] == [(4, 64)]
