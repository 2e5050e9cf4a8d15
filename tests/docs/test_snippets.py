"""Every ```python and ```bash block of README.md and docs/*.md runs as written, from an empty folder.

Each Markdown file's blocks run in order (a later block may use an earlier block's names and files, as a reader
following the page does) in a fresh, empty temporary working directory: a reader with a ``pip install``-ed package
and no repository (the configs the pages name are the packaged ones). Python blocks share one namespace; a bash
block runs in ``bash -e -o pipefail`` with the ``layerscale`` command of this interpreter first on ``PATH``.

Nothing is hidden: a code block inside an HTML comment (set-up a reader would not see) fails the test — what a
block needs is in an earlier visible block or in the block itself. A block that cannot run here (it installs from
the network, needs a cluster or a system package, or trains for minutes to hours) says so to the reader on the line
just before its fence, and the test reads that line::

    *Not run by the doc test: REASON.*

A python block that imports an optional extra which is not installed (timm, transformers, lightning, ...) skips
the rest of its file with the missing module named (``pytest.importorskip`` semantics); any other error fails,
naming the file and line of the block.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch

REPO = Path(__file__).resolve().parents[2]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
RUN_LANGUAGES = ("python", "bash")
OPEN_FENCE = re.compile(r"^(`{3,})[ \t]*([\w+-]*)[^`\n]*$")
SKIP_MARKER = re.compile(r"^\*Not run by the doc test: (.+)\.\*$")
# Top-level modules of the optional extras (pyproject.toml); a block needing a missing one is skipped.
OPTIONAL_MODULES = {"timm", "transformers", "huggingface_hub", "lightning", "pytorch_lightning", "matplotlib",
                    "sklearn", "safetensors", "yaml", "tensorboard", "tqdm", "submitit", "torchvision", "accelerate"}
BASH_TIMEOUT_S = 300


@dataclass(frozen=True)
class Block:
    language: str
    line: int  # the first line of code (1-based)
    code: str
    skip: str | None  # the reason given on the marker line before the fence, if any
    hidden: bool  # inside an HTML comment


def _comment_state(line: str, inside: bool) -> bool:
    """Whether an HTML comment is open after ``line``, given whether one was open before it."""
    position = 0
    while True:
        if inside:
            end = line.find("-->", position)
            if end < 0:
                return True
            inside, position = False, end + 3
        else:
            start = line.find("<!--", position)
            if start < 0:
                return False
            inside, position = True, start + 4


def code_blocks(page: Path) -> list[Block]:
    """Every ```python / ```bash block of ``page``, in order, hidden ones included."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, inside_comment, previous, i = [], False, "", 0
    while i < len(lines):
        fence = OPEN_FENCE.match(lines[i])
        if fence is None:
            inside_comment = _comment_state(lines[i], inside_comment)
            previous = lines[i].strip() or previous
            i += 1
            continue
        ticks, language = fence.groups()
        end = next((j for j in range(i + 1, len(lines)) if re.fullmatch(rf"{ticks}`*[ \t]*", lines[j])), len(lines))
        if language in RUN_LANGUAGES:
            marker = SKIP_MARKER.match(previous)
            blocks.append(Block(language, i + 2, "".join(f"{line}\n" for line in lines[i + 1:end]),
                                marker.group(1) if marker else None, inside_comment))
        previous, i = "", end + 1
    return blocks


def _run_python(code: str, where: str, namespace: dict) -> None:
    try:
        exec(compile(code, where, "exec"), namespace)  # noqa: S102 (the documentation's own code)
    except ImportError as exc:
        missing = _missing_extra(exc)
        if missing is None:
            raise
        pytest.skip(f"{where} needs {missing}, which is not installed")
    except Exception:
        pytest.fail(f"the python block at {where} fails:\n{traceback.format_exc(limit=-3)}", pytrace=False)


def _run_bash(code: str, where: str, folder: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
           "OMP_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", code], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=BASH_TIMEOUT_S)
    if done.returncode != 0:
        pytest.fail(f"the bash block at {where} exits with {done.returncode}:\n{done.stdout[-1500:]}\n"
                    f"{done.stderr[-1500:]}", pytrace=False)


