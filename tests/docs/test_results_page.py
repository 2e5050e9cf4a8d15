"""docs/RESULTS.md is what the committed studies' tables give: the generator reproduces the page, every interval
printed on it is an interval of some results.csv row at the printed precision, and "At a glance" cites only the
primary families."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from layerscale.study.results_page import STUDIES, render_page
from layerscale.study.results_table import read_results

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "RESULTS.md"
RESULTS = REPO / "docs" / "results"
NUMBER = r"[+\-−]?\d+(?:\.\d+)?†?"
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER}) \[({NUMBER}), ({NUMBER})\]")
INTERVAL_NAMES = ("test", "diff", "val_best", "steps_to_target")


def _rows():
    return [row for key in STUDIES for row in read_results(RESULTS / key / "results.csv")]


def _printed(text: str) -> tuple[str, int]:
    """``(value without sign decoration, decimals)`` of a printed number."""
    clean = text.replace("−", "-").replace("†", "").lstrip("+")
    return clean, len(clean.partition(".")[2])


def _as_printed(value: float | None, decimals: int) -> str | None:
    return None if value is None else f"{value:.{decimals}f}"


def _matches(found: tuple[str, str, str], row) -> bool:
    (mean, d), (low, d_low), (high, d_high) = (_printed(x) for x in found)
    for name in INTERVAL_NAMES:
        interval = row.interval(name)
        if interval is None or interval.low is None:
            continue
        if (_as_printed(interval.mean, d), _as_printed(interval.low, d_low), _as_printed(interval.high, d_high)) \
                == (mean, low, high):
            return True
    return False


def test_the_page_is_what_the_generator_makes_of_the_committed_tables():
    text = PAGE.read_text(encoding="utf-8")
    assert render_page(text, RESULTS) == text, "docs/RESULTS.md drifted: run python scripts/results_page.py"


EVIDENCE_GLANCE = ("- Depth use", "- Growing")  # the glance lines of the evidence folders (EVIDENCE_REPORTS)


def _without_evidence(text: str) -> str:
    """The page without the depth-use and grow blocks and glance lines, whose intervals come from those folders'
    own tables (checked by the last tests)."""
    for block in ("depth-use", "grow"):
        text = re.sub(rf"<!-- generated: {block} -->.*?<!-- end generated: {block} -->", "", text, flags=re.DOTALL)
    return "\n".join(line for line in text.splitlines() if not line.startswith(EVIDENCE_GLANCE))


def test_every_interval_on_the_page_is_an_interval_of_the_tables_at_its_printed_precision():
    rows = _rows()
    found = INTERVAL.findall(_without_evidence(PAGE.read_text(encoding="utf-8")))
    assert len(found) > 100  # the page's tables and sentences
    differing = [f"{m} [{a}, {b}]" for m, a, b in found if not any(_matches((m, a, b), r) for r in rows)]
    assert not differing, f"intervals on docs/RESULTS.md that no results.csv row gives: {differing}"


def test_a_hand_rounded_interval_would_be_caught():
    rows = _rows()
    assert not any(_matches(("-0.44", "-0.60", "-0.28"), r) for r in rows)  # the previous page's LayerScale at 96
    assert not any(_matches(("+0.14", "0.03", "0.26"), r) for r in rows)  # and its LayerNorm Scaling at 96


def test_at_a_glance_cites_only_the_primary_families():
    text = PAGE.read_text(encoding="utf-8")
    glance = re.search(r"<!-- generated: glance -->\n(.*?)<!-- end generated: glance -->", text, re.DOTALL).group(1)
    glance = "\n".join(line for line in glance.splitlines() if not line.startswith(EVIDENCE_GLANCE))  # own tables
    primary = [r for r in _rows() if r.family == "primary"]
    found = INTERVAL.findall(glance)
    assert len(found) == len(primary) and all(any(_matches(f, r) for r in primary) for f in found)
    assert "Holm-adjusted" in glance and "BH" not in glance


@pytest.mark.parametrize("block", ["nonsense", "fashion-nonsense"])
def test_an_unknown_generated_block_is_refused(block):
    with pytest.raises(ValueError, match="unknown generated block"):
        render_page(f"<!-- generated: {block} -->\n<!-- end generated: {block} -->\n", RESULTS)


EVIDENCE_REPORTS = [  # folder, the committed inputs, the generated outputs, its glance lines' prefix
    ("depth-use", ("models.csv", "effective_depth.csv", "pruning.csv"), ("results.md",), "- Depth use"),
    ("grow", ("sources.csv", "runs.csv", "effective_depth.csv"), ("results.md", "results.csv"), "- Growing"),
]


@pytest.mark.parametrize("folder, inputs, outputs, glance_prefix", EVIDENCE_REPORTS)
def test_an_evidence_report_is_what_its_committed_tables_give(tmp_path, folder, inputs, outputs, glance_prefix):
    import importlib
    import shutil

    module = {"depth-use": "depth_use_report", "grow": "grow_report"}[folder]
    write_report = importlib.import_module(f"layerscale.study.{module}").write_report
    committed = RESULTS / folder
    if not (committed / inputs[0]).is_file():
        pytest.skip(f"the {folder} evidence has no committed tables yet")
    for name in inputs:
        if (committed / name).is_file():
            shutil.copy(committed / name, tmp_path / name)
    write_report(tmp_path)
    for name in outputs:
        assert (tmp_path / name).read_text(encoding="utf-8") == (committed / name).read_text(encoding="utf-8"), name
    report = (committed / "results.md").read_text(encoding="utf-8")
    glance = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith(glance_prefix)]
    for mean, low, high in INTERVAL.findall("\n".join(glance)):  # the glance quotes the report's comparisons
        assert f"{mean} [{low}, {high}]" in report
