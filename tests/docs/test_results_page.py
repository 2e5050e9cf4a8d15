"""docs/RESULTS.md is what the committed studies' tables give: the generator reproduces the page, every interval
printed on it is an interval of some results.csv row at the printed precision, and "At a glance" cites only the
primary families."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from layerscale.study.run.csv_rows import read_rows
from evidence.attnres_section import SWEEP_FOLDER
from evidence.results_page import FOLDERS, ORIGINALS, STUDIES, load_study, render_page
from layerscale.study.report.results_table import read_results, row_interval

REPO = Path(__file__).resolve().parents[2]
PAGE = REPO / "docs" / "RESULTS.md"
RESULTS = REPO / "docs" / "results"
NUMBER = r"[+\-−]?\d+(?:\.\d+)?†?"
INTERVAL = re.compile(rf"(?<![\w.])({NUMBER}) \[({NUMBER}), ({NUMBER})\]")
INTERVAL_NAMES = ("test", "diff", "val_best", "steps_to_target", "spread", "ratio")


class _HeldoutRow:
    """A row of a held-out check's results.csv (``mean``, ``low``, ``high``) read as a results.csv row's interval."""

    def __init__(self, fields: dict[str, str]):
        self._interval = row_interval({"x_" + k: fields[k] for k in ("mean", "truncated")}
                                      | {"x_ci_low": fields["low"], "x_ci_high": fields["high"]}, "x")

    def interval(self, name: str):
        return self._interval if name == "diff" else None


class _StabilityRow:
    """A row of a study's stability.csv: its seed spread and spread ratio, each with its interval."""

    def __init__(self, fields: dict[str, str]):
        from types import SimpleNamespace

        self._intervals = {name: SimpleNamespace(mean=float(fields[name]), low=float(fields[f"{name}_ci_low"]),
                                                 high=float(fields[f"{name}_ci_high"]))
                           for name in ("spread", "ratio") if fields[name] and fields[f"{name}_ci_low"]}

    def interval(self, name: str):
        return self._intervals.get(name)


def _rows():
    """Every row the page may quote: each study's shown folder, the version a redo replaced, the AttnRes sweep,
    held-out checks and the shown folders' stability tables."""
    folders = dict.fromkeys([*FOLDERS.values(), *ORIGINALS.values(), SWEEP_FOLDER])
    rows = [row for folder in folders for row in read_results(RESULTS / folder / "results.csv")]
    for folder in folders:
        heldout = RESULTS / folder / "heldout" / "results.csv"
        rows += [_HeldoutRow(r) for r in read_rows(heldout)] if heldout.is_file() else []
        rows += [_StabilityRow(r) for r in read_rows(RESULTS / folder / "stability.csv")]
    return rows


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


EVIDENCE_GLANCE = ("- Depth use", "- Growing", "- Confirmatory")  # the evidence folders' glance lines


def _without_evidence(text: str) -> str:
    """The page without the depth-use, grow, llama-prune and confirm blocks and glance lines, whose intervals come
    from those folders' own tables (checked by the last tests and tests/evidence/test_confirm_report.py)."""
    for block in ("depth-use", "grow", "llama-prune", "confirm"):
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
    primary = [r for key in STUDIES for r in read_results(RESULTS / FOLDERS[key] / "results.csv")
               if r.family == "primary"]
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
    ("llama-prune", ("runs.csv", "pruning.csv", "healing.csv"), ("results.md",), "- Pruning a real-vocabulary"),
]


@pytest.mark.parametrize("folder, inputs, outputs, glance_prefix", EVIDENCE_REPORTS)
def test_an_evidence_report_is_what_its_committed_tables_give(tmp_path, folder, inputs, outputs, glance_prefix):
    import importlib
    import shutil

    module = {"depth-use": "depth_use_report", "grow": "grow_report", "llama-prune": "llama_prune_report"}[folder]
    write_report = importlib.import_module(f"evidence.{module}").write_report
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


