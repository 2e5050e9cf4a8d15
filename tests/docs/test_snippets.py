"""Every ```python block of README.md and docs/*.md runs as written.

Each Markdown file's blocks run in order, in one namespace (a later block may use an earlier block's names, as a
reader following the page does), in a fresh, empty temporary working directory (a reader with a ``pip install``-ed package and no repository: the
configs the pages name are the packaged ones).

Set-up a reader does not need to see (a file a block reads, a loader a loop iterates) sits in a ```python block
inside an HTML comment that starts with ``<!-- snippet-setup``: hidden when the page is rendered, run in its place
like any other block. Keep such set-up small and say in the comment what it stands for.

A block that imports an optional extra which is not installed (timm, transformers, lightning, ...) skips the rest
of its file with the missing module named (``pytest.importorskip`` semantics); any other error fails, naming the
file and line of the block.
"""

from __future__ import annotations

import os
import re
import traceback
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
# Top-level modules of the optional extras (pyproject.toml); a block needing a missing one is skipped.
OPTIONAL_MODULES = {"timm", "transformers", "huggingface_hub", "lightning", "pytorch_lightning", "matplotlib",
                    "sklearn", "safetensors", "yaml", "tensorboard", "tqdm", "submitit", "torchvision"}


def python_blocks(page: Path) -> list[tuple[int, str]]:
    """``(first line number, code)`` of every ```python block of ``page``, in order (set-up blocks included)."""
    text = page.read_text(encoding="utf-8")
    return [(text.count("\n", 0, m.start()) + 2, m.group(1)) for m in FENCE.finditer(text)]


def _missing_extra(exc: ImportError) -> str | None:
    name = getattr(exc, "name", None) or ""
    if isinstance(exc, ModuleNotFoundError) and name.split(".")[0] in OPTIONAL_MODULES:
        return name
    match = re.search(r"pip install '?torch-layerscale\[(\w+)\]", str(exc))
    return f"the {match.group(1)} extra" if match else None


def test_the_block_extractor_finds_blocks_and_their_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\na = 1\n```\n\ntext\n<!-- snippet-setup: a file\n```python\nb = a\n```\n-->\n"
                    "```bash\nls\n```\n", encoding="utf-8")
    assert python_blocks(page) == [(4, "a = 1\n"), (10, "b = a\n")]


@pytest.mark.parametrize("page", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_python_block_runs(page, tmp_path, monkeypatch):
    assert not any(tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.manual_seed(0)
    namespace: dict = {"__name__": "__snippets__"}
    name = page.relative_to(REPO).as_posix()
    for line, code in python_blocks(page):
        where = f"{name}:{line}"
        try:
            exec(compile(code, where, "exec"), namespace)  # noqa: S102 (the documentation's own code)
        except ImportError as exc:
            missing = _missing_extra(exc)
            if missing is None:
                raise
            pytest.skip(f"{where} needs {missing}, which is not installed")
        except Exception:
            pytest.fail(f"the python block at {where} fails:\n{traceback.format_exc(limit=-3)}", pytrace=False)
    assert os.getcwd() == str(tmp_path)


def test_only_a_missing_optional_extra_skips():
    assert _missing_extra(ModuleNotFoundError("No module named 'timm'", name="timm")) == "timm"
    assert _missing_extra(ModuleNotFoundError("x", name="transformers.models")) == "transformers.models"
    assert _missing_extra(ImportError("run.tensorboard: true needs tensorboard: pip install "
                                      "'torch-layerscale[tb]'")) == "the tb extra"
    assert _missing_extra(ModuleNotFoundError("No module named 'layerscale.nope'", name="layerscale.nope")) is None
    assert _missing_extra(ImportError("cannot import name 'nope' from 'layerscale'")) is None
