"""The diagnostics of a grown model mark the blocks ``layerscale grow`` inserted ("new": true in every record), the
report shows those blocks' γ growing from 0 beside the source blocks' and marks them on the heatmap; a model that
was not grown has no mark and no such section."""

from __future__ import annotations

import pytest
import torch
from diagnostics_helpers import diagnostics_by_step, tiny_config

from layerscale import create_model, grow
from layerscale.diagnostics import LayerScaleMonitor
from layerscale.diagnostics.grown_plots import figure_new_block_scales, plot_new_block_scales
from layerscale.diagnostics.report import write_report
from layerscale.diagnostics.run_data import read_run
from layerscale.surgery.model_files import write_model_folder
from layerscale.surgery.growth.new_blocks import new_block_modules
from layerscale.train import run

MODEL = dict(img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=32, num_heads=2)


def _vit(depth: int = 2):
    torch.manual_seed(0)
    return create_model("vit", depth=depth, init_value=0.1, **MODEL)


@pytest.fixture(scope="module")
def grown_run(tmp_path_factory):
    """A depth-2 ViT grown to 4 (new blocks 1 and 3, 0-based), trained 4 steps from the grown folder."""
    tmp = tmp_path_factory.mktemp("grown")
    write_model_folder(grow(_vit(), 2, where="every:1"), "layerscale", tmp / "grown", surgery={"operation": "grow"})
    config = tiny_config(tmp / "run", depth=4, steps=4, init_from=str(tmp / "grown"))
    config["diagnostics"] = {"enabled": True, "every": 2}
    run(config)
    return tmp / "run"


def test_every_record_of_a_grown_run_marks_exactly_the_new_blocks(grown_run):
    records = diagnostics_by_step(grown_run)
    assert sorted(records) == [1, 2, 4]
    for record in records.values():
        assert [b.get("new", False) for b in record["blocks"]] == [False, True, False, True]
    assert read_run(grown_run).new_blocks == [2, 4]
    first = records[1]["blocks"]
    assert [first[i][b]["scale_mean"] for i in (1, 3) for b in ("attn", "mlp")] == [0.0] * 4
    assert all(records[4]["blocks"][i]["attn"]["scale_mean"] > 0 for i in (1, 3))  # γ has grown from 0


@pytest.fixture(scope="module")
def plain_run(tmp_path_factory):
    """A depth-2 ViT that was not grown, trained 2 steps."""
    out = tmp_path_factory.mktemp("plain") / "run"
    config = tiny_config(out, depth=2, steps=2)
    config["diagnostics"] = {"enabled": True, "every": 1}
    run(config)
    return out


def test_a_run_of_a_model_that_was_not_grown_marks_nothing(plain_run, tmp_path):
    records = diagnostics_by_step(plain_run)
    assert records and all("new" not in b for r in records.values() for b in r["blocks"])
    assert read_run(plain_run).new_blocks == []
    assert figure_new_block_scales([read_run(plain_run)]) is None
    pytest.importorskip("matplotlib")
    report = write_report([plain_run], tmp_path / "report.html")
    assert "new_block_scales" not in report.figure_paths and "scale_heatmap" in report.figure_paths


def test_the_report_shows_the_new_blocks_gamma_and_marks_them_on_the_heatmap(grown_run, tmp_path):
    pytest.importorskip("matplotlib")
    data = read_run(grown_run)
    fig = plot_new_block_scales(data, "attn")
    ax = fig.axes[0]
    new_mean = next(line for line in ax.get_lines() if line.get_label() == "new blocks: mean")
    steps, means = new_mean.get_data()
    assert list(steps) == [1.0, 2.0, 4.0] and means[0] == 0.0 and means[-1] > 0.0
    source = next(line for line in ax.get_lines() if line.get_label().startswith("source blocks"))
    assert source.get_data()[1][0] == pytest.approx(0.1)  # the source blocks keep their trained γ (here ε)
    report = write_report([grown_run], tmp_path / "report.html")
    assert "new_block_scales" in report.figure_paths
    assert "New blocks of a grown model" in report.html_path.read_text()
    from layerscale.diagnostics.plots import plot_scale_heatmap

    heat = plot_scale_heatmap(data, "attn")[0].axes[0]
    marks = [line for line in heat.get_lines() if line.get_marker() == ">"]
    assert len(marks) == 1 and list(marks[0].get_ydata()) == [2, 4]


def test_the_monitor_refuses_new_blocks_that_are_not_the_models():
    model, other = _vit(), _vit()
    with pytest.raises(ValueError, match="1 of the 1 new blocks given are not among the model's 2 monitored"):
        LayerScaleMonitor(model, new_blocks=[other.blocks[0]])


def test_new_block_modules_follow_the_record_of_grow():
    grown = grow(_vit(), 2, where="every:1")
    assert new_block_modules(grown) == [grown.blocks[1], grown.blocks[3]]
    assert new_block_modules(_vit()) == []
    monitor = LayerScaleMonitor(grown, every=1, new_blocks=new_block_modules(grown))
    monitor.begin_step(1)
    grown(torch.randn(2, 1, 8, 8))
    monitor.end_step()
    record = next(r for r in monitor.records if r["split"] == "diagnostics")
    assert [b.get("new", False) for b in record["blocks"]] == [False, True, False, True]


def test_a_grown_hugging_face_model_marks_its_new_blocks():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=64, n_positions=32)
    grown = grow(transformers.GPT2LMHeadModel(config), 1, where="top")
    blocks = new_block_modules(grown)
    assert blocks == [grown.transformer.h[2]]
    monitor = LayerScaleMonitor(grown, every=1, new_blocks=blocks, training_only=False)
    monitor.begin_step(1)
    grown(torch.randint(0, 64, (2, 8)))
    monitor.end_step()
    record = next(r for r in monitor.records if r["split"] == "diagnostics")
    assert [b.get("new", False) for b in record["blocks"]] == [False, False, True]
