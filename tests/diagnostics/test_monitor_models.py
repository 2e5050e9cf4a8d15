"""The monitor on every residual method of our blocks (ViT and CaiT, class attention included), on timm ViT / CaiT
and on Hugging Face DINOv2: ratios and scales equal a hand recomputation of the residual updates."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from layerscale import create_model, list_residuals
from layerscale.diagnostics import LayerScaleMonitor, find_blocks


def _norm(t: torch.Tensor) -> float:
    return t.double().pow(2).sum().sqrt().item()


def _first(value):
    return value[0] if isinstance(value, tuple) else value


def reference_update(block, i: int, stream: torch.Tensor, branch_input: torch.Tensor):
    """One branch of our block written out: s = γ · out_norm(F(norm(u))); x ← post_norm(α·x + s)."""
    fn = block.attn if i == 1 else block.mlp
    norm, out_norm = getattr(block, f"norm{i}"), getattr(block, f"out_norm{i}")
    ls, post = getattr(block, f"ls{i}"), getattr(block, f"post_norm{i}")
    s = fn(branch_input if norm is None else norm(branch_input))
    if out_norm is not None:
        s = out_norm(s)
    if ls is not None:
        s = s * ls.gamma
    skip = getattr(block, f"skip{i}", None)  # Admin's ω replaces the constant skip weight
    new = (stream * skip.omega if skip is not None else block.skip_weight * stream) + s
    return s, (new if post is None else post(new))


def _block_row(stream, s1, mid, s2, after):
    """(ratio_attn, ratio_mlp, stream RMS after the block) of one block: ``stream`` → ``mid`` → ``after``, with the
    branch updates ``s1`` and ``s2``."""
    return _norm(s1) / _norm(stream), _norm(s2) / _norm(mid), math.sqrt(after.double().pow(2).mean().item())


def reference_self_attention(blocks, h):
    """The rows of self-attention ``blocks`` run from stream ``h``, by hand, and the stream after the last."""
    out = []
    for block in blocks:
        s1, h1 = reference_update(block, 1, h, h)
        s2, h2 = reference_update(block, 2, h1, h1)
        out.append(_block_row(h, s1, h1, s2, h2))
        h = h2
    return out, h


def reference_vit(model, x):
    """[(ratio_attn, ratio_mlp, stream RMS after the block)] of our ViT, by hand."""
    h = model.patch_embed(x)
    h = torch.cat((model.cls_token.expand(h.shape[0], -1, -1), h + model.pos_embed), dim=1)
    return reference_self_attention(model.blocks, h)[0]


def reference_cait(model, x):
    out, h = reference_self_attention(model.blocks, model.patch_embed(x) + model.pos_embed)
    cls = model.cls_token.expand(x.shape[0], -1, -1)
    for block in model.blocks_token_only:  # only the class token is updated: it is the stream
        s1, c1 = reference_update(block, 1, cls, torch.cat((cls, h), dim=1))
        s2, c2 = reference_update(block, 2, c1, c1)
        out.append(_block_row(cls, s1, c1, s2, c2))
        cls = c2
    return out


def _record(model, *inputs, **kwargs):
    monitor = LayerScaleMonitor(model, every=1)
    monitor.begin_step(0)
    with torch.no_grad():
        model(*inputs, **kwargs)
    return monitor.end_step()


def _perturb_scales(model):
    """Give every scale distinct values, so that a wrong γ (or a missing one) changes the result."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("gamma", "gamma_1", "gamma_2", "lambda1")):
                p.copy_(torch.rand_like(p) * 0.5 + 0.05)


def _check(record, expected):
    assert len(record["blocks"]) == len(expected)
    for got, (r1, r2, rms) in zip(record["blocks"], expected):
        assert got["attn"]["ratio"] == pytest.approx(r1, rel=1e-4)
        assert got["mlp"]["ratio"] == pytest.approx(r2, rel=1e-4)
        assert got["stream_rms"] == pytest.approx(rms, rel=1e-4)


@pytest.mark.parametrize("residual", list_residuals())
def test_every_residual_method_on_vit(residual):
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=32, depth=2,
                         num_heads=2, residual=residual).eval()
    if model.residual_method.num_streams > 1:  # Hyper-Connections / mHC: no single stream to measure
        with pytest.raises(ValueError, match=f"the multi-stream residual '{residual}' is not supported"):
            LayerScaleMonitor(model, every=1)
        return
    _perturb_scales(model)
    x = torch.randn(3, 1, 8, 8)
    record = _record(model.train(), x)  # train mode: the monitor records training forwards (no dropout here)
    with torch.no_grad():
        _check(record, reference_vit(model, x))


def test_cait_class_attention_uses_the_class_token_stream():
    torch.manual_seed(0)
    model = create_model("cait", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=32, depth=2,
                         num_heads=2)
    _perturb_scales(model)
    x = torch.randn(3, 1, 8, 8)
    record = _record(model, x)
    assert [b["name"] for b in record["blocks"]] == ["blocks.0", "blocks.1", "blocks_token_only.0",
                                                     "blocks_token_only.1"]
    with torch.no_grad():
        _check(record, reference_cait(model, x))


