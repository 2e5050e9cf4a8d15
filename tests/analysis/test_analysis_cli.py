"""``layerscale analyze`` on a run directory written by ``layerscale train`` (digits, a few steps)."""

from __future__ import annotations

import shutil

import pytest
import torch

from layerscale.analysis import DepthAnalysis, analyze_run, effective_depth, load_run_model
from layerscale.cli import main

from run_configs import tiny_vit_digits_config

pytest.importorskip("safetensors")
pytest.importorskip("matplotlib")
pytest.importorskip("sklearn")

OUTPUTS = ("analysis.json", "analysis.csv", "analysis.html")
PAPER = ("depth_summary.md", "depth_summary.tex", "depth_blocks.md", "depth_blocks.tex", "removal_gromov.svg",
         "removal_gromov.pdf", "angular_heatmap.svg", "angular_heatmap.pdf")
CONFIG = tiny_vit_digits_config(depth=3)


@pytest.fixture(scope="module")
def run_dir(train_with_cli):
    return train_with_cli(CONFIG, "analyze")


def test_analyze_a_run_directory_writes_its_outputs_and_the_paper_files(run_dir, tmp_path, capsys):
    out = tmp_path / "analysis"
    assert main(["analyze", str(run_dir), "--out", str(out), "--examples", "60", "--batch-size", "25",
                 "--no-progress"]) == 0
    assert sorted(p.name for p in out.iterdir()) == sorted(OUTPUTS + PAPER)
    result = DepthAnalysis.read_json(out / "analysis.json")
    assert result.depth == 3 and result.num_examples == 60 and result.residual == "layerscale"
    assert result.source == str(run_dir)
    rows = (out / "analysis.csv").read_text().splitlines()
    assert rows[0].startswith("block,name,ablation_delta_loss") and len(rows) == 4
    page = (out / "analysis.html").read_text()
    assert page.count("data:image/png;base64,") == 7  # removal, ablation, early exit, geometry, heatmap, probes, CKA
    printed = capsys.readouterr().out
    assert "effective depth (" in printed and "set variant" in printed and "wrote 11 files" in printed
    # the same numbers from Python, and from the run's last checkpoint directory
    again = analyze_run(run_dir, max_examples=60, batch_size=25)
    assert again.ablation_loss == pytest.approx(result.ablation_loss, abs=1e-9)
    assert effective_depth(again) == result.summary.effective_depth
    checkpoint = sorted((run_dir / "checkpoints").iterdir())[-1]
    from_checkpoint = analyze_run(checkpoint, max_examples=60, batch_size=25)
    assert from_checkpoint.clean_loss == pytest.approx(result.clean_loss, abs=1e-9)
    # existing outputs are kept unless --force
    assert main(["analyze", str(run_dir), "--out", str(out), "--examples", "20", "--no-progress"]) == 2
    assert DepthAnalysis.read_json(out / "analysis.json").num_examples == 60
    assert main(["analyze", str(run_dir), "--out", str(out), "--examples", "20", "--no-progress", "--force"]) == 0
    assert DepthAnalysis.read_json(out / "analysis.json").num_examples == 20


def test_loaded_model_equals_the_trained_weights(run_dir):
    from layerscale.checkpoint_io import load_state_dict_file

    loaded = load_run_model(run_dir)
    saved = load_state_dict_file(sorted((run_dir / "checkpoints").iterdir())[-1] / "model.safetensors")
    assert all(torch.equal(loaded.model.state_dict()[k], v) for k, v in saved.items())
    assert not loaded.model.training


def test_bad_input_is_one_line_exit_2_and_writes_nothing(run_dir, tmp_path, capsys):
    misfit = tmp_path / "misfit"
    shutil.copytree(run_dir, misfit)
    config = (misfit / "config.yaml").read_text()
    (misfit / "config.yaml").write_text(config.replace("depth: 3", "depth: 4"))
    not_a_run = tmp_path / "empty"
    not_a_run.mkdir()
    cases = [
        ([str(tmp_path / "missing")], "no such model folder, run directory or weights file"),
        ([str(not_a_run)], "not a run directory"),
        ([str(misfit)], "checkpoint of another architecture"),
        ([str(run_dir), "--data", "no-such-set"], "unknown dataset 'no-such-set'"),
        ([str(run_dir), "--examples", "0"], "max_examples must be a positive int"),
        ([str(run_dir / "checkpoints" / sorted(p.name for p in (run_dir / "checkpoints").iterdir())[-1]
              / "model.safetensors")], "needs config="),
    ]
    for args, message in cases:
        out = tmp_path / "out"
        capsys.readouterr()
        assert main(["analyze", *args, "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
        assert not out.exists() or not any(out.iterdir())


def test_nan_weights_unwritable_out_and_missing_gpu_are_refused_before_any_computation(run_dir, tmp_path, capsys,
                                                                                        monkeypatch):
    from safetensors.torch import load_file, save_file

    broken = tmp_path / "broken"
    shutil.copytree(run_dir, broken)
    weights_file = sorted((broken / "checkpoints").iterdir())[-1] / "model.safetensors"
    weights = load_file(weights_file)
    name = next(k for k in weights if k.endswith("mlp.fc1.weight"))
    weights[name][0, 0] = float("nan")
    save_file(weights, weights_file)
    out = tmp_path / "out"
    assert main(["analyze", str(broken), "--out", str(out), "--examples", "20", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert f"{name!r} holds 1 NaN or infinite value" in err and "\n" not in err
    assert not out.exists() or not any(out.iterdir())

    import layerscale.analysis.source as source

    def must_not_run(*args, **kwargs):
        raise AssertionError("the analysis ran before its --out or --device was checked")

    monkeypatch.setattr(source, "analyze_run", must_not_run)
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    cases = [([ "--out", "/proc/layerscale-analysis"], "--out cannot be written"),
             (["--out", str(a_file / "sub")], "is not a folder"),
             (["--out", str(a_file)], "exists and is not a folder")]
    if not torch.cuda.is_available():
        cases.append((["--out", str(out), "--device", "cuda"], "no CUDA GPU is available"))
    cases.append((["--out", str(out), "--device", "tpu9"], "is not a torch device"))
    for args, message in cases:
        assert main(["analyze", str(run_dir), *args, "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and "\n" not in err, err
    assert not out.exists() or not any(out.iterdir())
    assert not list(tmp_path.glob("**/.layerscale-write-check-*"))


def test_html_headings_name_the_exit_once(run_dir, tmp_path):
    result = analyze_run(run_dir, max_examples=30, batch_size=30, bootstrap=20, probe_splits=1)
    from layerscale.analysis.outputs.report import analysis_page

    page = result.write(tmp_path, html=analysis_page(result))["html"].read_text()
    assert "<h2>Early exit</h2>" in page and "(early exit)" not in page
    assert "<h2>Contiguous n-block removal</h2>" in page and "interval" in page
