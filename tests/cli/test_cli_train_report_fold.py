"""``layerscale train``'s last line and warmup warning, ``--print-config``, ``--data-path``; ``layerscale report``
refusing to overwrite without ``--force``; ``layerscale fold RUN_DIR`` taking the run's latest checkpoint."""

import io
import json
import re
import sys

import pytest
import torch

from layerscale import create_model
from layerscale.checkpoint_io import load_state_dict_file
from layerscale.cli import main
from layerscale.train.config.schema import TrainConfig
from layerscale.train.config.config_file import load_config_file

MODEL = {"name": "vit", "embed_dim": 16, "depth": 2, "num_heads": 2, "patch_size": 2}
TINY = {"model": MODEL, "data": {"name": "digits", "batch_size": 64},
        "optim": {"epochs": 1, "max_steps": 6, "warmup_steps": 6},
        "run": {"progress": "none", "eval_every_steps": 3, "checkpoint_every_steps": 3}}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A 6-step run through the command line: (run_dir, stdout, stderr)."""
    root = tmp_path_factory.mktemp("cli")
    config = root / "tiny.json"
    config.write_text(json.dumps(TINY))
    capture = pytest.MonkeyPatch()
    out, err = io.StringIO(), io.StringIO()
    capture.setattr(sys, "stdout", out)
    capture.setattr(sys, "stderr", err)
    try:
        assert main(["train", "--config", str(config), "--out", str(root / "run")]) == 0
    finally:
        capture.undo()
    return root / "run", out.getvalue(), err.getvalue()


def test_final_line_gives_time_accuracies_parameters_and_the_report_command(finished_run):
    run_dir, out, _ = finished_run
    last = out.strip().splitlines()[-1]
    # no validation split: the evaluations read the test split, and the line says so
    match = re.fullmatch(r"done in [\d.]+ s: step 6, final test accuracy (0\.\d{4}) \(best (0\.\d{4}) at step "
                         r"(3|6)\), test loss [\d.]+, ([\d,]+) parameters; checkpoint (\S+); next: layerscale "
                         r"report (\S+) --out (\S+)", last)
    assert match, last
    final, best = float(match.group(1)), float(match.group(2))
    assert best >= final
    with torch.device("meta"):
        model = create_model("vit", img_size=8, in_chans=1, num_classes=10,  # digits: 1x8x8, 10 classes
                             **{k: v for k, v in MODEL.items() if k != "name"})
    expected = sum(p.numel() for p in model.parameters())
    assert int(match.group(4).replace(",", "")) == expected
    assert match.group(5).endswith("step_00000006") and match.group(6) == str(run_dir)
    assert match.group(7) == str(run_dir / "report.html")


def test_warmup_at_or_above_the_total_steps_is_a_warning(finished_run):
    _, _, err = finished_run
    assert "warning: optim.warmup_steps 6 >= the run's 6 total steps" in err


def test_print_config_prints_the_full_resolved_config_and_writes_nothing(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    assert main(["train", "--config", str(config), "--data-path", "some/folder", "--set", "optim.lr=0.002",
                 "--out", str(tmp_path / "new"), "--print-config"]) == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    expected = TrainConfig.from_dict({**TINY, "data": {**TINY["data"], "path": "some/folder"},
                                      "optim": {**TINY["optim"], "lr": 0.002},
                                      "run": {**TINY["run"], "out_dir": str(tmp_path / "new")}}).to_dict()
    assert load_config_file(printed) == expected
    assert "weight_decay" in expected["optim"]  # defaults are filled in
    assert not (tmp_path / "new").exists()


def test_print_config_of_a_bad_key_is_the_usual_error(tmp_path, capsys):
    config = tmp_path / "tiny.json"
    config.write_text(json.dumps(TINY))
    assert main(["train", "--config", str(config), "--set", "optim.lrr=1", "--print-config"]) == 2
    assert "unknown config key optim.lrr (did you mean lr?)" in capsys.readouterr().err


def test_report_refuses_to_overwrite_without_force(finished_run, tmp_path, capsys):
    run_dir, _, _ = finished_run
    report = tmp_path / "report.html"
    report.write_text("mine")
    assert main(["report", str(run_dir), "--out", str(report)]) == 2
    assert f"{report} exists; pass --force to replace it" in capsys.readouterr().err
    assert report.read_text() == "mine"
    pytest.importorskip("matplotlib")
    assert main(["report", str(run_dir), "--out", str(report), "--force"]) == 0
    assert "<html" in report.read_text().lower()


def test_fold_of_a_run_directory_folds_its_latest_checkpoint(finished_run, tmp_path):
    run_dir, _, _ = finished_run
    assert main(["fold", str(run_dir), str(tmp_path / "from_run.safetensors")]) == 0
    latest = run_dir / "checkpoints" / "step_00000006" / "model.safetensors"
    assert main(["fold", str(latest), str(tmp_path / "from_file.safetensors")]) == 0
    from_run = load_state_dict_file(tmp_path / "from_run.safetensors")
    from_file = load_state_dict_file(tmp_path / "from_file.safetensors")
    assert from_run.keys() == from_file.keys() and all(torch.equal(from_run[k], from_file[k]) for k in from_run)
    assert not any("gamma" in key for key in from_run)


def test_fold_of_a_directory_without_checkpoints_is_one_line(tmp_path, capsys):
    assert main(["fold", str(tmp_path), str(tmp_path / "out.safetensors")]) == 2
    assert "neither a run directory" in capsys.readouterr().err


def test_print_config_of_a_resume_shows_the_runs_config_with_overrides(finished_run, tmp_path, capsys):
    run_dir, _, _ = finished_run
    before = sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.rglob("*"))
    assert main(["train", "--resume", str(run_dir), "--set", "optim.max_steps=9", "--print-config"]) == 0
    printed = tmp_path / "printed.yaml"
    printed.write_text(capsys.readouterr().out)
    shown = load_config_file(printed)
    assert shown["optim"]["max_steps"] == 9 and shown["run"]["out_dir"] == str(run_dir)
    assert shown["model"] == MODEL
    assert sorted((p.name, p.stat().st_mtime_ns) for p in run_dir.rglob("*")) == before


def test_report_of_the_same_run_given_twice_names_the_folder(finished_run, tmp_path, capsys):
    run_dir = finished_run[0]  # the error was "two runs are both named '//tmp/.../run'" (a name built for two runs)
    assert main(["report", str(run_dir), str(run_dir), "--out", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("layerscale report: error: "), err
    assert f"{run_dir} is given twice" in err and "//" not in err, err
    assert list(tmp_path.iterdir()) == []