def test_per_head_scale_statistics():
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=32, depth=2,
                         num_heads=4, residual="layerscale_head")
    _perturb_scales(model)
    record = _record(model, torch.randn(2, 1, 8, 8))
    for got, block in zip(record["blocks"], model.blocks):
        gamma = block.attn.head_scale.gamma.abs()
        assert got["attn"]["scale_kind"] == "head"
        assert got["attn"]["scale_per_head"] == pytest.approx(gamma.tolist(), rel=1e-6)
        assert got["attn"]["scale_mean"] == pytest.approx(gamma.mean().item(), rel=1e-6)
        assert got["attn"]["scale_max"] == pytest.approx(gamma.max().item(), rel=1e-6)
        assert got["mlp"]["scale_kind"] == "channel" and "scale_per_head" not in got["mlp"]


def test_timm_vit_with_layerscale():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, img_size=16, patch_size=8, embed_dim=32,
                              depth=2, num_heads=2, num_classes=3, init_values=1e-2)
    _perturb_scales(model)
    x = torch.randn(2, 3, 16, 16)
    record = _record(model, x)
    with torch.no_grad():
        h = model.norm_pre(model._pos_embed(model.patch_embed(x)))
        expected = []
        for block in model.blocks:
            s1 = block.ls1(block.attn(block.norm1(h)))
            s2 = block.ls2(block.mlp(block.norm2(h + s1)))
            expected.append((_norm(s1) / _norm(h), _norm(s2) / _norm(h + s1),
                             math.sqrt((h + s1 + s2).double().pow(2).mean().item())))
            h = h + s1 + s2
    _check(record, expected)
    for got, block in zip(record["blocks"], model.blocks):
        assert got["attn"]["scale_mean"] == pytest.approx(block.ls1.gamma.abs().mean().item(), rel=1e-6)
        assert got["mlp"]["scale_max"] == pytest.approx(block.ls2.gamma.abs().max().item(), rel=1e-6)


def test_timm_cait_gamma_parameters():
    timm = pytest.importorskip("timm")
    model = timm.create_model("cait_xxs24_224", pretrained=False, img_size=16, patch_size=8, embed_dim=32, depth=2,
                              num_heads=2, num_classes=3)
    _perturb_scales(model)
    x = torch.randn(2, 3, 16, 16)
    record = _record(model, x)
    names = [b["name"] for b in record["blocks"]]
    assert names == ["blocks.0", "blocks.1", "blocks_token_only.0", "blocks_token_only.1"]
    with torch.no_grad():
        h = model.patch_embed(x) + model.pos_embed
        block = model.blocks[0]
        s1 = block.gamma_1 * block.attn(block.norm1(h))
        cls = model.cls_token.expand(2, -1, -1)
        for b in model.blocks:
            h = b(h)
        ca = model.blocks_token_only[0]
        s_cls = ca.gamma_1 * ca.attn(ca.norm1(torch.cat((cls, h), dim=1)))
    assert record["blocks"][0]["attn"]["ratio"] == pytest.approx(_norm(s1) / _norm(model.patch_embed(x) +
                                                                               model.pos_embed), rel=1e-4)
    assert record["blocks"][2]["attn"]["ratio"] == pytest.approx(_norm(s_cls) / _norm(cls), rel=1e-4)
    assert record["blocks"][2]["mlp"]["scale_mean"] == pytest.approx(ca.gamma_2.abs().mean().item(), rel=1e-6)


def test_huggingface_dinov2_layer_scale():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                       intermediate_size=64, image_size=16, patch_size=8, layerscale_value=0.5)
    model = transformers.Dinov2Model(config).eval()
    _perturb_scales(model)
    x = torch.randn(2, 3, 16, 16)
    record = _record(model.train(), pixel_values=x)
    assert [b["name"] for b in record["blocks"]] == ["encoder.layer.0", "encoder.layer.1"]
    with torch.no_grad():
        h = model.embeddings(x)
        expected = []
        for layer in model.encoder.layer:
            s1 = layer.layer_scale1(_first(layer.attention(layer.norm1(h))))
            s2 = layer.layer_scale2(layer.mlp(layer.norm2(h + s1)))
            expected.append((_norm(s1) / _norm(h), _norm(s2) / _norm(h + s1),
                             math.sqrt((h + s1 + s2).double().pow(2).mean().item())))
            h = h + s1 + s2
    _check(record, expected)
    assert record["blocks"][1]["mlp"]["scale_mean"] == pytest.approx(
        model.encoder.layer[1].layer_scale2.lambda1.abs().mean().item(), rel=1e-6)


def test_a_model_without_blocks_is_a_clear_error():
    with pytest.raises(ValueError, match="found no transformer blocks in Sequential"):
        LayerScaleMonitor(nn.Sequential(nn.Linear(4, 4)))
    with pytest.raises(ValueError, match="expected a torch.nn.Module"):
        find_blocks("vit")



def test_the_monitor_reads_a_float64_model():
    """A float64 model (an analysis in double precision) is monitored as its float32 copy is, not refused by a
    float32 norm."""
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=3, depth=2, embed_dim=16,
                         num_heads=2, residual="layerscale")
    _perturb_scales(model)
    x = torch.randn(2, 1, 8, 8)
    single = _record(model, x)
    double = _record(model.double(), x.double())
    expected = [(b["attn"]["ratio"], b["mlp"]["ratio"], b["stream_rms"]) for b in single["blocks"]]
    _check(double, expected)


@pytest.mark.parametrize("width", [32, 64, 192, 768])
def test_the_scale_mean_is_never_above_its_maximum(width):
    """At initialisation every γ holds ε: a float32 mean of ``width`` copies of 0.1 is up to 1.5e-8 above 0.1."""
    from layerscale.diagnostics.statistics import scale_statistics

    mean, largest = scale_statistics(torch.full((width,), 0.1), None).tolist()
    assert mean == largest == torch.tensor(0.1).item()
