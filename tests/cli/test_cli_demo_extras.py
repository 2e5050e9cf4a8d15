"""In a torch-only install the demo names every missing extra in one line, before writing anything."""

import importlib.util

from layerscale import demo
from layerscale.cli import main


def test_every_missing_extra_in_one_line_and_nothing_written(tmp_path, monkeypatch, capsys):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("sklearn", "yaml", "safetensors") else real(name, *a))
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.splitlines() == [err]
    assert "scikit-learn, pyyaml, safetensors" in err and "pip install 'torch-layerscale[data,train]'" in err
    assert not out.exists()


def test_nothing_missing_here():
    assert demo.missing_extras() is None
