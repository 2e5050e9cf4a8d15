"""The confirmatory study's committed report (docs/results/confirm: results.csv, stability.csv, spikes.csv,
cpu_runs.csv, cpu_sensitivity.csv, results.md) is what ``scripts/confirm_report.py`` writes from the committed
inputs alone: each folder's ``results.csv``, ``runs.csv`` and ``runs.tar.xz`` and the redos' ``results.csv``,
copied into an empty folder; and docs/RESULTS.md's "At a glance" quotes its primary rows."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from evidence.confirm_report import CONFIRMED, write_report
from evidence.confirm_sections import FILES

REPO = Path(__file__).resolve().parents[2]
RESULTS = REPO / "docs" / "results"
CONFIRM = RESULTS / "confirm"
FOLDER_INPUTS = ("study.json", "plan.json", "tuning.json", "results.csv", "runs.csv", "runs.tar.xz")


def test_the_committed_confirmation_report_is_what_its_committed_inputs_give(tmp_path):
    if not (CONFIRM / FILES["results"]).is_file():
        pytest.skip("the confirmatory study's report is written only once all its runs have ended")
    root, redo_root = tmp_path / "confirm", tmp_path / "redos"
    for name, redo in CONFIRMED.items():
        (root / name).mkdir(parents=True)
        for file in FOLDER_INPUTS:
            shutil.copy(CONFIRM / name / file, root / name / file)
        (redo_root / redo).mkdir(parents=True)
        shutil.copy(RESULTS / redo / "results.csv", redo_root / redo / "results.csv")
    paths = write_report(root, redo_root)
    for key, path in paths.items():
        committed = CONFIRM / path.name
        assert path.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8"), key
    page = (REPO / "docs" / "RESULTS.md").read_text(encoding="utf-8")
    assert "Not reported yet" not in page.split("<!-- generated: confirm -->")[1].split("<!-- end generated")[0]
