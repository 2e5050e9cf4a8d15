"""What a user of the package index gets: the wheel and the sdist carry the LICENSE, the metadata declares it as an
SPDX expression with the project's URLs and classifiers, the package page (the README) links only to absolute URLs
and shows ``pip install torch-layerscale[...]``, and ``layerscale train --help`` points to no file a pip install
lacks. The wheel and sdist are built offline by setuptools' own PEP 517 hooks, from a copy of the sources."""

from __future__ import annotations

import email
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
URL = "https://github.com/torch-layerscale/torch-layerscale"
LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """``(wheel, sdist)`` paths, built from a copy of pyproject.toml, README.md, LICENSE and src/."""
    pytest.importorskip("setuptools")
    root = tmp_path_factory.mktemp("package")
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(REPO / name, root / name)
    shutil.copytree(REPO / "src", root / "src", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    (root / "dist").mkdir()
    hooks = ("from setuptools import build_meta as b; s = b.build_sdist('dist'); w = b.build_wheel('dist'); "
             "print('built', s, w)")
    done = subprocess.run([sys.executable, "-c", hooks], cwd=root, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    _, sdist_name, wheel_name = done.stdout.strip().splitlines()[-1].split()
    return root / "dist" / wheel_name, root / "dist" / sdist_name


def test_the_license_file_is_the_apache_2_text():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "TERMS AND CONDITIONS FOR USE, REPRODUCTION, AND DISTRIBUTION" in text and "END OF TERMS AND CONDITIONS" in text


def test_wheel_and_sdist_carry_the_license(built):
    wheel, sdist = built
    license_text = (REPO / "LICENSE").read_bytes()
    with zipfile.ZipFile(wheel) as archive:
        licenses = [n for n in archive.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
        assert len(licenses) == 1 and archive.read(licenses[0]) == license_text
    with tarfile.open(sdist) as archive:
        top = sdist.name.removesuffix(".tar.gz")
        assert archive.extractfile(f"{top}/LICENSE").read() == license_text


def _metadata(wheel: Path) -> email.message.Message:
    with zipfile.ZipFile(wheel) as archive:
        name = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
        return email.message_from_bytes(archive.read(name))


def test_metadata_declares_the_license_urls_classifiers_and_authors(built):
    meta = _metadata(built[0])
    assert meta["License-Expression"] == "Apache-2.0" and meta.get_all("License-File") == ["LICENSE"]
    assert meta["License"] is None  # the deprecated free-text field is gone
    classifiers = meta.get_all("Classifier")
    assert not [c for c in classifiers if c.startswith("License ::")]  # PEP 639: the expression says it
    assert "Typing :: Typed" in classifiers and "Programming Language :: Python :: 3.10" in classifiers
    urls = dict(u.split(", ", 1) for u in meta.get_all("Project-URL"))
    assert urls["Repository"] == URL and urls["Issues"] == f"{URL}/issues"
    assert meta["Author"]
    assert 'accelerate>=1.1; extra == "hf"' in meta.get_all("Requires-Dist")  # transformers' Trainer needs it


def test_the_package_page_links_absolutely_and_shows_pip_install(built):
    page = _metadata(built[0]).get_payload()
    assert page == (REPO / "README.md").read_text(encoding="utf-8").replace("\r\n", "\n") or page.strip()
    relative = [link for link in LINK.findall(page) if not link.startswith(("https://", "http://", "#"))]
    assert relative == []
    assert re.search(r"^pip install 'torch-layerscale\[[a-z,]+\]'$", page, re.MULTILINE)
    assert "./scripts/demo.sh" in page  # the repository's commands stay beside it


def test_train_help_points_to_no_file_a_pip_install_lacks():
    done = subprocess.run([sys.executable, "-m", "layerscale", "train", "--help"], capture_output=True, text=True,
                          env={"COLUMNS": "80", "PATH": ""})
    assert done.returncode == 0
    assert f"{URL}/blob/main/docs/training.md" in done.stdout  # in one piece (not wrapped at a hyphen): clickable
    assert not re.search(r"(?<![/\w])docs/", done.stdout)


def _readme_first_python_block() -> str:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.search(r"^```python\n(.*?)^```$", text, re.DOTALL | re.MULTILINE).group(1)


def test_the_wheel_installs_into_a_fresh_venv_and_runs_the_readme_first_block(built, tmp_path):
    """A venv with no torch-layerscale: the wheel is installed without dependencies, and torch (the one hard
    dependency) is borrowed from this interpreter's site-packages by a path entry (which, unlike a site folder,
    runs none of its .pth files: this checkout's editable install stays out)."""
    import site
    import venv

    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    purelib = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                                  capture_output=True, text=True, check=True).stdout.strip())
    torch_dir = Path(__import__("torch").__file__).parents[1]
    assert torch_dir in {Path(p) for p in site.getsitepackages()} | {Path(site.getusersitepackages())}
    (purelib / "borrowed_torch.pth").write_text(f"{torch_dir}\n")
    done = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                           "--no-index", "--quiet", str(built[0])], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    script = "import layerscale, sys; print(layerscale.__file__)\n" + _readme_first_python_block() + \
             "\nprint(tuple(logits.shape))\n"
    run = subprocess.run([str(python), "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                         env={"PATH": str(env_dir / "bin"), "OMP_NUM_THREADS": "1"})
    assert run.returncode == 0, run.stderr[-2000:]
    installed, shape = run.stdout.strip().splitlines()[-2:]
    assert Path(installed).is_relative_to(purelib) and shape == "(2, 10)"
    assert (env_dir / "bin" / "layerscale").is_file()  # the console script


def test_the_wheel_ships_the_library_not_this_repositorys_evidence(built):
    """Issue 56: the wheel holds the ``layerscale`` package only; the evidence pipelines (``evidence/``), the
    repository's scripts and the committed studies stay out of it."""
    wheel, _ = built
    with zipfile.ZipFile(wheel) as archive:
        tops = {name.split("/")[0] for name in archive.namelist()}
        names = archive.namelist()
    assert {top for top in tops if not top.endswith(".dist-info")} == {"layerscale"}
    evidence = {path.stem for path in (REPO / "evidence").glob("*.py")} - {"__init__"}
    assert "results_page" in evidence
    assert not [name for name in names if Path(name).stem in evidence]
