"""Each method's state dict loads (strict) into a fresh model and gives identical outputs, also via safetensors."""

import pytest
import torch

from layerscale.residual import list_residuals

from residual_helpers import FAMILIES, tiny_input, tiny_model


def _randomised(family, name, seed):
    """A small model whose every parameter is random, so that outputs depend on all of them (α = 0 would not)."""
    torch.manual_seed(seed)
    model = tiny_model(family, name, depth=3).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn_like(p) * 0.2)
    return model


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("name", list_residuals())
def test_state_dict_round_trip_strict_and_through_safetensors(name, family, tmp_path):
    safetensors_torch = pytest.importorskip("safetensors.torch")
    source = _randomised(family, name, seed=0)
    x = tiny_input(family)
    with torch.no_grad():
        expected = source(x)

    fresh = tiny_model(family, name, depth=3).eval()
    with torch.no_grad():
        assert not torch.equal(fresh(x), expected)
    fresh.load_state_dict(source.state_dict(), strict=True)
    with torch.no_grad():
        assert torch.equal(fresh(x), expected)

    path = tmp_path / "model.safetensors"
    safetensors_torch.save_file(source.state_dict(), str(path))  # raises if any tensors share memory
    again = tiny_model(family, name, depth=3).eval()
    again.load_state_dict(safetensors_torch.load_file(str(path)), strict=True)
    with torch.no_grad():
        assert torch.equal(again(x), expected)
