"""A study folder may be someone else's (``--reuse-from``, ``--report-only`` of a shared archive): its JSON records
(``study.json``, ``tuning.json``, a run's ``summary.json`` / ``diverged.json`` / config, ``metrics.jsonl`` lines)
nested past Python's recursion or holding an integer past its int-string limit are read through
:mod:`layerscale.untrusted_files` — a reader that tolerates a damaged record still does, one that refuses names the
file in one line — never a ``RecursionError``."""

import json
import os

import pytest

from layerscale.study.report.committed import _exploratory_only, _extension_pending, _procedure_note
from layerscale.study.run.archive import compact_metrics
from layerscale.study.run.columnar_metrics import decode_metrics, encode_metrics
from layerscale.study.run.estimate import _known_choices
from layerscale.study.run.retrain import DIVERGED_FILE, run_outcome

DEEP = "[" * 200_000 + "]" * 200_000
BIG = '{"step": ' + "4" * 100_000 + "}"


@pytest.mark.parametrize("content", [DEEP, BIG])
def test_committed_and_estimate_readers_treat_an_unreadable_record_as_absent(tmp_path, content):
    for name in ("study.json", "tuning.json"):
        (tmp_path / name).write_text(content)
    assert _procedure_note(tmp_path) == "" and _exploratory_only(tmp_path) is False
    assert _extension_pending(tmp_path) == set() and _known_choices(tmp_path) == {}


def test_committed_and_estimate_readers_read_a_valid_record_as_before(tmp_path):
    (tmp_path / "study.json").write_text(json.dumps({"exploratory_only": True, "primary_declared": True}))
    (tmp_path / "tuning.json").write_text(json.dumps({"cells": [
        {"method": "prenorm", "depth": 2, "chosen_lr": 0.01, "extension_pending": [0.1]}]}))
    assert _exploratory_only(tmp_path) is True and _procedure_note(tmp_path) == ""
    assert _extension_pending(tmp_path) == {("prenorm", "2", 0.1)}
    assert _known_choices(tmp_path) == {("prenorm", 2): 0.01}


@pytest.mark.parametrize("name", ["summary.json", DIVERGED_FILE])
@pytest.mark.parametrize("content, reason", [(DEEP, "nested too deep"), (BIG, "an integer of more than")])
def test_a_run_outcome_names_the_unreadable_record(tmp_path, name, content, reason):
    (tmp_path / name).write_text(content)
    with pytest.raises(ValueError) as info:
        run_outcome(tmp_path, classification=True)
    assert str(info.value).startswith(f"{tmp_path / name}: ") and reason in str(info.value)


def test_the_worker_names_an_unreadable_run_config(tmp_path):
    from layerscale.study.run.worker import main

    config = tmp_path / "config.json"
    config.write_text(DEEP)
    with pytest.raises(ValueError, match=f"^{config}: refused \\(nested too deep\\)"):
        main([str(os.getpid()), str(tmp_path / "run"), str(config), "1"])
    assert not (tmp_path / "run").exists()


def test_packing_keeps_a_metrics_line_python_cannot_hold_verbatim():
    record = {"step": 1, "split": "diagnostics", "blocks": [{"name": "b0", "x": 1.0}]}
    lines = [json.dumps(record), '{"split": "diagnostics", "x": ' + DEEP + "}",
             '{"split": "diagnostics", "x": ' + "5" * 100_000 + "}"]
    data = "\n".join(lines).encode()
    packed = compact_metrics(data).split(b"\n")
    assert packed[1:] == data.split(b"\n")[1:]
    document = encode_metrics(data)
    assert document is not None and decode_metrics(document, "m") == data
