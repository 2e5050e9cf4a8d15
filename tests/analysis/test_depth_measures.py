"""The n-block removal curve, the effective depth D_δ and debiased CKA against brute force; intervals everywhere."""

from __future__ import annotations

import copy
import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from layerscale.analysis import analyze_depth, cka_matrix, debiased_cka_matrix
from layerscale.analysis.summary import exit_depth, removal_depth, saturation_depth
from layerscale.models.registry import create_model

IMAGES = torch.randn(24, 1, 8, 8, generator=torch.Generator().manual_seed(0))


def _vit(depth=5, seed=0):
    torch.manual_seed(seed)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=depth,
                         num_heads=2).eval()
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.05 + 0.5 * torch.rand(p.shape, generator=g))
        model.head.weight.mul_(10.0)
    return model


def _labels(model):
    with torch.no_grad():
        return model(IMAGES).argmax(-1)


def _loss_without(model, start, n, labels):
    pruned = copy.deepcopy(model)
    for i in range(start, start + n):
        pruned.blocks[i] = nn.Identity()
    with torch.no_grad():
        return F.cross_entropy(pruned(IMAGES), labels).item()


def _brute_force_angular(model, start, n):
    seen = []
    hooks = [model.blocks[0].register_forward_pre_hook(lambda m, a: seen.append(a[0][:, 0].double()))]
    hooks += [b.register_forward_hook(lambda m, a, out: seen.append(out[:, 0].double())) for b in model.blocks]
    with torch.no_grad():
        model(IMAGES)
    for h in hooks:
        h.remove()
    return float((torch.arccos(F.cosine_similarity(seen[start], seen[start + n], dim=-1).clamp(-1, 1))
                  / math.pi).mean())


def test_removal_curve_with_gromov_spans_matches_models_with_those_blocks_removed():
    model = _vit()
    labels = _labels(model)
    result = analyze_depth(model, (IMAGES, labels), batch_size=10, probes=False, bootstrap=50)
    depth = len(model.blocks)
    with torch.no_grad():
        clean = F.cross_entropy(model(IMAGES), labels).item()
    for n in range(1, depth + 1):
        distances = [_brute_force_angular(model, s, n) for s in range(depth - n + 1)]
        start = min(range(len(distances)), key=distances.__getitem__)
        assert result.removal_spans[n - 1] == [start + 1, start + n]
        assert result.removal_distance[n - 1] == pytest.approx(distances[start], abs=1e-9)
        assert result.removal_delta_loss[n - 1] == pytest.approx(_loss_without(model, start, n, labels) - clean,
                                                                 abs=1e-5)


def test_exhaustive_removal_curve_is_the_best_span_of_each_length():
    model = _vit(depth=4, seed=2)
    labels = _labels(model)
    result = analyze_depth(model, (IMAGES, labels), batch_size=10, probes=False, spans="exhaustive", bootstrap=50)
    with torch.no_grad():
        clean = F.cross_entropy(model(IMAGES), labels).item()
    for n in range(1, 5):
        losses = {s: _loss_without(model, s, n, labels) - clean for s in range(4 - n + 1)}
        best = min(losses, key=losses.get)
        assert result.removal_delta_loss[n - 1] == pytest.approx(losses[best], abs=1e-5)
        assert result.removal_spans[n - 1] == [best + 1, best + n]
    assert result.summary.span_selection == "exhaustive"


def test_effective_depth_is_contiguous_counts_joint_use_and_does_not_move_with_the_loss():
    delta = torch.tensor([0.001, 0.004, 0.009, 0.03, 0.2])  # removing n = 1 … 5 blocks
    assert int(removal_depth(delta, 0.01)) == 2  # 3 blocks go within δ: 2 stay
    assert int(removal_depth(delta, 0.0)) == 5
    assert int(removal_depth(delta, 1.0)) == 0
    # joint use: each block alone costs < δ (the old per-block count says 0 needed), the whole stack does not
    assert int(removal_depth(torch.tensor([0.002, 0.005, 0.012, 0.02]), 0.01)) == 2
    # non-monotone curves: the largest removable n counts; NaN is never within δ
    assert int(removal_depth(torch.tensor([0.02, 0.005, 0.03]), 0.01)) == 1
    assert int(removal_depth(torch.tensor([float("nan"), 0.0]), 0.01)) == 0
    # replicates along the leading dimension
    assert removal_depth(torch.stack([delta, delta + 0.005]), 0.01).tolist() == [2, 3]
    assert exit_depth(torch.tensor([0.5, 0.02, 0.004, 0.0]), 0.01).item() == 2
    assert saturation_depth(torch.tensor([0.2, 0.85, 0.9, 0.895]), 0.01).item() == 3


