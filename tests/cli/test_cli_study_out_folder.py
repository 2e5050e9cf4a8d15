"""``study`` / ``demo --out DIR`` where DIR exists, holds someone's files and no ``study.json``: the study wrote its
plan, run folders and tables among them (``layerscale train`` refuses a non-empty folder that is no run). Now one
line, exit status 2, in every mode, the folder as it was; a new, empty or lock-only folder still takes a study."""

from __future__ import annotations

import pytest

from layerscale.cli import main
from test_cli_config_inputs import STUDY, refused


@pytest.mark.parametrize("mode", ["--dry-run", "--estimate", None], ids=["dry-run", "estimate", "run"])
def test_a_non_empty_folder_without_a_study_is_refused(tmp_path, capsys, mode):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "draft.tex").write_text("mine\n")
    line = refused(capsys, [*STUDY, "--out", str(folder), *([mode] if mode else [])], tmp_path)
    assert line == (f"layerscale study: error: {folder}: exists, is not empty and holds no study (study.json); a "
                    "study starts in a new or empty folder and continues in its own: choose another --out")


def test_the_demo_refuses_it_too(tmp_path, capsys):
    folder = tmp_path / "papers"
    folder.mkdir()
    (folder / "draft.tex").write_text("mine\n")
    line = refused(capsys, ["demo", "--out", str(folder), "--no-progress"], tmp_path)
    assert "holds no study (study.json)" in line


@pytest.mark.parametrize("content", ["nothing", "hidden"])
def test_an_empty_or_hidden_only_folder_takes_a_study(tmp_path, capsys, content):
    folder = tmp_path / "s"
    folder.mkdir()
    if content == "hidden":
        (folder / ".lock").write_text("")
    assert main([*STUDY, "--out", str(folder), "--dry-run"]) == 0
    capsys.readouterr()
