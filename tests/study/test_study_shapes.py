"""Shapes at a fixed parameter budget (the DepthBench-style sweep's cells)."""

import pytest
import torch

from layerscale.models import create_model
from layerscale.study.design.shapes import ShapeRow, choose_shapes, count_parameters

VIT = dict(img_size=16, patch_size=4, num_classes=10, num_heads=4, mlp_ratio=2.0)


def test_every_depth_gets_a_width_within_five_percent_of_the_reference_budget():
    rows = choose_shapes("vit", {**VIT, "residual": "prenorm"}, [2, 4, 8, 16], reference_depth=4,
                         reference_width=96, width_multiple=4)
    budget = count_parameters("vit", {**VIT, "residual": "prenorm", "depth": 4, "embed_dim": 96})
    assert [r.depth for r in rows] == [2, 4, 8, 16]
    assert rows[1] == ShapeRow(4, 96, 4, budget)  # the reference shape is its own best width
    widths = [r.width for r in rows]
    assert widths == sorted(widths, reverse=True)  # deeper means narrower at equal parameters
    for row in rows:
        assert row.width % 4 == 0 and row.width % row.heads == 0
        assert abs(row.params - budget) <= 0.05 * budget
    # The meta-device count is the real model's count.
    real = create_model("vit", **VIT, residual="prenorm", depth=rows[0].depth, embed_dim=rows[0].width)
    assert rows[0].params == sum(p.numel() for p in real.parameters())


def test_a_methods_own_parameters_count_towards_the_budget():
    budget = 200_000
    pre = choose_shapes("gpt", dict(vocab_size=64, block_size=16, num_heads=2, residual="prenorm"), [4], budget=budget)
    hc = choose_shapes("gpt", dict(vocab_size=64, block_size=16, num_heads=2, residual="hc"), [4], budget=budget)
    for rows in (pre, hc):
        assert abs(rows[0].params - budget) <= 0.05 * budget
    assert count_parameters("gpt", dict(vocab_size=64, block_size=16, num_heads=2, residual="hc", depth=4,
                                        embed_dim=pre[0].width)) > pre[0].params


def test_a_budget_that_cannot_be_met_within_tolerance_is_a_one_line_error():
    with pytest.raises(ValueError, match=r"depth 64: no width \(multiple of 8\) gives 20,000 parameters ±5%; "
                                         r"nearest is width 8 with [\d,]+ \(\+\d+\.\d%\)"):
        choose_shapes("vit", VIT, [2, 64], budget=20_000)


@pytest.mark.parametrize("kwargs, message", [
    (dict(budget=10_000, reference_depth=2, reference_width=32), "give either budget= or reference_depth="),
    (dict(), "give either budget= or reference_depth="),
    (dict(reference_depth=2), "a reference shape needs both"),
    (dict(budget=10_000, width_multiple=6), "width_multiple 6 is not a multiple of num_heads 4"),
    (dict(budget=10_000, tolerance=0), r"tolerance must be a number in \(0, 1\), got 0"),
    (dict(budget=-5), "budget must be a positive int, got -5"),
])
def test_bad_arguments_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        choose_shapes("vit", VIT, [2], **kwargs)


def test_bad_depths_and_fixed_keys_are_refused():
    with pytest.raises(ValueError, match=r"depths must be distinct positive ints, got \[2, 2\]"):
        choose_shapes("vit", VIT, [2, 2], budget=50_000)
    with pytest.raises(ValueError, match="depth must be a positive int, got 0"):
        choose_shapes("vit", VIT, [0], budget=50_000)
    with pytest.raises(ValueError, match="base must not set 'embed_dim'"):
        choose_shapes("vit", {**VIT, "embed_dim": 32}, [2], budget=50_000)


def test_counting_on_the_meta_device_leaves_the_global_random_state_alone():
    state = torch.get_rng_state()
    choose_shapes("vit", {**VIT, "residual": "admin"}, [3], reference_depth=3, reference_width=64)
    assert torch.equal(torch.get_rng_state(), state)
