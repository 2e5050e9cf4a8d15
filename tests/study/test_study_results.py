import csv

import pytest

from layerscale.study.grid import StudySpec
from layerscale.study.results import collect_run, group_results, markdown_table, write_tables
from study_helpers import TINY_BASE, write_fake_run


def _results(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1), TINY_BASE)
    runs = spec.runs(tmp_path)
    data = {
        "prenorm-d2-s0": ([0.5, 0.7], [1.0, 0.8], "finished", None),
        "prenorm-d2-s1": ([0.6], [0.9], "diverged", 17),
        "layerscale-d2-s0": ([0.8, 0.9], [0.5, 0.4], "finished", None),
        "layerscale-d2-s1": ([0.95, 0.85], [0.3, 0.35], "finished", None),
    }
    for r in runs:
        acc, loss, status, step = data[r.run_id]
        write_fake_run(tmp_path / "runs" / r.run_id, acc, loss, status, step)
    return [collect_run(r, tmp_path / "runs" / r.run_id) for r in runs]


def test_collect_run_reads_final_best_and_divergence(tmp_path):
    results = {r.run_id: r for r in _results(tmp_path)}
    ls = results["layerscale-d2-s1"]
    assert ls.final_accuracy == 0.85 and ls.best_accuracy == 0.95 and ls.final_loss == 0.35
    assert results["prenorm-d2-s1"].status == "diverged" and results["prenorm-d2-s1"].diverged_step == 17


def test_groups_are_mean_and_std_over_seeds(tmp_path):
    groups = {g.method: g for g in group_results(_results(tmp_path))}
    ls = groups["layerscale"]
    assert ls.final_accuracy_mean == pytest.approx(0.875)
    assert ls.final_accuracy_std == pytest.approx(0.0353553, rel=1e-4)
    assert groups["prenorm"].diverged == 1 and groups["prenorm"].first_diverged_step == 17
    table = markdown_table(list(groups.values()))
    assert "| layerscale | 2 | 2 | 87.5 ± 3.5 | 92.5 ± 3.5 |" in table
    assert "1/2 (step 17)" in table


def test_tables_are_written(tmp_path):
    paths = write_tables(tmp_path, _results(tmp_path))
    with open(paths["runs_csv"]) as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4 and rows[0]["run_id"] == "prenorm-d2-s0"
    with open(paths["results_csv"]) as f:
        assert len(list(csv.DictReader(f))) == 2
    assert paths["results_md"].read_text().startswith("| method | depth |")


def test_a_pending_run_is_reported_as_pending(tmp_path):
    spec = StudySpec(("prenorm",), (2,), (0,), TINY_BASE)
    result = collect_run(spec.runs(tmp_path)[0], tmp_path / "runs" / "prenorm-d2-s0")
    assert result.status == "pending" and result.final_accuracy is None
