"""``tuning: fixed``: a confirmatory study re-runs another study's chosen rates on fresh seeds; each cell's rate is
part of its design (study.json), nothing is tuned, and the tables say so."""

import csv
import json

import pytest

from layerscale.study.design.grid import StudySpec
from study_helpers import TINY_BASE

RATES = (("prenorm", 1, 1e-3), ("layerscale", 1, 3e-3), ("prenorm", 2, 1e-3), ("layerscale", 2, 3e-3))


def _spec(**overrides):
    design = dict(tuning="fixed", fixed_rates=RATES, shared_table=False, primary=("layerscale@2",))
    design.update(overrides)
    return StudySpec(("prenorm", "layerscale"), (1, 2), (5, 6, 7), TINY_BASE, **design)


def test_a_fixed_design_round_trips_and_its_final_runs_use_each_cells_rate(tmp_path):
    spec = _spec()
    again = StudySpec.from_dict(json.loads(json.dumps(spec.to_dict())))
    assert again == spec and again.fixed_rate("layerscale", 2) == 3e-3
    from layerscale.study.run.rate_search import tune_study

    outcome = tune_study(spec, tmp_path, 8, True, pool=None)  # nothing to train: the pool is never called
    finals = spec.final_runs(tmp_path, outcome.chosen)
    assert sorted(r.run_id for r in finals) == sorted(
        f"{m}-d{d}-lr{lr:g}-s{s}" for m, d, lr in RATES for s in (5, 6, 7))
    record = json.loads((tmp_path / "tuning.json").read_text())
    assert record["mode"] == "fixed" and {c["chosen_lr"] for c in record["cells"]} == {1e-3, 3e-3}


def test_a_study_file_without_fixed_rates_reads_back_without_the_key():
    plain = StudySpec(("prenorm",), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3), tuning="grid")
    assert "fixed_rates" not in plain.to_dict()


@pytest.mark.parametrize("overrides, message", [
    (dict(fixed_rates=RATES[:3]), "exactly one rate per cell; missing or repeated: layerscale@2"),
    (dict(fixed_rates=RATES + (("layerscale", 2, 1e-3),)), "missing or repeated: layerscale@2"),
    (dict(fixed_rates=RATES[:3] + (("layerscale", 2, -1.0),)), "must be [METHOD, DEPTH, LR]"),
    (dict(fixed_rates=RATES[:3] + (("rezero", 2, 1e-3),)), "must be [METHOD, DEPTH, LR]"),
    (dict(lrs=(1e-3, 3e-3)), "give no --lrs and no shared table"),
    (dict(shared_table=True), "give no --lrs and no shared table"),
    (dict(tuning="grid", lrs=(1e-3, 3e-3), shared_table=True), "fixed_rates is only for --tuning fixed"),
])
def test_bad_fixed_designs_are_one_value_error(overrides, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        _spec(**overrides)


@pytest.mark.slow
def test_a_fixed_study_trains_its_seeds_at_its_rates_and_says_so(tmp_path):
    from layerscale.study.study import run_study

    spec = _spec(bootstrap=200)
    summary = run_study(spec, tmp_path / "study", jobs=2, threads=1, report=False, progress=False, log=lambda m: None)
    assert not summary.failures
    with open(tmp_path / "study" / "results.csv") as f:
        rows = {(r["method"], int(r["depth"])): r for r in csv.DictReader(f) if r["table"] == "tuned"}
    for method, depth, lr in RATES:
        assert float(rows[(method, depth)]["lr"]) == lr and rows[(method, depth)]["test_n"] == "3"
    primary = rows[("layerscale", 2)]
    assert primary["family"] == "primary" and primary["bootstrap_low"]  # fresh runs carry their test outcomes
    markdown = (tmp_path / "study" / "results.md").read_text()
    assert "Each method at the learning rate fixed by the design" in markdown
    assert "each at the learning rate its design fixed (prenorm@1 0.001, layerscale@1 0.003" in markdown
    assert "shared learning rate" not in markdown and "(lr 0.003)" in markdown


@pytest.mark.slow
def test_the_study_command_draws_no_progress_bar_off_a_terminal(tmp_path):
    """Run from a study.json alone (the confirmatory study's way), output captured: no carriage return in it."""
    import subprocess
    import sys

    folder = tmp_path / "study"
    folder.mkdir()
    spec = StudySpec(("prenorm",), (1,), (5,), TINY_BASE, tuning="fixed", fixed_rates=(("prenorm", 1, 1e-3),),
                     shared_table=False)
    (folder / "study.json").write_text(json.dumps(spec.to_dict()))
    result = subprocess.run([sys.executable, "-m", "layerscale", "study", "--out", str(folder), "--jobs", "1",
                             "--no-report"], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    assert "\r" not in result.stdout + result.stderr
    assert (folder / "runs" / "prenorm-d1-lr0.001-s5" / "study_status.json").is_file()
