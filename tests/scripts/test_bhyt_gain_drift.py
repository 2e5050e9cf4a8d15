"""scripts/bhyt_gain_drift.py: on a tiny digits study folder, a ``bhyt`` run trained with the updates of ``c`` ends
with ``c`` of its final weights (no drift); the same run with its saved ``c`` halved shows the drift the formula
gives, token by token; ``prenorm`` rows are not read; the summary's numbers come from the rows."""

from __future__ import annotations

import csv
import shutil
import sys
from pathlib import Path

import pytest
from safetensors.torch import save_file

from layerscale.checkpoint_io import load_state_dict_file
from layerscale.train import run

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts"))

import bhyt_gain_drift  # noqa: E402

CONFIG = {"model": {"name": "vit", "embed_dim": 32, "depth": 2, "num_heads": 2, "patch_size": 2, "residual": "bhyt"},
          "data": {"name": "digits", "batch_size": 32},
          "optim": {"epochs": 1, "max_steps": 12, "warmup_steps": 3, "lr": 3e-3},
          "run": {"progress": "none"}}


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("bhyt") / "run"
    run(CONFIG, out=folder)
    return folder


def _study(tmp_path: Path, trained: Path) -> Path:
    study = tmp_path / "study"
    for seed in (0, 1):
        shutil.copytree(trained, study / "runs" / f"bhyt-d2-s{seed}")
    with open(study / "runs.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerows([["run_id", "method", "status"], ["bhyt-d2-s0", "bhyt", "finished"],
                          ["bhyt-d2-s1", "bhyt", "finished"], ["bhyt-d2-s2", "bhyt", "pending"],
                          ["prenorm-d2-s0", "prenorm", "finished"]])
    return study


def test_no_drift_after_updates_and_the_formula_after_a_halved_gain(tmp_path, trained):
    study = _study(tmp_path, trained)
    runs = bhyt_gain_drift.finished_bhyt_runs(study)
    assert [r.name for r in runs] == ["bhyt-d2-s0", "bhyt-d2-s1"]
    weights_file = next((runs[1] / "checkpoints").glob("step_*")) / "model.safetensors"
    weights = dict(load_state_dict_file(weights_file))
    for name in [n for n in weights if n.endswith("norm2.attn_variance_gain")]:
        weights[name] = weights[name] / 2
    save_file(weights, weights_file)

    rows = bhyt_gain_drift.drift_rows(runs, images=63)  # 63 × 17 tokens: an odd count, one middle token
    assert [(r["run"], r["block"]) for r in rows] == [(n, b) for n in ("bhyt-d2-s0", "bhyt-d2-s1") for b in (0, 1)]
    for updated, halved in zip(rows[:2], rows[2:]):
        # 12 planned steps: c is updated after every step, the last time from the weights the run ended with
        assert updated["c_final"] == updated["c0"] and updated["r2_change_max"] == 0
        assert halved["c0"] == updated["c0"] / 2 and halved["c_final"] == updated["c_final"]
        k = halved["lam1"] ** 2 / 100
        # the change falls as σ² grows, so its median is the change at the median σ²:
        # |√((σ² + c0 k + ε)/(σ² + c k + ε)) − 1|
        s2 = halved["s2_median"]
        expected = abs(((s2 + halved["c0"] * k + 1e-6) / (s2 + halved["c_final"] * k + 1e-6)) ** 0.5 - 1)
        assert abs(halved["r2_change_median"] - expected) <= 1e-9 * expected
        assert 0 < halved["r2_change_median"] <= halved["r2_change_max"]
    text = bhyt_gain_drift.summary(rows)
    assert text.startswith("2 finished `bhyt` runs, 4 blocks.")
    assert f"{max(r['r2_change_max'] for r in rows):.1%}" in text


def test_the_command_writes_both_files_and_refuses_a_study_without_bhyt(tmp_path, capsys, trained):
    study = _study(tmp_path, trained)
    out = tmp_path / "out"
    assert bhyt_gain_drift.main(["--study", str(study), "--out", str(out), "--images", "32"]) == 0
    with open(out / "drift.csv", newline="") as handle:
        assert len(list(csv.DictReader(handle))) == 4
    assert (out / "summary.md").read_text() == capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "runs.csv").write_text("run_id,method,status\nprenorm-d2-s0,prenorm,finished\n")
    assert bhyt_gain_drift.main(["--study", str(empty), "--out", str(out)]) == 2
    assert "no finished bhyt run" in capsys.readouterr().err
