"""Effective depth, set variant: a model grown at γ = 0 reports its source depth; greedy and exhaustive searches;
the pure functions by hand."""

from __future__ import annotations

import pytest
import torch

from layerscale.analysis import analyze_depth
from layerscale.analysis.pruning.set_depth import (EXHAUSTIVE_MAX_DEPTH, all_subsets, greedy_removable, most_removable,
                                           resolve_search)
from layerscale.models.registry import create_model
from layerscale.surgery import grow, prune

from analysis_helpers import self_labelled_vit


def _strong_source(depth=8, examples=32):
    """A random-weight ViT whose every block matters: γ of order one and a sharp head, judged on its own
    predictions (the loss is small, and removing any block flips some of them)."""
    return self_labelled_vit(depth, examples, gamma_floor=1.0, data_seed=3)


def test_a_model_grown_8_to_11_at_gamma_zero_reports_its_source_depth_under_the_set_variant():
    source, images, labels = _strong_source()
    grown = grow(source, 3, gamma=0.0).eval()
    with torch.no_grad():
        assert torch.equal(grown(images), source(images))  # it computes exactly its source
    new = sorted(grown.layerscale_new_blocks)
    result = analyze_depth(grown, (images, labels), probes=False, bootstrap=200)
    summary = result.summary
    assert (summary.set_search, summary.set_criterion) == ("greedy", "ablation")  # L = 11 > 8: greedy
    assert summary.set_depth == 8 and summary.set_depth_interval[0] <= 8 == summary.set_depth_interval[1]
    assert summary.set_removed_blocks == [b + 1 for b in new]
    assert summary.effective_depth == 10  # one contiguous span holds one new block at most
    assert "set variant 8 of 11" in summary.lines[0]
    # the blocks it names can go: the pruned model is the source again
    with torch.no_grad():
        assert torch.equal(prune(grown, new)(images), source(images))


def test_the_exhaustive_search_agrees_on_the_grown_model():
    source, images, labels = _strong_source(examples=16)
    grown = grow(source, 3, gamma=0.0).eval()
    result = analyze_depth(grown, (images, labels), probes=False, bootstrap=100, set_search="exhaustive")
    assert result.summary.set_search == "exhaustive"
    assert result.summary.set_depth == 8
    assert result.summary.set_removed_blocks == [b + 1 for b in sorted(grown.layerscale_new_blocks)]


def test_auto_searches_exhaustively_up_to_8_blocks_and_finds_what_a_greedy_order_misses():
    source, images, labels = _strong_source(depth=4, examples=16)
    grown = grow(source, 2, where="after:1,1", gamma=0.0).eval()  # two identity blocks side by side
    result = analyze_depth(grown, (images, labels), probes=False, bootstrap=100, set_criterion="block_influence")
    assert result.summary.set_search == "exhaustive"
    assert result.summary.set_depth == 4 and result.summary.effective_depth == 4


def test_greedy_counts_the_leading_prefixes_within_delta_and_exhaustive_the_largest_set():
    prefix = torch.tensor([[0.0, 0.005, 0.02, 0.0], [0.0, 0.0, 0.0, 0.0], [0.5, 0.0, 0.0, 0.0],
                           [float("nan"), 0.0, 0.0, 0.0]])
    assert greedy_removable(prefix, 0.01).tolist() == [2, 4, 0, 0]
    sets = all_subsets(3)
    assert len(sets) == 7 and sets[0] == (0,) and sets[-1] == (0, 1, 2)
    delta = torch.tensor([0.5, 0.5, 0.5, 0.5, 0.001, 0.5, 0.5])  # only {1, 2} (the 5th set) is within δ
    assert int(most_removable(delta, [len(s) for s in sets], 0.01)) == 2
    assert int(most_removable(torch.full((7,), 1.0), [len(s) for s in sets], 0.01)) == 0


def test_set_search_names_its_bound_and_refuses_exhaustive_past_it():
    assert resolve_search("auto", 8) == "exhaustive" and resolve_search("auto", 9) == "greedy"
    assert resolve_search("exhaustive", EXHAUSTIVE_MAX_DEPTH) == "exhaustive"
    with pytest.raises(ValueError, match=r"needs L <= 12 blocks \(2\^L - 1 sets\), got L = 13; use 'greedy'"):
        resolve_search("exhaustive", 13)
    with pytest.raises(ValueError, match="set_search must be one of auto, greedy, exhaustive, got 'all'"):
        resolve_search("all", 4)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=8, depth=13,
                         num_heads=2)
    with pytest.raises(ValueError, match="got L = 13"):
        analyze_depth(model, (torch.randn(4, 1, 8, 8), torch.arange(4)), set_search="exhaustive")
    with pytest.raises(ValueError, match="set_criterion must be one of block_influence, angular, ablation, gamma, "
                                         "got 'gromov'"):
        analyze_depth(model, (torch.randn(4, 1, 8, 8), torch.arange(4)), set_criterion="gromov")


def test_the_greedy_search_starts_beyond_the_span_and_costs_nothing_when_the_span_removes_every_block(monkeypatch):
    import layerscale.analysis.pruning.set_depth as set_depth

    evaluated = []
    real = set_depth.set_losses

    def counting(stack, evalset, sets, **kw):
        evaluated.extend(sets)
        return real(stack, evalset, sets, **kw)

    monkeypatch.setattr(set_depth, "set_losses", counting)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=8, depth=10,
                         num_heads=2).eval()
    with torch.no_grad():  # every block is the identity: removing all ten costs exactly nothing
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.zero_()
    images, labels = torch.randn(8, 1, 8, 8), torch.arange(8) % 5
    result = analyze_depth(model, (images, labels), probes=False, bootstrap=20)
    assert result.summary.effective_depth == 0 and result.summary.set_depth == 0
    assert result.summary.set_search == "greedy" and evaluated == []
    source, images, labels = _strong_source(examples=16)
    evaluated.clear()
    analyze_depth(grow(source, 3, gamma=0.0).eval(), (images, labels), probes=False, bootstrap=20)
    assert evaluated and min(len(s) for s in evaluated) == 2  # the span removes one block: prefixes start at 2
