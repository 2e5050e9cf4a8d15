"""Commands that draw figures (``analyze``, ``prune --by``) name the missing ``plots`` extra before any work."""

import pytest

from layerscale.cli import main


@pytest.mark.parametrize("command", [["analyze", "no-such-run", "--out", "a"],
                                     ["prune", "no-such-run", "--by", "gamma", "--remove", "1", "--out", "p"]])
def test_commands_that_draw_figures_ask_for_matplotlib_before_any_work(tmp_path, monkeypatch, capsys, command):
    """They read the model and scored the data first, and named the missing package only when drawing."""
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(f"No module named {name!r}")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    monkeypatch.chdir(tmp_path)
    assert main(command) == 2
    assert capsys.readouterr().err.strip().endswith("pip install 'torch-layerscale[plots]'")


def test_the_train_summary_names_the_extra_its_report_hint_needs(monkeypatch, tmp_path):
    import importlib.util
    from types import SimpleNamespace

    from layerscale.train.records.run_summary import final_line

    result = SimpleNamespace(step=3, metrics={}, run_dir=tmp_path, checkpoint=tmp_path / "none")
    assert final_line(result, 1.0).endswith("report.html")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    assert final_line(result, 1.0).endswith("report.html (needs pip install 'torch-layerscale[plots]')")
