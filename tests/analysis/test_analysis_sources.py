"""Evaluation sets chosen for a run (text for a language model, another image dataset), and the study's figure."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from layerscale.analysis import analyze_depth
from layerscale.analysis.source import RunModel, load_eval_data
from layerscale.models.registry import create_model
from layerscale.train.config.schema import TrainConfig


def _run(config: dict, **model_args) -> RunModel:
    torch.manual_seed(0)
    cfg = TrainConfig.from_dict(config)
    model = create_model(cfg.model.name, **model_args)
    return RunModel(model.eval(), cfg, Path("unused"), model_args)


def test_language_model_evaluates_on_the_held_out_end_of_a_text(tmp_path):
    text = tmp_path / "corpus.txt"
    text.write_bytes(bytes(range(32, 96)) * 20)
    run = _run({"model": {"name": "gpt", "embed_dim": 16, "depth": 2, "num_heads": 2, "block_size": 16},
                "data": {"name": "text", "path": str(text), "block_size": 8, "val_fraction": 0.25}},
               vocab_size=256, embed_dim=16, depth=2, num_heads=2, block_size=16)
    evalset = load_eval_data(run, data_path=text)
    assert len(evalset[0][0]) == 8  # the run's data.block_size, not the model's
    result = analyze_depth(run.model, evalset, batch_size=16)
    assert result.task == "language_model" and result.num_examples == len(evalset)
    with pytest.raises(ValueError, match="is a language model"):
        load_eval_data(run, data="digits")


def test_an_image_set_with_other_classes_is_refused_before_analysis():
    pytest.importorskip("sklearn")
    run = _run({"model": {"name": "vit", "embed_dim": 16, "depth": 2, "num_heads": 2, "patch_size": 4},
                "data": {"name": "digits"}},
               img_size=8, in_chans=1, num_classes=5, embed_dim=16, depth=2, num_heads=2, patch_size=4)
    with pytest.raises(ValueError, match="has 10 classes but the model has num_classes=5"):
        load_eval_data(run, data="digits")
    with pytest.raises(ValueError, match="image classifier"):
        load_eval_data(run, data="text")


def test_effective_depth_against_nominal_depth_figure():
    pytest.importorskip("matplotlib")
    from layerscale.analysis.outputs.report import figure_effective_depth

    images, labels = torch.randn(10, 1, 8, 8), torch.arange(10) % 5
    results = []
    for residual in ("prenorm", "layerscale"):
        for depth in (1, 3):
            torch.manual_seed(0)
            model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16,
                                 depth=depth, num_heads=2, residual=residual)
            results.append(analyze_depth(model, (images, labels), batch_size=10, probes=False))
    fig = figure_effective_depth(results)
    bars = {container.get_label(): container for container in fig.axes[0].containers}
    for residual in ("prenorm", "layerscale"):
        expected = [r.summary.effective_depth for r in results if r.residual == residual]
        assert list(bars[residual].lines[0].get_xdata()) == [1, 3]
        assert list(bars[residual].lines[0].get_ydata()) == expected
        segments = bars[residual].lines[2][0].get_segments()  # the error bars: from the interval's low to high
        intervals = [r.summary.effective_depth_interval for r in results if r.residual == residual]
        assert [[s[0][1], s[1][1]] for s in segments] == intervals
    assert "effective = nominal" in {line.get_label() for line in fig.axes[0].get_lines()}


def test_an_eval_set_is_accepted_again_and_cut_to_its_first_examples():
    from layerscale.analysis.eval_data.evaluation import as_eval_set

    inputs, targets = torch.randn(10, 3), torch.arange(10)
    once = as_eval_set((inputs, targets))
    again = as_eval_set(once, 4)
    assert torch.equal(again.inputs, inputs[:4]) and torch.equal(again.targets, targets[:4])
    assert torch.equal(as_eval_set(once).inputs, inputs)
