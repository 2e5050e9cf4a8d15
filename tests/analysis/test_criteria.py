"""The pruning criteria under their papers' names (gromov, block_influence, angular, ablation, gamma) against
independent float64 implementations written here: plain forward passes with hooks, ``torch.acos`` for the angle,
and models whose blocks are really removed by :func:`layerscale.surgery.prune`."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from layerscale.analysis.pruning.criteria import CRITERIA, lowest_blocks, parse_criteria
from layerscale.analysis.pruning.criterion_comparison import compare_criteria
from layerscale.models.registry import create_model
from layerscale.surgery import prune

from analysis_helpers import hooked_streams

G = torch.Generator().manual_seed(0)
IMAGES = torch.randn(24, 1, 8, 8, generator=G, dtype=torch.float64)
LABELS = torch.arange(24) % 5


def _vit(depth=5, seed=0):
    """A float64 ViT with LayerScale γ of order one, so that every block turns the stream."""
    torch.manual_seed(seed)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=depth,
                         num_heads=2).double().eval()
    g = torch.Generator().manual_seed(seed + 3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.copy_(0.2 + torch.rand(p.shape, generator=g, dtype=torch.float64))
        model.head.weight.mul_(20.0)
    return model


def _angle(a, b):
    """arccos(cos(a, b)) / π per row, float64, by the textbook formula."""
    cos = (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1))
    return torch.acos(cos.clamp(-1.0, 1.0)) / math.pi


def _loss(model, inputs=IMAGES, labels=LABELS):
    with torch.no_grad():
        return float(F.cross_entropy(model(inputs), labels))


def _compare(model, criteria, n, **kw):
    return compare_criteria(model, (IMAGES, LABELS), criteria, n, bootstrap=200, batch_size=7, **kw)


def test_block_influence_is_shortgpts_one_minus_mean_cosine_over_every_token_and_removes_the_lowest():
    model = _vit()
    comparison = _compare(model, "block_influence", 3)
    xs = hooked_streams(model, IMAGES)
    reference = []
    for before, after in zip(xs[:-1], xs[1:]):
        cos = (before * after).sum(-1) / (before.norm(dim=-1) * after.norm(dim=-1))  # (examples, tokens)
        reference.append(1.0 - float(cos.mean()))  # E over examples and tokens (every sequence has 5 tokens)
    curve = comparison.curves["block_influence"]
    assert max(abs(a - b) for a, b in zip(curve.scores, reference)) < 1e-12
    order = sorted(range(5), key=lambda i: reference[i])
    assert [set(s) for s in curve.sets] == [set(order[:n]) for n in (1, 2, 3)]


def test_angular_is_the_single_block_angle_on_the_class_token():
    model = _vit()
    curve = _compare(model, "angular", 2).curves["angular"]
    xs = hooked_streams(model, IMAGES)
    reference = [float(_angle(a[:, 0], b[:, 0]).mean()) for a, b in zip(xs[:-1], xs[1:])]
    assert max(abs(a - b) for a, b in zip(curve.scores, reference)) < 1e-9
    assert curve.sets == [lowest_blocks(reference, 1), lowest_blocks(reference, 2)]


def test_gromov_removes_the_contiguous_span_whose_input_and_output_are_closest_on_the_class_token():
    model = _vit(depth=6, seed=1)
    comparison = _compare(model, "gromov", 5)
    xs = hooked_streams(model, IMAGES)
    for n in range(1, 6):
        distances = [float(_angle(xs[s][:, 0], xs[s + n][:, 0]).mean()) for s in range(6 - n + 1)]
        start = min(range(len(distances)), key=lambda s: (distances[s], s))
        assert comparison.curves["gromov"].sets[n - 1] == list(range(start, start + n))
        assert comparison.distance[start][start + n] == pytest.approx(distances[start], abs=1e-9)
    assert comparison.curves["gromov"].scores is None


def test_every_removal_equals_the_loss_of_the_model_with_those_blocks_really_removed():
    model = _vit()
    comparison = _compare(model, ["ablation", "block_influence", "gromov"], 4)
    full = _loss(model)  # the analysis takes the cross-entropy of float32 logits (evaluation.per_example_loss)
    assert comparison.clean_loss == pytest.approx(full, abs=1e-6)
    ablation = [_loss(prune(model, [b])) - full for b in range(5)]
    assert max(abs(a - b) for a, b in zip(comparison.curves["ablation"].scores, ablation)) < 1e-6
    for name, curve in comparison.curves.items():
        for n, blocks in enumerate(curve.sets, start=1):
            assert len(blocks) == n
            assert curve.loss[n - 1] == pytest.approx(_loss(prune(model, blocks)), abs=1e-6), (name, blocks)
            assert curve.delta_loss[n - 1] == pytest.approx(curve.loss[n - 1] - comparison.clean_loss, abs=1e-12)
            for value, key in ((curve.loss, "loss_interval"), (curve.delta_loss, "delta_loss_interval"),
                               (curve.accuracy, "accuracy_interval")):
                low, high = getattr(curve, key)[n - 1]
                assert low <= value[n - 1] <= high


def test_gamma_is_the_scaled_branch_to_stream_ratio_of_each_block():
    model = _vit().float()  # the monitor behind the criterion sums squares in float32
    images = IMAGES.float()
    seen = {}
    handles = []
    for i, block in enumerate(model.blocks):
        for part in ("norm1", "norm2"):
            handles.append(getattr(block, part).register_forward_pre_hook(
                lambda m, a, key=(i, part): seen.__setitem__(key, a[0].detach())))
        for part in ("attn", "mlp"):
            handles.append(getattr(block, part).register_forward_hook(
                lambda m, a, out, key=(i, part): seen.__setitem__(key, out.detach())))
    with torch.no_grad():
        model(images)
    for h in handles:
        h.remove()
    reference = []
    for i, block in enumerate(model.blocks):
        attn = (block.ls1.gamma * seen[(i, "attn")]).norm() / seen[(i, "norm1")].norm()
        mlp = (block.ls2.gamma * seen[(i, "mlp")]).norm() / seen[(i, "norm2")].norm()
        reference.append(float((attn + mlp).detach().double()))
    comparison = compare_criteria(model, (images, LABELS), "gamma", 2, bootstrap=50, batch_size=100)
    assert comparison.curves["gamma"].scores == pytest.approx(reference, rel=1e-5)
    assert comparison.curves["gamma"].sets[1] == lowest_blocks(reference, 2)


def test_gromov_finds_the_span_of_identity_blocks_and_block_influence_the_same_blocks():
    model = _vit(depth=7, seed=2)
    with torch.no_grad():  # blocks 2, 3, 4 (0-based) compute exactly the identity
        for b in (2, 3, 4):
            model.blocks[b].ls1.gamma.zero_()
            model.blocks[b].ls2.gamma.zero_()
    comparison = _compare(model, "gromov,block_influence,angular", 3)
    assert comparison.curves["gromov"].sets == [[2], [2, 3], [2, 3, 4]]  # the first zero-distance span
    for name in ("gromov", "block_influence", "angular"):
        assert set(comparison.curves[name].sets[2]) == {2, 3, 4}
        assert comparison.curves[name].delta_loss[2] == 0.0
    assert comparison.distance[2][5] == 0.0


def test_a_language_model_reads_its_last_token():
    torch.manual_seed(0)
    gpt = create_model("gpt", vocab_size=32, block_size=16, embed_dim=16, depth=4, num_heads=2).double().eval()
    tokens = torch.randint(0, 32, (6, 9), generator=torch.Generator().manual_seed(1))
    comparison = compare_criteria(gpt, tokens, "gromov", 2, bootstrap=50)
    xs = hooked_streams(gpt, tokens[:, :-1])
    distances = [float(_angle(xs[s][:, -1], xs[s + 2][:, -1]).mean()) for s in range(3)]
    start = min(range(3), key=lambda s: (distances[s], s))
    assert comparison.readout == "last" and comparison.outputs == 32
    assert comparison.curves["gromov"].sets[1] == [start, start + 1]


@pytest.mark.parametrize("criteria, n, match", [
    ("gromov,nope", 2, "'nope': unknown criterion; expected one of gromov, block_influence"),
    ("gromov,gromov", 2, "criterion 'gromov' given twice"),
    ("gromov", 0, r"n \(blocks to remove\) must be an int in \[1, 4\], got 0"),
    ("gromov", 5, r"must be an int in \[1, 4\], got 5"),
])
def test_bad_criteria_and_n_are_one_line_errors(criteria, n, match):
    with pytest.raises(ValueError, match=match) as info:
        _compare(_vit(), criteria, n)
    assert "\n" not in str(info.value)


def test_gamma_without_layerscale_names_the_block_and_the_other_criteria():
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=3,
                         num_heads=2, residual="prenorm").double().eval()
    with pytest.raises(ValueError, match="needs LayerScale on both branches of every block; block 0"):
        _compare(model, "gamma", 1)


def test_parse_criteria_keeps_the_order_given():
    assert parse_criteria("block_influence, gromov") == ["block_influence", "gromov"]
    assert set(CRITERIA) == {"gromov", "block_influence", "angular", "ablation", "gamma"}


def test_gamma_on_a_model_without_layerscale_is_refused_before_the_analysis_runs(monkeypatch):
    import layerscale.analysis.analyze as analyze

    def must_not_run(*args, **kwargs):
        raise AssertionError("the streams were captured before the gamma criterion was checked")

    from layerscale.analysis.removal.streams import BlockStack

    monkeypatch.setattr(BlockStack, "capture_evaluation", must_not_run)
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=3,
                         num_heads=2, residual="prenorm").eval()
    for options in ({"set_criterion": "gamma"}, {"criteria": "gromov,gamma"}):
        with pytest.raises(ValueError, match="the gamma criterion needs LayerScale on both branches"):
            analyze.analyze_depth(model, (IMAGES.float(), LABELS), **options)
