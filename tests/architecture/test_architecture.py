"""The package's shape, checked from its source with ``ast`` (docs/ARCHITECTURE.md): no import circle anywhere; the
study's floors import downward only; this repository's evidence pipelines stay outside the installed package;
folders and modules stay small."""

from __future__ import annotations

from pathlib import Path

import pytest

from import_graph import SRC, cycles, import_graph, module_files

#: the study's floors, lowest first: a module may import its own floor and those below, never one above
STUDY_FLOORS = ("layerscale.stats", "layerscale.study.design", "layerscale.study.run", "layerscale.study.report",
                "layerscale.study")
MAX_FLAT_MODULES = 15
MAX_LINES = 400
#: folders that still hold more than MAX_FLAT_MODULES modules flat, to be split by concern (issue 56); the list may
#: only shrink: a folder that meets the rule must leave it, and no other folder may join it
NOT_YET_SPLIT: set[str] = set()
#: modules still over MAX_LINES, to be split; the same ratchet
NOT_YET_SHORT: set[str] = set()


def _floor(module: str) -> int | None:
    for index in range(len(STUDY_FLOORS) - 1, -1, -1):
        if module == STUDY_FLOORS[index] or module.startswith(STUDY_FLOORS[index] + "."):
            return index
    return None


def test_no_import_circle_in_the_package():
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


def test_the_study_imports_downward_only():
    climbs = []
    for module, targets in import_graph().items():
        floor = _floor(module)
        if floor is None:
            continue
        for target in targets:
            target_floor = _floor(target)
            if target_floor is not None and target_floor > floor:
                climbs.append(f"{module} -> {target}")
    assert climbs == []


def test_the_sub_rooms_of_a_room_import_one_way():
    """Inside a room (``analysis``, ``surgery``, ``train``, ``study``, ...), its sub-packages form no circle among
    themselves (``analysis.removal`` may import ``analysis.eval_data``, never both ways round); the room's flat
    modules are left out, they hold both its entry points and its small shared pieces."""
    graph, files = import_graph(), module_files()
    packages = {module for module, path in files.items() if path.name == "__init__.py"}
    circles = []
    for room in sorted(packages - {"layerscale"}):
        def sub_room(module: str) -> str | None:
            if not module.startswith(room + "."):
                return None
            head = f"{room}.{module[len(room) + 1:].split('.')[0]}"
            return head if head in packages else None

        edges: dict[str, set[str]] = {}
        for module, targets in graph.items():
            source = sub_room(module)
            if source is not None:
                edges.setdefault(source, set()).update(
                    t for t in map(sub_room, targets) if t is not None and t != source)
        circles += cycles(edges)
    assert circles == []


def test_no_evidence_pipeline_inside_the_package():
    """The wheel is built from src/ (pyproject: packages.find where=src): evidence/ is never in it, and no module of
    the package may import it."""
    evidence = {p.stem for p in (SRC.parent / "evidence").glob("*.py")} - {"__init__"}
    assert {"results_page", "heldout_report", "grow_report", "depth_use_report", "grow_analysis"} <= evidence
    inside = {path.stem for path in module_files().values()}
    assert not evidence & inside
    for path in module_files().values():
        text = path.read_text(encoding="utf-8")
        assert "from evidence" not in text and "import evidence" not in text, path


def test_folders_hold_at_most_fifteen_modules_flat():
    over = set()
    for folder in sorted(p for p in (SRC / "layerscale").rglob("*") if p.is_dir() and p.name != "__pycache__"):
        count = sum(1 for f in folder.glob("*.py") if f.name != "__init__.py")
        if count > MAX_FLAT_MODULES:
            over.add(folder.relative_to(SRC / "layerscale").as_posix())
    assert over == NOT_YET_SPLIT


def test_modules_are_at_most_four_hundred_lines():
    long = {module for module, path in module_files().items()
            if len(path.read_text(encoding="utf-8").splitlines()) > MAX_LINES}
    assert long == NOT_YET_SHORT
