"""The AttnRes sweep's blocks of docs/RESULTS.md (evidence.attnres_section): its methods against the reference beside
the redo's ``hc`` row, each read from its own table; one sentence per method naming the depths of each verdict; the
seed's claim judged as the design fixed it (better at every depth). Checked on a stand-in sweep — the committed
DepthBench redo's tables with its methods renamed — so that no number of the sweep itself is read before it ends."""

from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from evidence import attnres_section
from evidence.results_page import comparison_cell, load_study, render_block

RESULTS = Path(__file__).resolve().parents[2] / "docs" / "results"
RENAMED = {"layerscale": "bhyt", "hc": "attnres", "mhc": "attnres_block"}


def _rename_csv(source: Path, dest: Path) -> None:
    with source.open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    with dest.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        for row in rows:
            writer.writerow({**row, "method": RENAMED.get(row["method"], row["method"])})


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory):
    """docs/results/depthbench-grid copied to <tmp>/depthbench-attnres with its methods renamed."""
    root = tmp_path_factory.mktemp("results")
    folder = root / attnres_section.SWEEP_FOLDER
    folder.mkdir()
    source = RESULTS / "depthbench-grid"
    for name in ("results.csv", "runs.csv", "stability.csv"):
        _rename_csv(source / name, folder / name)
    design = json.loads((source / "study.json").read_text(encoding="utf-8"))
    design["methods"] = [RENAMED.get(m, m) for m in design["methods"]]
    design["shapes"] = [[RENAMED.get(m, m), d, w] for m, d, w in design["shapes"]]
    (folder / "study.json").write_text(json.dumps(design), encoding="utf-8")
    shutil.copy(source / "tuning.json", folder / "tuning.json")
    return root


def _block(root: Path, name: str) -> list[str]:
    studies = {"depthbench": load_study(RESULTS, "depthbench")}
    return render_block(name, studies, root).splitlines()


def test_each_method_is_printed_from_its_own_table_and_hc_from_the_redos(stand_in):
    lines = _block(stand_in, "attnres-beside-hc")
    sweep, redo = load_study(stand_in, "attnres", "depthbench-attnres"), load_study(RESULTS, "depthbench")
    depths = redo.design["depths"]
    table = {line.split(" | ")[0].strip("| "): line.strip("| ").split(" | ")[1:] for line in lines
             if line.startswith("| ") and not line.startswith("| method")}
    assert list(table) == ["hc (the redo, `depthbench-grid`)", "bhyt", "attnres", "attnres_block"]
    assert table["hc (the redo, `depthbench-grid`)"] == [comparison_cell(redo, redo.cell("tuned", "hc", d))
                                                         for d in depths]
    for method in ("bhyt", "attnres", "attnres_block"):
        assert table[method] == [comparison_cell(sweep, sweep.cell("tuned", method, d)) for d in depths]
    # the stand-in's attnres is the redo's hc: the same numbers, each study's own verdicts
    assert [c.split(" ")[0] for c in table["attnres"]] == [c.split(" ")[0] for c in
                                                          table["hc (the redo, `depthbench-grid`)"]]


def test_each_sentence_names_the_depths_of_each_verdict(stand_in):
    lines = _block(stand_in, "attnres-beside-hc")
    sweep = load_study(stand_in, "attnres", "depthbench-attnres")
    for method in ("bhyt", "attnres", "attnres_block"):
        sentence = next(line for line in lines if line.startswith(f"- `{method}`: "))
        for depth in sweep.design["depths"]:
            verdict = sweep.cell("tuned", method, depth).verdict
            said = "within noise of prenorm at" if verdict == "within noise" else f"{verdict} than prenorm at"
            clause = next(part for part in sentence[len(f"- `{method}`: "):].rstrip(".").split("; ")
                          if str(depth) in part.split(" at ")[-1].replace(",", " ").split())
            assert clause.startswith(said), (method, depth, clause)


def _fake(verdicts: dict[int, str]):
    rows = {d: SimpleNamespace(verdict=v, interval=lambda name: (0, 0)) for d, v in verdicts.items()}
    return SimpleNamespace(reference="prenorm", at=lambda d: f"{d} blocks",
                           cell=lambda table, method, d: rows.get(d) if method == "attnres" else None)


def test_the_claim_holds_only_when_better_at_every_depth():
    depths = [4, 8, 16, 32]
    assert "supports the seed's claim" in attnres_section.claim_sentence(_fake(dict.fromkeys(depths, "better")),
                                                                          depths)
    mixed = attnres_section.claim_sentence(_fake({4: "better", 8: "better", 16: "within noise", 32: "worse"}), depths)
    assert "does not support" in mixed
    assert "worse than prenorm at 32 blocks" in mixed and "within noise at 16 blocks" in mixed


def test_a_sweep_with_runs_pending_is_refused(stand_in, tmp_path):
    partial = tmp_path / attnres_section.SWEEP_FOLDER
    shutil.copytree(stand_in / attnres_section.SWEEP_FOLDER, partial)
    runs = (partial / "runs.csv").read_text(encoding="utf-8").splitlines()
    header = runs[0].split(",")
    first = runs[1].split(",")
    first[header.index("status")] = "pending"
    (partial / "runs.csv").write_text("\n".join([runs[0], ",".join(first), *runs[2:]]) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match="pending"):
        _block(tmp_path, "attnres-beside-hc")


def test_the_per_study_blocks_read_the_sweep_and_an_unknown_one_is_refused(stand_in):
    assert any("attnres" in line for line in _block(stand_in, "attnres-depth-use"))
    with pytest.raises(ValueError, match="beside-hc"):
        _block(stand_in, "attnres-nonsense")
