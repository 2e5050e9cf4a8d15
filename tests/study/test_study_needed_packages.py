"""A study names every package it needs and cannot import in one line, before it writes or trains anything (a
torch-only install failed each run in turn, then learned of SciPy; without matplotlib it trained for hours and then
failed on the report)."""

import importlib.util

import pytest

from layerscale.cli import main
from layerscale.study.design.needed_packages import missing_packages_line


def _without(monkeypatch, *modules):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name in modules else real(name, *a))


def test_a_torch_only_study_is_one_line_naming_every_extra(tmp_path, monkeypatch, capsys):
    _without(monkeypatch, "yaml", "safetensors", "numpy", "scipy", "matplotlib", "sklearn")
    out = tmp_path / "s"
    assert main(["study", "--preset", "demo", "--depths", "2", "--seeds", "1", "--steps", "2", "--out", str(out),
                 "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("layerscale study: error: layerscale study needs scipy, scikit-learn, pyyaml, safetensors, numpy, "
                   "matplotlib, not installed here: pip install 'torch-layerscale[data,plots,stats,train]'")
    assert not out.exists()


def test_the_report_asks_for_matplotlib_only_when_it_is_drawn(monkeypatch):
    _without(monkeypatch, "matplotlib")
    base = {"data": {"name": "text"}}
    assert "pip install 'torch-layerscale[plots]'" in missing_packages_line("layerscale study", base)
    assert missing_packages_line("layerscale study", base, report=False) is None


@pytest.mark.parametrize("dataset, needs_sklearn", [("digits", True), ("fashion-mnist", False)])
def test_the_datasets_reader_is_asked_for(monkeypatch, dataset, needs_sklearn):
    _without(monkeypatch, "sklearn")
    line = missing_packages_line("x", {"data": {"name": dataset}}, report=False)
    assert (line is not None) == needs_sklearn
    assert missing_packages_line("x", {"data": {"name": dataset}}, train=False, report=False) is None


def test_the_demo_asks_for_matplotlib_too(monkeypatch):
    from layerscale import demo

    _without(monkeypatch, "matplotlib")
    assert demo.missing_extras() == ("the demo needs matplotlib, not installed here: "
                                     "pip install 'torch-layerscale[plots]'")

