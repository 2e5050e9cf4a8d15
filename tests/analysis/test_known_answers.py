"""Depth analysis on constructed cases whose answers are known exactly."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from layerscale.analysis import analyze_depth, angular_distance, cka_matrix, linear_cka, relative_update_norm
from layerscale.analysis.measures.probes import probe_split, ridge_probe_accuracy
from layerscale.models.registry import create_model


def _vit(depth=4, residual="layerscale", **kw):
    torch.manual_seed(0)
    return create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=depth,
                        num_heads=2, residual=residual, **kw).eval()


def _images(n=40, seed=1):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 5, (n,), generator=g)


def _set_gammas(model, value, only=None):
    with torch.no_grad():
        for i, block in enumerate(model.blocks):
            for ls in (block.ls1, block.ls2):
                ls.gamma.fill_(value if only is None or i == only else 0.0)


def test_zeroed_layerscale_blocks_are_exact_identities():
    model = _vit(depth=4)
    _set_gammas(model, 0.0)
    x, y = _images()
    result = analyze_depth(model, (x, y), batch_size=16)
    assert result.ablation_delta_loss == [0.0] * 4
    assert result.ablation_delta_accuracy == [0.0] * 4
    assert result.angular_distance == [0.0] * 4
    assert result.relative_update == [0.0] * 4
    assert result.early_exit_loss == [result.clean_loss] * 5
    assert result.summary.effective_depth == 0
    assert result.summary.near_identity_fraction == 1.0
    assert result.cka_representation == "block_out/mean"
    assert torch.allclose(torch.tensor(result.cka, dtype=torch.float64), torch.ones(4, 4, dtype=torch.float64))


@pytest.mark.parametrize("working", [0, 2])
def test_only_block_k_working_gives_effective_depth_one_at_k(working):
    model = _vit(depth=4)
    _set_gammas(model, 1.0, only=working)
    with torch.no_grad():
        model.head.weight.mul_(20.0)  # confident predictions: any change of the stream costs loss
    x, _ = _images(48)
    with torch.no_grad():
        labels = model(x).argmax(-1)  # the model is right by construction; ablating its working block is not
    result = analyze_depth(model, (x, labels), batch_size=16)
    # one contiguous span: with block 1 working, blocks 2-4 go (1 left); with block 3, blocks 1-2 (block 4 stays)
    assert result.summary.effective_depth == (1 if working == 0 else 2)
    assert result.summary.removed_span == ([2, 4] if working == 0 else [1, 2])
    assert result.summary.effective_depth_interval == [result.summary.effective_depth] * 2  # exact identities
    assert result.summary.needed_alone_blocks == [working + 1]
    assert result.ablation_delta_loss[working] > 0.01
    others = [d for i, d in enumerate(result.ablation_delta_loss) if i != working]
    assert others == [0.0] * 3
    assert result.angular_distance[working] > 0.02
    assert result.summary.near_identity_blocks == [i + 1 for i in range(4) if i != working]


def _naive_loss(model, x, y, replace):
    """Loss of a copy of ``model`` whose blocks in ``replace`` are ``nn.Identity`` (the whole model runs)."""
    variant = copy.deepcopy(model)
    for i in replace:
        variant.blocks[i] = nn.Identity()
    with torch.no_grad():
        logits = variant(x)
    return F.cross_entropy(logits, y).item(), (logits.argmax(-1) == y).double().mean().item()


@pytest.mark.parametrize("residual", ["layerscale", "postnorm"])
def test_cached_suffix_ablation_equals_naive_full_model_ablation(residual):
    model = _vit(depth=4, residual=residual, **({"init_value": 0.5} if residual == "layerscale" else {}))
    x, y = _images(40)
    result = analyze_depth(model, (x, y), batch_size=40, probes=False)
    for i in range(4):
        loss, accuracy = _naive_loss(model, x, y, [i])
        assert result.ablation_loss[i] == pytest.approx(loss, abs=1e-5)
        assert result.ablation_accuracy[i] == pytest.approx(accuracy, abs=1e-12)
    for keep in range(5):
        loss, _ = _naive_loss(model, x, y, range(keep, 4))
        assert result.early_exit_loss[keep] == pytest.approx(loss, abs=1e-5)
    # several batches sum to the same means as one
    batched = analyze_depth(model, (x, y), batch_size=7, probes=False)
    assert batched.ablation_loss == pytest.approx(result.ablation_loss, abs=1e-5)
    assert batched.angular_distance == pytest.approx(result.angular_distance, abs=1e-9)


def test_angular_distance_and_relative_update_known_values():
    a = torch.tensor([[[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [2.0, 2.0]]])
    b = torch.tensor([[[0.0, 3.0], [-1.0, 0.0], [5.0, 0.0], [1.0, 1.0]]])
    assert angular_distance(a, b)[0].tolist() == pytest.approx([0.5, 1.0, 0.0, 0.0], abs=1e-12)
    assert angular_distance(a, a).max().item() == 0.0
    assert relative_update_norm(a, a).item() == 0.0
    assert relative_update_norm(a, 2 * a).item() == pytest.approx(1.0)
    zero = torch.zeros(1, 1, 2)
    assert angular_distance(zero, zero).item() == 0.0
    assert angular_distance(zero, a[:, :1]).item() == 0.5


def test_linear_cka_self_is_one_and_invariant_to_orthogonal_transforms_and_scale():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(50, 8, generator=g, dtype=torch.float64)
    y = torch.randn(50, 6, generator=g, dtype=torch.float64) + 0.3 * x[:, :6]
    q, _ = torch.linalg.qr(torch.randn(8, 8, generator=g, dtype=torch.float64))
    assert linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(x, x @ q) == pytest.approx(1.0, abs=1e-12)
    assert linear_cka(x @ q * 3.0, y) == pytest.approx(linear_cka(x, y), abs=1e-12)
    assert 0.0 < linear_cka(x, y) < 1.0
    # not invariant to an arbitrary invertible map (the definition's contract, not a defect)
    skew = torch.eye(8, dtype=torch.float64) + torch.triu(torch.ones(8, 8, dtype=torch.float64), 1) * 2
    assert linear_cka(x, x @ skew) < 0.99
    stacked = torch.stack([x[:, :6], y, (x @ q)[:, :6]], dim=1)
    matrix = cka_matrix(stacked, chunk_elements=40)  # forces one layer per chunk
    for i in range(3):
        for j in range(3):
            assert matrix[i, j].item() == pytest.approx(linear_cka(stacked[:, i], stacked[:, j]), abs=1e-12)


def test_probe_on_a_linearly_separable_set_scores_one():
    g = torch.Generator().manual_seed(0)
    labels = torch.arange(200) % 4
    centres = torch.randn(4, 10, generator=g) * 6.0
    features = centres[labels] + 0.3 * torch.randn(200, 10, generator=g)
    noise = torch.randn(200, 10, generator=g)  # a representation that carries no label information
    train, test = probe_split(200, 0.5, seed=0)
    accuracy = ridge_probe_accuracy(torch.stack([features, noise]), labels, train, test, 4)
    assert accuracy[0].item() == 1.0
    assert accuracy[1].item() < 0.5
    again = ridge_probe_accuracy(torch.stack([features, noise]), labels, *probe_split(200, 0.5, seed=0), 4)
    assert torch.equal(accuracy, again)


def test_probe_accuracy_one_through_the_analysis_when_the_input_encodes_the_label():
    model = _vit(depth=2)
    _set_gammas(model, 0.0)  # identity blocks: every block output is the embedding of the input
    labels = torch.arange(60) % 5
    images = torch.zeros(60, 1, 8, 8)
    images[torch.arange(60), 0, labels // 4, labels % 4] = 10.0  # the label decides which pixel of patch 0 is lit
    result = analyze_depth(model, (images, labels), batch_size=30)
    assert result.probe_accuracy["block_out/mean"] == [1.0, 1.0]
    assert set(result.probe_accuracy) == {f"{p}/{pool}" for p in ("block_out", "attn_out", "mlp_out", "norm2_in")
                                          for pool in ("cls", "mean")}
    assert result.summary.probe_saturation_depth == 1
    assert torch.allclose(torch.tensor(result.cka, dtype=torch.float64), torch.ones(2, 2, dtype=torch.float64))
    assert not math.isnan(result.clean_loss)
