"""Every method in every model family at depth 48: one forward and backward, finite values and gradients."""

import pytest
import torch

from layerscale.residual import list_residuals

from residual_helpers import FAMILIES, tiny_input, tiny_model


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", list_residuals())
def test_forward_and_backward_at_depth_48_are_finite(name, family):
    torch.manual_seed(0)
    model = tiny_model(family, name, depth=48)
    out = model(tiny_input(family))
    assert torch.isfinite(out).all()
    out.float().square().mean().backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    missing = [n for n, g in grads.items() if g is None]
    assert not missing, missing[:5]
    assert all(torch.isfinite(g).all() for g in grads.values())
    assert any(g.abs().sum() > 0 for g in grads.values())