def _missing_extra(exc: ImportError) -> str | None:
    name = getattr(exc, "name", None) or ""
    if isinstance(exc, ModuleNotFoundError) and name.split(".")[0] in OPTIONAL_MODULES:
        return name
    match = re.search(r"pip install '?torch-layerscale\[(\w+)\]", str(exc))
    return f"the {match.group(1)} extra" if match else None


def _pages_to_run() -> list[Path]:
    return [page for page in PAGES if any(block.skip is None for block in code_blocks(page))]


def test_the_block_reader_finds_blocks_lines_markers_and_comments(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("# t\n\n```python\na = 1\n```\n\ntext <!-- a note --> more\n<!-- hidden:\n```python\nb = a\n"
                    "```\n-->\n*Not run by the doc test: it needs a cluster.*\n\n```bash\nls\n```\n````\n```bash\n"
                    "inside a four-backtick block\n```\n````\n```yaml\na: 1\n```\n```bash\necho\n```\n",
                    encoding="utf-8")
    assert code_blocks(page) == [Block("python", 4, "a = 1\n", None, False), Block("python", 10, "b = a\n", None, True),
                                 Block("bash", 16, "ls\n", "it needs a cluster", False),
                                 Block("bash", 27, "echo\n", None, False)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(REPO).as_posix())
def test_no_block_is_hidden_and_every_marker_says_why(page):
    name = page.relative_to(REPO).as_posix()
    blocks = code_blocks(page)
    hidden = [f"{name}:{b.line}" for b in blocks if b.hidden]
    assert not hidden, f"code blocks inside HTML comments (set-up a reader cannot see): {hidden}"
    markers = [line for line in page.read_text(encoding="utf-8").splitlines() if SKIP_MARKER.match(line.strip())]
    assert len(markers) == sum(b.skip is not None for b in blocks), f"{name}: a marker that precedes no code block"
    assert all(len(b.skip.split()) >= 2 for b in blocks if b.skip is not None)


def test_few_blocks_are_left_unrun():
    blocks = [b for page in PAGES for b in code_blocks(page)]
    skipped = [b for b in blocks if b.skip is not None]
    assert all(b.language == "bash" for b in skipped)  # every python block runs
    assert len(skipped) <= 16 and len(blocks) - len(skipped) >= 2 * len(skipped)


@pytest.mark.parametrize("page", _pages_to_run(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_block_runs(page, tmp_path, monkeypatch):
    assert not any(tmp_path.iterdir())
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    torch.manual_seed(0)
    namespace: dict = {"__name__": "__snippets__"}
    name = page.relative_to(REPO).as_posix()
    for block in code_blocks(page):
        if block.skip is not None:
            continue
        where = f"{name}:{block.line}"
        if block.language == "python":
            _run_python(block.code, where, namespace)
        else:
            _run_bash(block.code, where, tmp_path)
    assert os.getcwd() == str(tmp_path)


def test_a_failing_bash_block_fails_naming_its_line(tmp_path):
    with pytest.raises(pytest.fail.Exception, match=r"the bash block at page.md:3 exits with 1:\n\nnot there"):
        _run_bash("echo not there >&2\nfalse\necho never\n", "page.md:3", tmp_path)
    _run_bash("layerscale --version | grep -q torch-layerscale\n", "page.md:9", tmp_path)  # this layerscale


def test_only_a_missing_optional_extra_skips():
    assert _missing_extra(ModuleNotFoundError("No module named 'timm'", name="timm")) == "timm"
    assert _missing_extra(ModuleNotFoundError("x", name="transformers.models")) == "transformers.models"
    assert _missing_extra(ImportError("run.tensorboard: true needs tensorboard: pip install "
                                      "'torch-layerscale[tb]'")) == "the tb extra"
    assert _missing_extra(ModuleNotFoundError("No module named 'layerscale.nope'", name="layerscale.nope")) is None
    assert _missing_extra(ImportError("cannot import name 'nope' from 'layerscale'")) is None
