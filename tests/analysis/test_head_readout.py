"""The angular measures read each stream as the model's own head reads its last one: the same tokens, pooled the same
way. Checked against plain-torch pooling of hooked block outputs, written here from each model's own code (timm
``global_pool_nlc`` / ``VisionTransformer.pool``, ours ``TimmClassifierAPI._pool``, Hugging Face DINOv2's
``cat([x[:, 0], x[:, 1 + R:].mean(1)])``). The audit's case: timm ``global_pool="avg"`` skips the class and register
tokens (``num_prefix_tokens``) before averaging; the analysis used to average every token."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from layerscale.analysis import analyze_depth, compare_criteria, gromov_best_span, rank_blocks
from layerscale.models.registry import create_model

from analysis_helpers import block_streams

IMAGES = torch.randn(12, 1, 8, 8, generator=torch.Generator().manual_seed(0))
LABELS = torch.arange(12) % 5
SMALL = dict(pretrained=False, img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=3,
             num_heads=2)


def _turning(model: nn.Module) -> nn.Module:
    """Random weights large enough that every block turns every token (seeded)."""
    g = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=g))
    return model.eval()


def _distance(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((torch.arccos(F.cosine_similarity(a, b, dim=-1).clamp(-1, 1)) / math.pi).mean())


def _matrix(read: list[torch.Tensor]) -> list[list[float]]:
    return [[_distance(a, b) for b in read] for a in read]


TIMM_VIT = [  # timm VisionTransformer arguments, readout, timm's pooling (global_pool_nlc) in plain torch
    (dict(global_pool="avg"), "mean[1:]", lambda s: s[:, 1:].mean(1)),
    (dict(global_pool="avg", reg_tokens=4), "mean[5:]", lambda s: s[:, 5:].mean(1)),
    (dict(global_pool="avg", reg_tokens=4, no_embed_class=True), "mean[5:]", lambda s: s[:, 5:].mean(1)),
    (dict(global_pool="avg", class_token=False), "mean", lambda s: s.mean(1)),
    (dict(global_pool="avg", class_token=False, reg_tokens=2), "mean[2:]", lambda s: s[:, 2:].mean(1)),
    (dict(global_pool="avg", reg_tokens=2, pool_include_prefix=True), "mean", lambda s: s.mean(1)),
    (dict(global_pool="max", reg_tokens=2), "max[3:]", lambda s: s[:, 3:].amax(1)),
    (dict(global_pool="avgmax", reg_tokens=2), "avgmax[3:]",
     lambda s: 0.5 * (s[:, 3:].amax(1) + s[:, 3:].mean(1))),
    (dict(global_pool="token", reg_tokens=4), "cls", lambda s: s[:, 0]),
]


@pytest.mark.parametrize("kwargs, readout, pool", TIMM_VIT, ids=[r + str(sorted(k.items())) for k, r, _ in TIMM_VIT])
def test_timm_vit_angular_measures_read_what_timm_pools(kwargs, readout, pool):
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = _turning(timm.create_model("vit_small_patch16_224", **SMALL, **kwargs))
    streams = block_streams(model.blocks, lambda: model(IMAGES))
    for s in streams:  # the plain-torch pooling is timm's own
        assert torch.allclose(pool(s), model.pool(s), atol=1e-12)
    read = [pool(s) for s in streams]
    expected = [_distance(read[i], read[i + 1]) for i in range(3)]
    assert rank_blocks(model, (IMAGES, LABELS), "angular", batch_size=5) == pytest.approx(expected, abs=1e-7)
    pairs = [_distance(read[s], read[s + 2]) for s in range(2)]
    assert gromov_best_span(model, (IMAGES, LABELS), 2, batch_size=5) == (
        pairs.index(min(pairs)), pytest.approx(min(pairs), abs=1e-7))
    if readout not in ("mean", "cls"):  # the old all-token mean is measurably different here
        every = [s.mean(1) for s in streams]
        assert max(abs(_distance(every[i], every[i + 1]) - expected[i]) for i in range(3)) > 1e-3


def test_analyze_depth_and_compare_criteria_read_the_patch_mean_of_a_registered_avg_vit():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    model = _turning(timm.create_model("vit_small_patch16_224", **SMALL, global_pool="avg", reg_tokens=4))
    read = [s[:, model.num_prefix_tokens:].mean(1) for s in block_streams(model.blocks, lambda: model(IMAGES))]
    matrix = _matrix(read)
    result = analyze_depth(model, (IMAGES, LABELS), batch_size=5, bootstrap=10, probes=False)
    assert result.readout == "mean[5:]"
    assert result.angular_distance == pytest.approx([matrix[i][i + 1] for i in range(3)], abs=1e-7)
    assert result.head_distance == [pytest.approx(row, abs=1e-7) for row in matrix]
    for (first, last), distance in zip(result.removal_spans, result.removal_distance):
        assert distance == pytest.approx(matrix[first - 1][last], abs=1e-7)
    comparison = compare_criteria(model, (IMAGES, LABELS), "gromov,angular", 1, batch_size=5, bootstrap=10)
    assert comparison.readout == "mean[5:]"
    assert comparison.distance == [pytest.approx(row, abs=1e-7) for row in matrix]


def test_attention_pools_read_the_plain_mean_of_the_tokens_they_attend_to_named_as_a_proxy():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    for kwargs, readout, skip in ((dict(global_pool="map", reg_tokens=2), "attn_mean[3:]", 3),
                                  (dict(global_pool="map", class_token=False), "attn_mean", 0)):
        model = _turning(timm.create_model("vit_small_patch16_224", **SMALL, **kwargs))
        read = [s[:, skip:].mean(1) for s in block_streams(model.blocks, lambda: model(IMAGES))]
        result = analyze_depth(model, (IMAGES, LABELS), batch_size=6, bootstrap=10, probes=False)
        assert result.readout == readout
        assert result.angular_distance == pytest.approx([_distance(read[i], read[i + 1]) for i in range(3)],
                                                        abs=1e-7)


def _ours(family: str, global_pool: str) -> nn.Module:
    torch.manual_seed(0)
    return _turning(create_model(family, img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=3,
                                 num_heads=2, global_pool=global_pool))


OTHERS = [  # name, model builder, blocks, readout, what the head reads in plain torch
    ("ours vit avg", lambda: _ours("vit", "avg"), "blocks", "mean[1:]", lambda s: s[:, 1:].mean(1)),
    ("ours vit token", lambda: _ours("vit", "token"), "blocks", "cls", lambda s: s[:, 0]),
    ("ours cait avg", lambda: _ours("cait", "avg"), "blocks", "mean", lambda s: s.mean(1)),
    ("ours cait token", lambda: _ours("cait", "token"), "blocks", "attn_mean", lambda s: s.mean(1)),
]


@pytest.mark.parametrize("name, build, blocks, readout, read", OTHERS, ids=[c[0] for c in OTHERS])
def test_our_models_read_what_their_head_pools(name, build, blocks, readout, read):
    model = build()
    streams = [read(s) for s in block_streams(getattr(model, blocks), lambda: model(IMAGES))]
    result = analyze_depth(model, (IMAGES, LABELS), batch_size=5, bootstrap=10, probes=False)
    assert result.readout == readout
    assert result.angular_distance == pytest.approx([_distance(streams[i], streams[i + 1]) for i in range(3)],
                                                    abs=1e-7)


def test_timm_cait_distilled_deit_eva_and_beit_read_what_their_head_reads():
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    cases = [
        ("cait_xxs24_224", dict(depth_token_only=1, init_values=0.5, global_pool="avg"), "mean", lambda s: s.mean(1)),
        ("cait_xxs24_224", dict(depth_token_only=1, init_values=0.5), "attn_mean", lambda s: s.mean(1)),
        ("deit_tiny_distilled_patch16_224", {}, "cls+dist", lambda s: torch.cat([s[:, 0], s[:, 1]], -1)),
        ("eva02_tiny_patch14_224", dict(init_values=0.5, global_pool="avg"), "mean[1:]", lambda s: s[:, 1:].mean(1)),
        ("beit_base_patch16_224", dict(init_values=0.5), "mean[1:]", lambda s: s[:, 1:].mean(1)),
    ]
    for name, extra, readout, read in cases:
        model = _turning(timm.create_model(name, **SMALL, **extra))
        streams = [read(s) for s in block_streams(model.blocks, lambda: model(IMAGES))]
        expected = [_distance(streams[i], streams[i + 1]) for i in range(3)]
        assert rank_blocks(model, (IMAGES, LABELS), "angular", batch_size=5) == pytest.approx(expected, abs=1e-7), name


def test_hugging_face_dinov2_reads_the_class_token_beside_the_patch_mean():
    transformers = pytest.importorskip("transformers")
    small = dict(hidden_size=16, num_hidden_layers=3, num_attention_heads=2, image_size=8, patch_size=4,
                 num_channels=1, num_labels=5, layerscale_value=0.5)
    torch.manual_seed(0)
    cases = [
        (transformers.Dinov2ForImageClassification(transformers.Dinov2Config(**small)), "cls+mean[1:]", 1),
        (transformers.Dinov2WithRegistersForImageClassification(transformers.Dinov2WithRegistersConfig(
            **small, num_register_tokens=2)), "cls+mean[3:]", 3),
        (transformers.ViTForImageClassification(transformers.ViTConfig(
            **{k: v for k, v in small.items() if k != "layerscale_value"}, intermediate_size=32)), "cls", None),
    ]
    for model, readout, skip in cases:
        model = _turning(model)
        backbone = getattr(model, model.base_model_prefix)
        layers = getattr(backbone, "layers", None) or backbone.encoder.layer
        streams = block_streams(layers, lambda: model(pixel_values=IMAGES))
        # the head's own input, cat([x[:, 0], x[:, 1 + R:].mean(1)]) (modeling_dinov2*.py), of the stream
        read = [s[:, 0] if skip is None else torch.cat([s[:, 0], s[:, skip:].mean(1)], -1) for s in streams]
        result = analyze_depth(model, (IMAGES, LABELS), batch_size=6, bootstrap=10, probes=False)
        assert result.readout == readout
        assert result.angular_distance == pytest.approx([_distance(read[i], read[i + 1]) for i in range(3)],
                                                        abs=1e-7), readout


class _Wrapped(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.inner, self.blocks = inner, inner.blocks

    def forward(self, x):
        return self.inner(x)


def test_a_head_this_library_does_not_know_is_refused_unless_its_readout_is_stated():
    model = _ours("vit", "avg")
    wrapped = _Wrapped(model)
    with pytest.raises(ValueError, match=r"_Wrapped: cannot tell which tokens its head reads .*layerscale_readout"):
        rank_blocks(wrapped, (IMAGES, LABELS), "angular")
    for by in ("block_influence", "ablation"):  # these read no head token: measured without a readout
        assert rank_blocks(wrapped, (IMAGES, LABELS), by) == rank_blocks(model, (IMAGES, LABELS), by)
    wrapped.layerscale_readout = "mean[1:]"
    assert rank_blocks(wrapped, (IMAGES, LABELS), "angular") == rank_blocks(model, (IMAGES, LABELS), "angular")
    for bad in ("avg", "mean[1]", "cls+", 3):
        wrapped.layerscale_readout = bad
        with pytest.raises(ValueError, match=r"_Wrapped.layerscale_readout: readout .* expected parts") as info:
            rank_blocks(wrapped, (IMAGES, LABELS), "angular")
        assert "\n" not in str(info.value)
    wrapped.layerscale_readout = "mean[40:]"
    with pytest.raises(ValueError, match=r"the stream has 5 token\(s\), none from 40 on"):
        rank_blocks(wrapped, (IMAGES, LABELS), "angular")


def test_a_subclass_that_overrides_timm_pooling_is_not_taken_for_timm():
    pytest.importorskip("timm")
    from timm.models.vision_transformer import VisionTransformer

    class Pooled(VisionTransformer):
        def pool(self, x, pool_type=None):
            return x[:, -1]

    model = Pooled(**{k: v for k, v in SMALL.items() if k != "pretrained"}, global_pool="avg").eval()
    with pytest.raises(ValueError, match="Pooled: cannot tell which tokens its head reads"):
        rank_blocks(model, (IMAGES, LABELS), "angular")