def test_the_page_shows_each_study_from_a_complete_folder_and_a_partial_one_is_refused(tmp_path):
    import shutil

    from evidence.results_page import extension_pending_runs

    for key in STUDIES:
        study = load_study(RESULTS, key)
        assert study.folder.name == FOLDERS[key]
        waiting = extension_pending_runs(study.tuning)  # issue 60: a grid extension not yet run, and nothing else
        assert all(r["status"] != "pending" or (r["method"], int(r["depth"]), float(r["lr"])) in waiting
                   for r in study.runs)
    partial = tmp_path / FOLDERS["depthbench"]
    partial.mkdir()
    for name in ("study.json", "results.csv", "runs.csv", "tuning.json"):
        shutil.copy(RESULTS / FOLDERS["depthbench"] / name, partial / name)
    runs = (partial / "runs.csv").read_text(encoding="utf-8").splitlines()
    fields = runs[1].split(",")
    fields[runs[0].split(",").index("status")] = "pending"
    runs[1] = ",".join(fields)
    (partial / "runs.csv").write_text("\n".join(runs) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="1 run\\(s\\) pending"):
        load_study(tmp_path, "depthbench")


def test_a_redo_block_quotes_the_redo_and_the_original_each_from_its_own_table():
    from evidence.results_page import render_block

    studies = {key: load_study(RESULTS, key) for key in STUDIES}
    redone = [key for key in STUDIES if FOLDERS[key] != ORIGINALS[key]]
    for key in STUDIES:
        if key not in redone:
            assert render_block(f"{key}-redo", studies, RESULTS) == (f"Not redone yet: the page shows the original "
                                                                      f"study ({ORIGINALS[key]}).\n")
    for key in redone:
        block = render_block(f"{key}-redo", studies, RESULTS)
        redo = [r for r in read_results(RESULTS / FOLDERS[key] / "results.csv") if r.family == "primary"]
        original = read_results(RESULTS / ORIGINALS[key] / "results.csv")
        lines = [line for line in block.splitlines() if line.startswith("| ") and "comparison" not in line]
        assert len(lines) == len(redo)
        for line, row in zip(lines, redo):
            found = INTERVAL.findall(line)
            assert len(found) == 2
            assert _matches(found[1], row)
            twin = next(o for o in original if (o.table, o.method, o.depth, o.depth_from)
                        == (row.table, row.method, row.depth, row.depth_from))
            assert _matches(found[0], twin)


def test_a_grid_tuned_study_reports_its_ties_extensions_and_edges_from_its_tuning_record():
    from evidence.results_page import Study, render_block

    def row(method, depth, lr):
        return {"table": "tuned", "method": method, "depth": str(depth), "lr": str(lr),
                "metric": "test accuracy (%)"}

    def cell(method, depth, chosen, tied=(), extended=(), rates=(1e-4, 3e-4, 1e-3, 3e-3), best=None):
        return {"method": method, "depth": depth, "chosen_lr": chosen, "best_lr": best or chosen,
                "tied_lrs": list(tied) or [chosen], "rates": sorted([*rates, *extended]),
                "extended_with": list(extended)}

    from layerscale.study.report.results_table import ResultRow

    design = {"methods": ["prenorm", "layerscale"], "depths": [4, 32], "lrs": [1e-4, 3e-4, 1e-3, 3e-3],
              "reference": "prenorm", "tuning": "grid", "extend_grid": 1, "shapes": [["prenorm", 4, 180]]}
    cells = [cell("prenorm", 4, 1e-3, tied=(3e-4, 1e-3), best=3e-4),
             cell("prenorm", 32, 1e-3, tied=(1e-3, 3e-3), best=3e-3),  # the tie pulled an edge inward
             cell("layerscale", 4, 3e-3, extended=(9e-3,)), cell("layerscale", 32, 1e-4)]
    rows = [ResultRow(row(c["method"], c["depth"], c["chosen_lr"])) for c in cells]
    rows += [ResultRow({**row("prenorm", 4, 1e-3), "table": "shared"})]
    study = Study("depthbench", rows, design, [], None, {"seeds": [0, 1, 2], "cells": cells})
    block = render_block("depthbench-rates", {"depthbench": study})
    assert "| layerscale | 0.003 | 0.0001 |" in block
    assert ("a cell whose best mean is at an edge of the grid adds one rate outward (×3 or ÷3) before the tie rule "
            "chooses, at most 1 time. 2 of the 4 cells chose the shared rate.") in block
    assert ("- Ties: prenorm at 4 blocks (0.0003, 0.001: 0.001 taken); prenorm at 32 blocks (0.001, 0.003: 0.001 "
            "taken).") in block
    assert "- Extended: layerscale at 4 blocks (added 0.009; settled at 0.003)." in block
    assert ("- Best mean still at an edge of the rates tried (the best rate may lie beyond them, whatever the tie rule "
            "took): prenorm at 32 blocks (best mean at 0.003, the largest tried; the tie rule took 0.001); "
            "layerscale at 32 blocks (best mean at 0.0001, the smallest tried).") in block


