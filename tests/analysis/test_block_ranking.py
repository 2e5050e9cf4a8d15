"""Block rankings (Gromov angular distance, ShortGPT Block Influence, ablation) and Gromov's best span against
brute force: plain forward passes with hooks, and models with blocks really removed."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from layerscale.analysis.pruning.block_ranking import best_span, gromov_best_span, rank_blocks
from layerscale.models.registry import create_model

from analysis_helpers import block_streams, hooked_streams

IMAGES = torch.randn(20, 1, 8, 8, generator=torch.Generator().manual_seed(0))
LABELS = torch.arange(20) % 5
TOKENS = torch.randint(0, 32, (8, 9), generator=torch.Generator().manual_seed(1))


def _working(model: nn.Module) -> nn.Module:
    """Random weights with LayerScale gammas of order one, so that every block turns the stream."""
    g = torch.Generator().manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.2 + torch.rand(p.shape, generator=g))
    return model.eval()


def _vit(depth=5):
    torch.manual_seed(0)
    return _working(create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16,
                                 depth=depth, num_heads=2))


def _cait(depth=4):
    torch.manual_seed(0)
    model = _working(create_model("cait", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16,
                                  depth=depth, num_heads=2))
    with torch.no_grad():
        model.head.weight.mul_(50.0)  # a small initial head: confident logits make the loss feel every block
    return model


def _gpt(depth=4):
    torch.manual_seed(0)
    return _working(create_model("gpt", vocab_size=32, block_size=16, embed_dim=16, depth=depth, num_heads=2))


def _arccos_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return torch.arccos(F.cosine_similarity(a, b, dim=-1).clamp(-1, 1)) / math.pi


CASES = {  # model, data, inputs, token the head reads
    "vit": (_vit, (IMAGES, LABELS), IMAGES, lambda s: s[:, 0]),
    "cait": (_cait, (IMAGES, LABELS), IMAGES, lambda s: s.mean(dim=1)),
    "gpt": (_gpt, TOKENS, TOKENS[:, :-1], lambda s: s[:, -1]),
}


@pytest.mark.parametrize("family", sorted(CASES))
def test_angular_ranking_is_gromov_distance_on_the_token_the_head_reads(family):
    build, data, inputs, token = CASES[family]
    model = build()
    streams = hooked_streams(model, inputs)
    expected = [float(_arccos_distance(token(streams[i]), token(streams[i + 1])).mean())
                for i in range(len(streams) - 1)]
    got = rank_blocks(model, data, "angular", batch_size=7)
    assert got == pytest.approx(expected, abs=1e-9)
    assert min(expected) > 1e-3  # the blocks do turn the stream: the comparison is not of zeros


@pytest.mark.parametrize("family", sorted(CASES))
def test_block_influence_is_one_minus_mean_cosine_over_every_token(family):
    build, data, inputs, _ = CASES[family]
    model = build()
    streams = hooked_streams(model, inputs)
    expected = [float((1 - F.cosine_similarity(streams[i], streams[i + 1], dim=-1)).mean())
                for i in range(len(streams) - 1)]
    assert rank_blocks(model, data, "block_influence", batch_size=7) == pytest.approx(expected, abs=1e-12)


def _loss(model: nn.Module, family: str) -> float:
    with torch.no_grad():
        if family == "gpt":
            logits = model(TOKENS[:, :-1])
            return float(F.cross_entropy(logits.transpose(1, 2), TOKENS[:, 1:]))
        return float(F.cross_entropy(model(IMAGES), LABELS))


class _Identity(nn.Module):
    def forward(self, x, *args, **kwargs):
        return x


@pytest.mark.parametrize("family", sorted(CASES))
def test_ablation_ranking_is_the_loss_change_of_the_model_without_the_block(family):
    build, data, _, _ = CASES[family]
    model = build()
    clean = _loss(model, family)
    expected = []
    for i in range(len(model.blocks)):
        pruned = copy.deepcopy(model)
        pruned.blocks[i] = _Identity()
        expected.append(_loss(pruned, family) - clean)
    got = rank_blocks(model, data, "ablation", batch_size=7)
    assert got == pytest.approx(expected, abs=1e-5)
    assert max(abs(e) for e in expected) > 1e-4  # 10x the tolerance (gpt: 0.9e-3 on torch 2.11)


@pytest.mark.parametrize("family", ["vit", "gpt"])
def test_gromov_best_span_is_the_brute_force_argmin_over_every_span(family):
    build, data, inputs, token = CASES[family]
    model = build()
    streams = [token(s) for s in hooked_streams(model, inputs)]
    depth = len(streams) - 1
    for n in range(1, depth + 1):
        candidates = [float(_arccos_distance(streams[s], streams[s + n]).mean()) for s in range(depth - n + 1)]
        start, distance = gromov_best_span(model, data, n, batch_size=7)
        assert start == min(range(len(candidates)), key=candidates.__getitem__)
        assert distance == pytest.approx(candidates[start], abs=1e-9)


def test_best_span_reads_the_distance_matrix_and_takes_the_first_minimum():
    d = torch.tensor([[0.0, 0.3, 0.2, 0.5],
                      [0.3, 0.0, 0.1, 0.2],
                      [0.2, 0.1, 0.0, 0.1],
                      [0.5, 0.2, 0.1, 0.0]], dtype=torch.float64)
    assert best_span(d, 1) == (1, 0.1)  # spans (0,1) 0.3, (1,2) 0.1, (2,3) 0.1: the first
    assert best_span(d, 2) == (0, pytest.approx(0.2))  # (0,2) 0.2 and (1,3) 0.2: the first
    assert best_span(d, 3) == (0, 0.5)
    for bad in (0, 4, 1.5, True):
        with pytest.raises(ValueError, match="span length n"):
            best_span(d, bad)


def test_bad_inputs_are_refused_in_one_line():
    model = _vit(depth=2)
    with pytest.raises(ValueError, match="by must be one of") as info:
        rank_blocks(model, (IMAGES, LABELS), "gamma")
    assert "\n" not in str(info.value)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU"):
            rank_blocks(model, (IMAGES, LABELS), "angular", device="cuda")
    broken = copy.deepcopy(model)
    with torch.no_grad():
        broken.blocks[1].mlp.fc1.weight.fill_(float("nan"))
    with pytest.raises(ValueError, match="not finite"):
        rank_blocks(broken, (IMAGES, LABELS), "block_influence")


def test_rankings_of_timm_and_hugging_face_models_read_the_token_their_head_reads():
    timm = pytest.importorskip("timm")
    transformers = pytest.importorskip("transformers")
    small = dict(img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=3, num_heads=2)
    torch.manual_seed(0)
    cases = [
        (timm.create_model("deit3_small_patch16_224", pretrained=False, init_values=0.5, **small).eval(),
         (IMAGES, LABELS), IMAGES, lambda s: s[:, 0]),
        (timm.create_model("vit_tiny_patch16_224", pretrained=False, global_pool="avg", **small).eval(),
         (IMAGES, LABELS), IMAGES, lambda s: s[:, 1:].mean(dim=1)),  # timm's avg skips the class token
        (timm.create_model("cait_xxs24_224", pretrained=False, depth_token_only=1, init_values=0.5, **small).eval(),
         (IMAGES, LABELS), IMAGES, lambda s: s.mean(dim=1)),
        (transformers.GPT2LMHeadModel(transformers.GPT2Config(n_embd=16, n_layer=3, n_head=2, vocab_size=32,
                                                              n_positions=16)).eval(),
         TOKENS, TOKENS[:, :-1], lambda s: s[:, -1]),
        (transformers.LlamaForCausalLM(transformers.LlamaConfig(
            hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
            vocab_size=32, max_position_embeddings=16)).eval(), TOKENS, TOKENS[:, :-1], lambda s: s[:, -1]),
    ]
    for model, data, inputs, token in cases:
        blocks = model.blocks if hasattr(model, "blocks") else (
            model.transformer.h if hasattr(model, "transformer") else model.model.layers)
        streams = [token(s) for s in block_streams(blocks, lambda: model(inputs))]
        expected = [float(_arccos_distance(streams[i], streams[i + 1]).mean()) for i in range(3)]
        assert rank_blocks(model, data, "angular", batch_size=5) == pytest.approx(expected, abs=1e-7), model
        start, distance = gromov_best_span(model, data, 2, batch_size=5)
        pairs = [float(_arccos_distance(streams[s], streams[s + 2]).mean()) for s in range(2)]
        assert (start, distance) == (pairs.index(min(pairs)), pytest.approx(min(pairs), abs=1e-7))