def test_effective_depth_of_a_model_is_unchanged_when_the_loss_is_shifted():
    """The old bar was a share of the loss; δ is in nats: adding a constant to every example's loss (a different
    label noise floor) changes nothing."""
    model = _vit(depth=4, seed=3)
    labels = _labels(model)

    class Shifted(nn.Module):  # the same model with a sharper softmax on one extra, never-correct class
        layerscale_readout = "cls"  # a wrapper states what its head reads: the inner ViT's class token

        def __init__(self, inner):
            super().__init__()
            self.inner = inner
            self.blocks = inner.blocks

        def forward(self, x):
            logits = self.inner(x)
            return torch.cat([logits, logits.logsumexp(-1, keepdim=True)], dim=-1)  # + log 2 nats to every loss

    plain = analyze_depth(model, (IMAGES, labels), batch_size=12, probes=False, bootstrap=100)
    shifted = analyze_depth(Shifted(model), (IMAGES, labels), batch_size=12, probes=False, bootstrap=100)
    assert shifted.clean_loss == pytest.approx(plain.clean_loss + math.log(2), abs=1e-4)
    assert shifted.summary.effective_depth == plain.summary.effective_depth
    assert shifted.summary.effective_depth_interval == plain.summary.effective_depth_interval


def test_every_per_block_number_and_summary_has_an_interval_holding_its_estimate():
    model = _vit(depth=3)
    labels = _labels(model)
    result = analyze_depth(model, (IMAGES, labels), batch_size=12, bootstrap=200, probe_splits=3)
    per_block = {"ablation_delta_loss": result.ablation_delta_loss, "angular_distance": result.angular_distance,
                 "angular_distance_all_tokens": result.angular_distance_all_tokens,
                 "block_influence": result.block_influence, "relative_update": result.relative_update,
                 "removal_delta_loss": result.removal_delta_loss, "early_exit_loss": result.early_exit_loss,
                 **{f"probe/{p}": v for p, v in result.probe_accuracy.items()}}
    for name, values in per_block.items():
        bounds = result.intervals[name]
        assert len(bounds) == len(values), name
        for value, (low, high) in zip(values, bounds):
            assert low - 1e-12 <= value <= high + 1e-12, name
    assert set(result.probe_embedding) == {"cls", "mean"}
    assert all(f"probe_embedding/{p}" in result.intervals for p in result.probe_embedding)
    s = result.summary
    for value, interval in ((s.effective_depth, s.effective_depth_interval), (s.exit_depth, s.exit_depth_interval),
                            (s.probe_saturation_depth, s.probe_saturation_interval)):
        assert interval[0] <= interval[1] and 0 <= interval[0] and interval[1] <= 3
    assert sum(s.effective_depth_shares.values()) == pytest.approx(1.0)
    rows = result.csv_rows()
    assert rows[0]["block_influence_low"] == result.intervals["block_influence"][0][0]
    again = analyze_depth(model, (IMAGES, labels), batch_size=12, bootstrap=200, probe_splits=3)
    assert again.intervals == result.intervals  # seeded: the same numbers every time


def _unbiased_hsic(k, l):
    n = k.shape[0]
    k, l = k.clone(), l.clone()
    k.fill_diagonal_(0)
    l.fill_diagonal_(0)
    one = torch.ones(n, 1, dtype=torch.float64)
    return float((torch.trace(k @ l) + (one.T @ k @ one) * (one.T @ l @ one) / ((n - 1) * (n - 2))
                  - 2.0 / (n - 2) * (one.T @ k @ l @ one)) / (n * (n - 3)))