def test_each_study_section_carries_its_stability_tables_from_its_stability_csv():
    """Issue 60: a "Stability" block per study, printed from the study's stability.csv by the function that prints
    its results.md, and every interval in it one of that table's."""
    from evidence.results_page import render_block
    from layerscale.study.report.stability_table import stability_table_lines

    text = PAGE.read_text(encoding="utf-8")
    studies = {key: load_study(RESULTS, key) for key in STUDIES}
    for key, study in studies.items():
        block = re.search(rf"<!-- generated: {key}-stability -->\n(.*?)<!-- end generated: {key}-stability -->",
                          text, re.DOTALL).group(1)
        assert block == render_block(f"{key}-stability", studies, RESULTS)
        rows = read_rows(RESULTS / FOLDERS[key] / "stability.csv")
        assert "\n".join(stability_table_lines(rows, study.reference, study.digits + 1, study.at)) in block
        stability = [_StabilityRow(r) for r in rows]
        found = INTERVAL.findall(block)
        assert found and all(any(_matches(f, r) for r in stability) for f in found)


def test_a_pending_grid_extension_is_named_and_its_runs_are_the_only_pending_ones_the_page_accepts(tmp_path):
    """Issue 60: a cell whose best mean is at an edge waits for its extension; the page says so, keeps the cell's
    provisional rate, and accepts those pending runs (no other)."""
    import json
    import shutil

    from evidence.results_page import Study, render_block
    from layerscale.study.report.results_table import ResultRow

    design = {"methods": ["prenorm"], "depths": [32], "lrs": [1e-3, 3e-3], "reference": "prenorm",
              "tuning": "grid", "extend_grid": 1}
    cells = [{"method": "prenorm", "depth": 32, "chosen_lr": 1e-3, "best_lr": 3e-3, "tied_lrs": [1e-3, 3e-3],
              "rates": [1e-3, 3e-3, 9e-3], "extended_with": [], "extension_pending": [9e-3]}]
    rows = [ResultRow({"table": "tuned", "method": "prenorm", "depth": "32", "lr": "0.001",
                       "metric": "test accuracy (%)"})]
    study = Study("depthbench", rows, design, [], None, {"seeds": [0, 1, 2], "cells": cells})
    block = render_block("depthbench-rates", {"depthbench": study})
    assert ("- Extension pending (runs not yet trained; the tables keep the rate chosen before it): prenorm at "
            "depth 32 (best mean at 0.003, the largest tried; 0.009 to run; until then the cell reads the tie "
            "rule's choice among the rates that ran, 0.001).") in block
    assert "whatever the tie rule took): none." in block
    folder = tmp_path / FOLDERS["depthbench"]
    folder.mkdir()
    for name in ("study.json", "results.csv"):
        shutil.copy(RESULTS / FOLDERS["depthbench"] / name, folder / name)
    header = "run_id,kind,method,depth,lr,seed,status,wall_time_s"
    (folder / "runs.csv").write_text(f"{header}\na,final,prenorm,32,0.001,0,finished,60\n"
                                     "b,final,prenorm,32,0.009,0,pending,\n", encoding="utf-8")
    with pytest.raises(ValueError, match="1 run\\(s\\) pending"):
        load_study(tmp_path, "depthbench")  # no tuning.json: nothing says the run is an extension
    (folder / "tuning.json").write_text(json.dumps({"seeds": [0], "cells": cells}), encoding="utf-8")
    assert len(load_study(tmp_path, "depthbench").runs) == 2
