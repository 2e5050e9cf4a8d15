"""The demo's last lines: the committed studies' primary verdicts, read from docs/results at run time."""

import csv
import json

from layerscale.study.report.committed import primary_verdict_lines
from layerscale.study.design.presets import get_preset

COLUMNS = ["table", "method", "depth_from", "depth", "metric", "diff_mean", "diff_ci_low", "diff_ci_high", "diff_n",
           "family", "p_raw", "p_adj", "verdict"]


def _study(root, name, rows, design):
    folder = root / name
    folder.mkdir(parents=True)
    with open(folder / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    (folder / "study.json").write_text(json.dumps(design))


def test_primary_rows_are_printed_with_interval_holm_p_and_procedure(tmp_path):
    row = dict(table="tuned", method="layerscale", depth_from="", depth="32", metric="test accuracy (%)",
               diff_mean="0.76", diff_ci_low="0.6", diff_ci_high="0.93", diff_n="5", family="primary",
               p_raw="0.001", p_adj="0.004", verdict="better")
    other = {**row, "method": "hc", "family": "exploratory"}
    _study(tmp_path, "new", [row, other], {"primary_declared": True})
    _study(tmp_path, "old", [row], {})  # a study file from before primary families
    lines = primary_verdict_lines(tmp_path)
    assert lines[0] == ("- new: layerscale vs reference at depth 32: +0.8 [0.6, 0.9] points, Holm p 0.004 → better")
    assert lines[1].startswith("- old: layerscale") and "earlier procedure" in lines[1]
    assert len(lines) == 2  # the exploratory row is not a primary verdict


def test_a_study_without_a_primary_family_says_so(tmp_path):
    _study(tmp_path, "bare", [], {})
    assert "no primary family recorded" in primary_verdict_lines(tmp_path)[0]


def test_the_demo_design_follows_the_selection_rules():
    spec = get_preset("demo").spec
    assert spec.tuned and (spec.tuning == "grid" or (spec.tune_seeds >= 2 and spec.min_budget >= 0.5))
    assert spec.shared_lr in spec.lrs  # the shared table comes with the grid


def test_a_partial_study_says_not_finished_and_an_evidence_folder_is_not_a_study(tmp_path):
    pending = dict(table="tuned", method="mhc", depth_from="", depth="32", metric="test accuracy (%)",
                   diff_mean="", diff_ci_low="", diff_ci_high="", diff_n="", family="primary", p_raw="", p_adj="",
                   verdict="")
    _study(tmp_path, "grid", [pending], {"primary_declared": True})
    evidence = tmp_path / "grow"  # results.csv of another shape, no study.json: not a study
    evidence.mkdir()
    (evidence / "results.csv").write_text("kind,source,arm\ncell,fashion,a\n")
    lines = primary_verdict_lines(tmp_path)
    assert lines == [f"- grid: mhc vs reference at depth 32: not finished yet ({tmp_path / 'grid' / 'results.md'} "
                     "has the study's status)"]


def test_a_study_whose_redo_is_complete_is_named_as_superseded(tmp_path):
    row = dict(table="tuned", method="layerscale", depth_from="", depth="32", metric="test accuracy (%)",
               diff_mean="1.9", diff_ci_low="1.1", diff_ci_high="2.7", diff_n="3", family="primary",
               p_raw="0.01", p_adj="0.02", verdict="better")
    _study(tmp_path, "bench", [row], {})
    _study(tmp_path, "bench-grid", [{**row, "diff_mean": "1.0", "diff_ci_low": "0.6", "diff_ci_high": "1.4"}],
           {"primary_declared": True})
    runs = tmp_path / "bench-grid" / "runs.csv"
    runs.write_text("run_id,status\na,finished\nb,pending\n")
    lines = primary_verdict_lines(tmp_path)  # the redo is partial: both listed, the original with its note
    assert lines[0].startswith("- bench: layerscale") and "redo in progress" in lines[0]
    runs.write_text("run_id,status\na,finished\nb,diverged\n")
    lines = primary_verdict_lines(tmp_path)
    assert lines[0] == ('- bench: superseded by its redo, bench-grid (docs/RESULTS.md, "What changed", sets the two '
                        "side by side)")
    assert lines[1].startswith("- bench-grid: layerscale vs reference at depth 32: +1.0 [0.6, 1.4] points")
    assert len(lines) == 2


def test_outside_the_repository_the_demo_points_to_the_results_page(monkeypatch):
    import layerscale.study.report.committed as committed

    monkeypatch.setattr(committed, "results_root", lambda: None)
    (line,) = primary_verdict_lines()
    assert "https://github.com/torch-layerscale/torch-layerscale/blob/main/docs/RESULTS.md" in line


def test_the_source_checkouts_results_are_found_from_any_folder(tmp_path, monkeypatch):
    from pathlib import Path

    from layerscale.study.report.committed import results_root

    monkeypatch.chdir(tmp_path)
    assert results_root() == Path(__file__).resolve().parents[2] / "docs" / "results"


def test_a_redo_whose_only_pending_runs_are_a_grid_extension_still_supersedes(tmp_path):
    """Issue 60: the corrected edge rule leaves a complete redo with a pending grid extension (``tuning.json``:
    ``extension_pending``); its cells keep their provisional rates and the redo still supersedes the original."""
    import json

    row = dict(table="tuned", method="layerscale", depth_from="", depth="32", metric="test accuracy (%)",
               diff_mean="1.9", diff_ci_low="1.1", diff_ci_high="2.7", diff_n="3", family="primary",
               p_raw="0.01", p_adj="0.02", verdict="better")
    _study(tmp_path, "bench", [row], {})
    _study(tmp_path, "bench-grid", [row], {"primary_declared": True})
    runs = tmp_path / "bench-grid" / "runs.csv"
    runs.write_text("run_id,method,depth,lr,status\na,layerscale,32,0.003,finished\n"
                    "b,layerscale,32,0.009,pending\n")
    assert "redo in progress" in primary_verdict_lines(tmp_path)[0]
    (tmp_path / "bench-grid" / "tuning.json").write_text(json.dumps({"cells": [
        {"method": "layerscale", "depth": 32, "extension_pending": [0.009]}]}))
    assert primary_verdict_lines(tmp_path)[0].startswith("- bench: superseded by its redo, bench-grid")