def test_debiased_cka_is_song_et_al_unbiased_hsic_and_near_zero_for_independent_features():
    g = torch.Generator().manual_seed(0)
    features = torch.randn(30, 3, 8, generator=g, dtype=torch.float64)
    features[:, 1] = features[:, 0] @ torch.randn(8, 8, generator=g, dtype=torch.float64) + 3.0
    got = debiased_cka_matrix(features)
    for a in range(3):
        for b in range(3):
            ka, kb = features[:, a] @ features[:, a].T, features[:, b] @ features[:, b].T
            expected = _unbiased_hsic(ka, kb) / math.sqrt(_unbiased_hsic(ka, ka) * _unbiased_hsic(kb, kb))
            assert float(got[a, b]) == pytest.approx(expected, abs=1e-10)
    wide = torch.randn(40, 2, 30, generator=g, dtype=torch.float64)  # independent, width comparable to examples
    assert abs(float(debiased_cka_matrix(wide)[0, 1])) < 0.1 < float(cka_matrix(wide)[0, 1])
    with pytest.raises(ValueError, match="at least 4 examples"):
        debiased_cka_matrix(wide[:3])


def test_refuses_non_finite_weights_in_one_line():
    model = _vit(depth=2)
    with torch.no_grad():
        model.blocks[1].attn.qkv.weight[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"'blocks\.1\.attn\.qkv\.weight' holds 1 NaN") as info:
        analyze_depth(model, (IMAGES, torch.zeros(24, dtype=torch.long)))
    assert "\n" not in str(info.value)


def test_control_task_ties_random_labels_to_input_clusters_and_selectivity_is_reported():
    from layerscale.analysis.measures.control_task import control_labels, kmeans_types

    g = torch.Generator().manual_seed(0)
    centres = 10.0 * torch.randn(6, 4, generator=g)
    truth = torch.arange(60) % 6
    features = centres[truth] + 0.1 * torch.randn(60, 4, generator=g)
    types = kmeans_types(features, 6, seed=1)
    # the six well-separated clusters are found (up to their numbering)
    assert all(len(set(types[truth == c].tolist())) == 1 for c in range(6)) and len(set(types.tolist())) == 6
    labels = torch.arange(60) % 3
    control = control_labels(types, labels, seed=2)
    assert all(len(set(control[types == t].tolist())) == 1 for t in set(types.tolist()))
    assert set(control.tolist()) <= set(labels.tolist())
    model = _vit(depth=2)
    result = analyze_depth(model, (IMAGES, _labels(model)), batch_size=12, bootstrap=100, probe_splits=2)
    assert set(result.probe_selectivity) == {"block_out/cls", "block_out/mean", "embedding/cls", "embedding/mean"}
    for point, curve in result.probe_selectivity.items():
        assert len(curve) == (1 if point.startswith("embedding/") else 2)
        for value, (low, high) in zip(curve, result.intervals[f"probe_selectivity/{point}"]):
            assert low - 1e-12 <= value <= high + 1e-12
    assert "selectivity_block_out_cls_low" in result.csv_rows()[0]
    # the class token's x⁰ is one vector for every image: chance on the task and on a control task with real types
    # (not a degenerate one-label control task, which would make the selectivity about −1)
    assert abs(result.probe_selectivity["embedding/cls"][0]) < 0.5


def test_token_level_cka_uses_every_token_of_the_first_examples_as_rows():
    model = _vit(depth=3)
    labels = _labels(model)
    tokens = 5  # 4 patches + the class token
    result = analyze_depth(model, (IMAGES, labels), batch_size=7, probes=False, bootstrap=20, cka="debiased",
                           cka_tokens=12 * tokens + 3)
    seen = []
    hooks = [b.register_forward_hook(lambda m, a, out: seen.append(out.detach())) for b in model.blocks]
    with torch.no_grad():
        model(IMAGES[:12])
    for h in hooks:
        h.remove()
    rows = torch.stack(seen, dim=2).reshape(12 * tokens, 3, -1)  # first 12 examples (7 + 5 over two batches)
    assert result.cka_representation == f"block_out/tokens ({12 * tokens} token rows)"
    assert torch.allclose(torch.tensor(result.cka, dtype=torch.float64), debiased_cka_matrix(rows), atol=1e-5)
