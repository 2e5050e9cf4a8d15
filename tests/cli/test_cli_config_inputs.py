"""Bad configs and paths given to ``study`` and ``train`` (a CLI bad-input sweep): each is one line naming the key,
field or file, its value and what was expected, exit status 2, and nothing on disk changed.

- ``study --set optim.lr=abc``: the line named the ``--lr`` option, not the key given;
- a ``study.json`` field of the wrong type (``"methods": 5``): ``'int' object is not iterable``, or a traceback
  (``"base": 5``, ``"executor": 5``);
- ``study --dry-run`` / ``--estimate`` with ``--out`` an existing file or ``--reuse-from`` a missing folder: both
  went on (a run refused them, the first as a raw ``[Errno 17] File exists``, the second after writing
  ``study.json`` and ``plan.json``);
- ``train --out`` an existing file: called a "run directory already exists and is not empty";
- ``train --config`` an empty file (or only a comment, or ``{}``): trained on every default.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from disk_state import snapshot
from layerscale.cli import main

#: a study small enough to plan in a second: one method, one depth, one seed, 2 steps, untuned
STUDY = ["study", "--preset", "demo", "--methods", "prenorm", "--depths", "1", "--seeds", "1", "--lrs", "1e-3",
         "--steps", "2", "--no-shared-table", "--jobs", "1", "--no-report", "--no-progress"]
TINY_BASE = {
    "model": {"name": "vit", "patch_size": 4, "embed_dim": 16, "num_heads": 2, "mlp_ratio": 1.0},
    "data": {"name": "digits", "batch_size": 64, "augment": False},
    "optim": {"epochs": 1, "max_steps": 2, "lr": 1e-3, "warmup_steps": 1},
    "run": {"progress": "none"},
}


def refused(capsys, argv: list[str], folder: Path) -> str:
    """The one stderr line of ``main(argv)``, which must exit with status 2 and leave ``folder`` as it was."""
    before = snapshot(folder)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert snapshot(folder) == before
    return err.rstrip("\n")


# -- 1. study --set optim.lr=abc ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["--dry-run", "--estimate"])
def test_a_bad_shared_rate_given_with_set_names_the_key(tmp_path, capsys, mode):
    line = refused(capsys, [*STUDY, "--set", "optim.lr=abc", "--out", str(tmp_path / "s"), mode], tmp_path)
    assert line == ("layerscale study: error: config key optim.lr (the shared learning rate, --lr): expected a "
                    "positive number, got 'abc'")


# -- 2. study.json fields of the wrong type -----------------------------------------------------------------------

def _study_json(folder: Path, **fields) -> None:
    from layerscale.study.design.grid import StudySpec

    raw = StudySpec(("prenorm",), (1,), (0,), copy.deepcopy(TINY_BASE)).to_dict()
    raw.update(fields)
    folder.mkdir()
    (folder / "study.json").write_text(json.dumps(raw))


@pytest.mark.parametrize(("field", "value", "expected"), [
    ("methods", 5, "a list of method names (strings), got 5 (a JSON number)"),
    ("methods", "prenorm", "a list of method names (strings), got 'prenorm' (a JSON string)"),
    ("depths", [1, "2"], "a list of integers, got [1, '2'] (a JSON array)"),
    ("seeds", None, "a list of integers, got None (a JSON null)"),
    ("shared_table", "no", "true or false, got 'no' (a JSON string)"),
    ("validation_fraction", "x", "a number, got 'x' (a JSON string)"),
    ("shapes", [["prenorm", 1]], "a list of [method, depth, width] rows (string, integer, integer), got "
                                 "[['prenorm', 1]] (a JSON array)"),
    ("base", 5, "a mapping of training config sections (a JSON object), got 5 (a JSON number)"),
    ("executor", 5, "a mapping of executor options (a JSON object) or null, got 5 (a JSON number)"),
])
@pytest.mark.parametrize("mode", ["--dry-run", "--report-only"])
def test_a_study_file_field_of_the_wrong_type_is_named_with_its_value(tmp_path, capsys, field, value, expected,
                                                                     mode):
    _study_json(tmp_path / "s", **{field: value})
    line = refused(capsys, ["study", "--out", str(tmp_path / "s"), mode], tmp_path)
    assert line == (f"layerscale study: error: {tmp_path / 's' / 'study.json'} is not a readable study design "
                    f"(field {field!r}: expected {expected})")


def test_a_study_file_without_methods_says_the_field_is_missing(tmp_path, capsys):
    _study_json(tmp_path / "s")
    raw = json.loads((tmp_path / "s" / "study.json").read_text())
    del raw["methods"]
    (tmp_path / "s" / "study.json").write_text(json.dumps(raw))
    line = refused(capsys, ["study", "--out", str(tmp_path / "s"), "--dry-run"], tmp_path)
    assert line.endswith("study.json is not a readable study design (field 'methods' is missing; expected a list "
                         "of method names (strings))")


def test_the_executor_field_is_checked_when_the_design_comes_from_the_command_line(tmp_path, capsys):
    _study_json(tmp_path / "s", executor=5)
    line = refused(capsys, [*STUDY, "--out", str(tmp_path / "s"), "--dry-run"], tmp_path)
    assert line == (f"layerscale study: error: {tmp_path / 's' / 'study.json'}: unreadable study file (field "
                    "'executor': expected a mapping of executor options (a JSON object) or null, got 5 (a JSON "
                    "number))")


# -- 3. study --out FILE / --reuse-from MISSING, in every mode -----------------------------------------------------

@pytest.mark.parametrize("mode", ["--dry-run", "--estimate", None], ids=["dry-run", "estimate", "run"])
def test_an_out_that_is_a_file_is_refused_in_every_mode(tmp_path, capsys, mode):
    (tmp_path / "afile").write_text("mine\n")
    argv = [*STUDY, "--out", str(tmp_path / "afile"), *([mode] if mode else [])]
    line = refused(capsys, argv, tmp_path)
    assert line == f"layerscale study: error: {tmp_path / 'afile'}: is a file, not a folder; expected a study folder"


@pytest.mark.parametrize("source", ["nosuch", "afile"])
@pytest.mark.parametrize("mode", ["--dry-run", "--estimate", None], ids=["dry-run", "estimate", "run"])
def test_a_reuse_source_that_is_no_folder_is_refused_in_every_mode(tmp_path, capsys, mode, source):
    (tmp_path / "afile").write_text("mine\n")
    argv = [*STUDY, "--out", str(tmp_path / "s"), "--reuse-from", str(tmp_path / source),
            *([mode] if mode else [])]
    line = refused(capsys, argv, tmp_path)
    found = "not found" if source == "nosuch" else "is a file"
    assert line == (f"layerscale study: error: --reuse-from {tmp_path / source}: {found}; expected the folder of an "
                    "earlier study")


# -- 4. train --out FILE -----------------------------------------------------------------------------------------

def test_train_into_an_out_that_is_a_file_says_it_is_a_file(tmp_path, capsys):
    (tmp_path / "config.json").write_text(json.dumps(TINY_BASE))
    (tmp_path / "afile").write_text("mine\n")
    line = refused(capsys, ["train", "--config", str(tmp_path / "config.json"), "--out", str(tmp_path / "afile")],
                   tmp_path)
    assert line == f"layerscale train: error: {tmp_path / 'afile'}: is a file, not a folder; expected a run directory"


# -- 5. train --config EMPTY ---------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "text"), [("empty.yaml", ""), ("comment.yaml", "# only a comment\n"),
                                            ("braces.json", "{}")])
@pytest.mark.parametrize("print_config", [False, True])
def test_train_refuses_a_config_file_without_a_section(tmp_path, capsys, name, text, print_config):
    if name.endswith(".yaml"):
        pytest.importorskip("yaml")
    (tmp_path / name).write_text(text)
    argv = ["train", "--config", str(tmp_path / name), "--out", str(tmp_path / "run"),
            *(["--print-config"] if print_config else [])]
    line = refused(capsys, argv, tmp_path)
    assert line == (f"layerscale train: error: {tmp_path / name}: the config file holds no section (it is empty, "
                    "only comments or {}); expected at least one section, e.g. model:, data: or optim: (see "
                    "layerscale train --config vit_digits --print-config)")


def test_a_config_of_one_section_stays_valid(tmp_path, capsys):
    (tmp_path / "one.json").write_text(json.dumps({"data": {"batch_size": 32}}))
    assert main(["train", "--config", str(tmp_path / "one.json"), "--print-config"]) == 0
    assert "batch_size" in capsys.readouterr().out
