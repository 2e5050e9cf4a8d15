"""The block-list registry imports its families; the families import only their base class, never the registry
(issue 56: the circle surgery/block_list.py <-> surgery/block_families/* is broken). Walked with ``ast`` so that an
import inside a function counts as well."""

from __future__ import annotations

import ast
from pathlib import Path

import layerscale
from layerscale.surgery import block_list
from layerscale.surgery.block_families import base

SURGERY = Path(layerscale.__file__).parent / "surgery"


def _module_name(path: Path) -> str:
    parts = path.relative_to(SURGERY.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every ``layerscale.surgery`` module that ``path`` imports, at any nesting level."""
    here = _module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                target = ".".join(anchor + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found.update(n for n in names if n.startswith("layerscale.surgery"))
    return found


def _graph() -> dict[str, set[str]]:
    modules = {_module_name(p): p for p in SURGERY.rglob("*.py")}
    return {name: {i for i in _imports(path) if i in modules and i != name} for name, path in modules.items()}


def test_surgery_has_no_import_circle():
    graph = _graph()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != 1, f"import circle: {' -> '.join(stack[stack.index(nxt):] + [nxt])}"
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for name in sorted(graph):
        if name not in state:
            visit(name)


def test_families_import_only_their_base_from_the_block_list_cluster():
    graph = _graph()
    families = [n for n in graph if n.startswith("layerscale.surgery.block_families.")]
    assert "layerscale.surgery.block_families.base" in families
    for name in families:
        assert "layerscale.surgery.block_list" not in graph[name], name
    assert "layerscale.surgery.block_families.base" in graph["layerscale.surgery.block_list"]


def test_block_family_public_path_still_works():
    assert block_list.BlockFamily is base.BlockFamily
    assert "BlockFamily" in block_list.__all__
