"""Every committed study rebuilds from what is committed: ``layerscale study --report-only`` on a copy of its folder
(the packed ``runs.tar.xz``, ``study.json``, ``tuning.json``; no run folders) writes results.md, results.csv,
runs.csv and stability.csv byte-identical to the committed ones (issues 26, 60). A change to the code that writes
them fails here until the studies' tables are regenerated."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from layerscale.cli import main
from evidence.results_page import FOLDERS, ORIGINALS

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
STUDIES = sorted(p.parent.name for p in RESULTS.glob("*/runs.tar.xz") if (p.parent / "study.json").is_file())
TABLES = ("results.md", "results.csv", "runs.csv", "stability.csv")
INPUTS = ("study.json", "tuning.json", "runs.tar.xz")


def test_the_studies_on_the_page_are_found():
    """Every folder docs/RESULTS.md reads a study from is rebuilt below (a replaced original keeps only its tables;
    its README says how to restore its archive from the repository's history)."""
    assert set(FOLDERS.values()) <= set(STUDIES)


def test_a_replaced_original_keeps_what_the_page_reads():
    for original in set(ORIGINALS.values()) - set(STUDIES):
        for file in ("DESIGN.md", "README.md", "study.json", "results.csv", "runs.csv"):
            assert (RESULTS / original / file).is_file(), f"{original}/{file}"


@pytest.mark.parametrize("name", STUDIES)
def test_report_only_rebuilds_the_committed_tables_byte_identically(name, tmp_path, capsys):
    committed = RESULTS / name
    copy = tmp_path / name
    copy.mkdir()
    for file in INPUTS:
        if (committed / file).is_file():
            shutil.copy2(committed / file, copy / file)
    assert main(["study", "--out", str(copy), "--report-only", "--no-report"]) == 0
    capsys.readouterr()
    assert not (copy / "runs").exists()  # read from the archive, not unpacked
    for table in TABLES:
        assert (copy / table).read_bytes() == (committed / table).read_bytes(), f"{name}/{table} differs"


@pytest.mark.parametrize("name", STUDIES)
def test_each_committed_study_carries_its_stability_tables(name):
    """results.md's "Stability" section prints stability.csv's rows (issue 60), one per cell of the design."""
    from layerscale.study.report.stability_table import stability_table_lines
    from layerscale.study.run.csv_rows import read_rows
    from layerscale.untrusted_files import read_json_file

    design = read_json_file(RESULTS / name / "study.json")
    rows = read_rows(RESULTS / name / "stability.csv")
    assert len(rows) == len(design["methods"]) * len(design["depths"])
    markdown = (RESULTS / name / "results.md").read_text(encoding="utf-8")
    metric_digits = 1 if "test accuracy" in (RESULTS / name / "results.csv").read_text(encoding="utf-8") else 3
    table = "\n".join(stability_table_lines(rows, design["reference"], metric_digits + 1))
    assert "## Stability" in markdown and table in markdown
