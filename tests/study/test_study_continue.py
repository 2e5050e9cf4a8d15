"""``layerscale study --out DIR`` without ``--preset`` or any design option continues the study DIR holds, as its
study.json records it; with them, the command line is the design and a folder holding another one is refused."""

from __future__ import annotations

import json

from study_helpers import TINY_BASE

from layerscale.cli import main
from layerscale.study.design.grid import StudySpec


def _saved(folder, **design):
    folder.mkdir()
    spec = StudySpec(("prenorm", "rezero"), (1,), (0, 1), json.loads(json.dumps(TINY_BASE)), lrs=(1e-3,),
                     **design)
    (folder / "study.json").write_text(json.dumps(spec.to_dict()))
    return spec


def test_no_design_option_continues_the_recorded_design(tmp_path, capsys):
    _saved(tmp_path / "s", validation_fraction=0.2)
    assert main(["study", "--out", str(tmp_path / "s"), "--dry-run", "--jobs", "1"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"continuing the study recorded in {tmp_path / 's' / 'study.json'}\n")
    assert "prenorm-d1-lr0.001-s1" in out and "rezero-d1-lr0.001-s1" in out
    assert sorted(p.name for p in (tmp_path / "s").iterdir()) == ["study.json"]  # the dry run wrote nothing


def test_a_preset_or_a_design_option_is_the_design_and_another_study_is_refused(tmp_path, capsys):
    _saved(tmp_path / "s")
    for extra in (["--preset", "demo"], ["--seeds", "2"]):
        assert main(["study", "--out", str(tmp_path / "s"), "--dry-run", *extra]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "holds a study with different" in err
        assert "continue it with the same arguments or with none of --preset and the design options" in err


def test_an_unreadable_study_file_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "study.json").write_text("{not json")
    assert main(["study", "--out", str(tmp_path / "s"), "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{tmp_path / 's' / 'study.json'} is not a readable study design" in err
