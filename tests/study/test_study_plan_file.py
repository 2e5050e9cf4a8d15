"""plan.json: the study's plan (steps per run, metric, data description, parameter counts) is recorded when the study
is checked, ``--report-only`` rebuilds the tables from it without loading the data, and a study whose data or model
code now gives another plan is refused for training instead of being mixed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from layerscale.cli import main
from layerscale.study.design.grid import StudySpec
from layerscale.study.design.plan import PLAN_FILE, read_plan
from layerscale.study.study import run_study
from layerscale.train.setup import data_setup
from study_helpers import TINY_BASE, write_fake_run

SPEC = StudySpec(("prenorm", "layerscale"), (2, 4), (0, 1, 2), TINY_BASE, lrs=(1e-3,))


@pytest.fixture(scope="module")
def study(tmp_path_factory) -> Path:
    """A study folder checked by ``run_study`` (study.json, plan.json) with hand-written finished final runs."""
    folder = tmp_path_factory.mktemp("plan") / "study"
    run_study(SPEC, folder, train=False, report=False, progress=False)
    for run in SPEC.final_runs(folder, {cell: 1e-3 for cell in SPEC.cells()}):
        bonus = 0.05 * (run.method == "layerscale") + 0.01 * run.seed
        write_fake_run(run.run_dir, [0.5, 0.6 + bonus], [1.2, 1.0 - bonus])
    return folder


def _copy(study: Path, to: Path) -> Path:
    shutil.copytree(study, to)
    return to


def test_the_plan_is_recorded_with_every_cells_parameter_count(study):
    raw = json.loads((study / PLAN_FILE).read_text())
    assert raw["total_steps"] == 8 and raw["language_model"] is False
    assert raw["data_description"].startswith("digits")
    assert [(m, d) for m, d, _ in raw["params"]] == sorted(SPEC.cells())
    assert all(count > 0 for _, _, count in raw["params"])
    assert read_plan(study).params[("layerscale", 4)] > read_plan(study).params[("layerscale", 2)]


def test_report_only_rebuilds_the_same_tables_without_the_data(study, tmp_path, monkeypatch):
    folder = _copy(study, tmp_path / "study")
    assert main(["study", "--out", str(folder), "--report-only", "--no-report"]) == 0
    with_data = {name: (folder / name).read_bytes() for name in ("results.md", "results.csv", "runs.csv")}
    plan_bytes = (folder / PLAN_FILE).read_bytes()

    def no_data(config):
        raise ValueError("the dataset is not installed on this machine")

    monkeypatch.setattr(data_setup, "load_train_data", no_data)
    assert main(["study", "--out", str(folder), "--report-only", "--no-report"]) == 0
    for name, content in with_data.items():
        assert (folder / name).read_bytes() == content, name
    assert (folder / PLAN_FILE).read_bytes() == plan_bytes
    # without a recorded plan the data is needed, and its absence is the one error
    (folder / PLAN_FILE).unlink()
    assert main(["study", "--out", str(folder), "--report-only", "--no-report"]) == 2


@pytest.mark.parametrize("change, message", [
    (lambda raw: raw.update(total_steps=raw["total_steps"] + 1), "9 steps per run recorded, 8 now"),
    (lambda raw: raw["params"][0].__setitem__(2, 5), "5 parameters recorded"),
])
def test_training_a_study_planned_differently_is_refused_and_writes_nothing(study, tmp_path, change, message):
    folder = _copy(study, tmp_path / "study")
    raw = json.loads((folder / PLAN_FILE).read_text())
    change(raw)
    (folder / PLAN_FILE).write_text(json.dumps(raw))
    before = {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()}
    with pytest.raises(ValueError, match=message) as info:
        run_study(SPEC, folder, progress=False, report=False)
    assert "\n" not in str(info.value) and "start a new study folder" in str(info.value)
    assert {p: p.read_bytes() for p in folder.rglob("*") if p.is_file()} == before


def test_a_changed_data_description_alone_is_rewritten_not_refused(study, tmp_path):
    folder = _copy(study, tmp_path / "study")
    raw = json.loads((folder / PLAN_FILE).read_text())
    raw["data_description"] = "digits, as an older version described them"
    (folder / PLAN_FILE).write_text(json.dumps(raw))
    run_study(SPEC, folder, progress=False, report=False, train=True)  # every run is finished: nothing trains
    assert read_plan(folder).data_description == read_plan(study).data_description


def test_an_unreadable_plan_is_one_line_naming_the_file(study, tmp_path, capsys):
    folder = _copy(study, tmp_path / "study")
    (folder / PLAN_FILE).write_text("{not json")
    assert main(["study", "--out", str(folder), "--report-only", "--no-report"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and PLAN_FILE in err[0] and "not a readable study plan" in err[0]
