"""``layerscale prune`` on a training run: blocks scored on its validation split, judged on its held-out split,
healed with its own recipe (:mod:`layerscale.surgery.healing.prune_heal`)."""

from __future__ import annotations

import json

import pytest

from layerscale.cli import main
from layerscale.surgery.pruning import prune_cli

from run_configs import tiny_vit_digits_config

pytest.importorskip("safetensors")
pytest.importorskip("sklearn")

CONFIG = tiny_vit_digits_config(depth=3, validation_fraction=0.2)


@pytest.fixture(scope="module")
def run_dir(train_with_cli):
    return train_with_cli(CONFIG, "prune_run")


def test_blocks_are_scored_on_the_validation_split_not_the_evaluated_one(run_dir):
    from types import SimpleNamespace

    from layerscale.surgery.model_files import read_source_model

    args = SimpleNamespace(data=None, data_path=None, examples=10_000)
    scoring, evaluation = prune_cli._eval_data(read_source_model(run_dir), args)
    # digits: 1,797 images, 20 % held out (359); validation: 20 % of the 1,438 training images (287)
    assert (len(evaluation), len(scoring)) == (359, 287)
    test_images = {tuple(evaluation.inputs[i].flatten().tolist()) for i in range(len(evaluation))}
    assert not any(tuple(scoring.inputs[i].flatten().tolist()) in test_images for i in range(len(scoring)))


def test_prune_heal_changes_the_pruned_model_and_writes_it_shallower(run_dir, tmp_path, capsys):
    out, heal_out = tmp_path / "pruned", tmp_path / "heal"
    assert main(["prune", str(run_dir), "--remove", "1", "--by", "ablation,gamma", "--heal-steps", "3",
                 "--heal-out", str(heal_out), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "healed 3 steps: loss" in printed
    summary = json.loads((heal_out / "summary.json").read_text())
    assert summary["step"] == 3
    healed = [json.loads(line) for line in (heal_out / "metrics.jsonl").read_text().splitlines()]
    assert not any(record.get("split") == "test" for record in healed)
    from layerscale.surgery.model_files import read_source_model

    pruned = read_source_model(out).model
    assert len(pruned.blocks) == 2
    before, after = (float(part) for part in printed.split("healed 3 steps: loss ")[1].split(",")[0].split(" -> "))
    assert before != after


def test_heal_lr_sets_the_healing_runs_peak_rate(run_dir, tmp_path, capsys):
    import yaml

    heal_out = tmp_path / "heal"
    assert main(["prune", str(run_dir), "--blocks", "1", "--heal-steps", "2", "--heal-lr", "1e-4",
                 "--heal-out", str(heal_out), "--out", str(tmp_path / "pruned")]) == 0
    optim = yaml.safe_load((heal_out / "config.yaml").read_text())["optim"]
    assert (optim["lr"], optim["min_lr"], optim["max_steps"]) == (1e-4, 1e-5, 2)


@pytest.mark.parametrize("extra, match", [(["--heal-lr", "0", "--heal-steps", "2"], "--heal-lr must be > 0"),
                                          (["--heal-lr", "1e-4"], "--heal-lr needs --heal-steps")])
def test_a_bad_heal_lr_is_one_line_and_writes_nothing(run_dir, tmp_path, capsys, extra, match):
    out = tmp_path / "pruned"
    assert main(["prune", str(run_dir), "--blocks", "1", "--out", str(out), *extra]) == 2
    assert match in capsys.readouterr().err and not out.exists()
