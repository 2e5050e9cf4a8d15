"""RMSNorm as a norm choice: the formula, the factory, and ``norm=`` on blocks and models."""

import pytest
import torch
from torch import nn

from layerscale.layers import Block
from layerscale.layers.norms import norm_factory, rms_norm
from layerscale.models import create_model


def test_rmsnorm_equals_its_formula():
    torch.manual_seed(0)
    norm = rms_norm(1e-6)(24)
    with torch.no_grad():
        norm.weight.copy_(torch.randn(24))
    x = torch.randn(3, 7, 24) * 3 + 1  # not centred: RMSNorm must not subtract the mean
    expected = x / torch.sqrt(x.square().mean(-1, keepdim=True) + 1e-6) * norm.weight
    torch.testing.assert_close(norm(x), expected, rtol=1e-6, atol=1e-6)
    assert set(norm.state_dict()) == {"weight"}  # no bias


def test_norm_factory_builds_each_kind_and_names_a_bad_one():
    assert type(norm_factory("layernorm", 1e-5)(8)) is nn.LayerNorm
    assert type(norm_factory("rmsnorm", 1e-5)(8)) is nn.RMSNorm
    with pytest.raises(ValueError, match=r"norm must be one of \['layernorm', 'rmsnorm'\], got 'batchnorm'"):
        norm_factory("batchnorm")


@pytest.mark.parametrize("residual", ["prenorm", "postnorm", "normformer", "hc", "admin"])
def test_blocks_take_rmsnorm_for_every_norm_slot(residual):
    block = Block(16, 4, residual=residual, norm="rmsnorm")
    norms = [m for m in block.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))]
    assert norms and all(type(m) is nn.RMSNorm for m in norms)


@pytest.mark.parametrize("family", ["vit", "cait", "gpt"])
def test_models_switch_to_pre_rmsnorm_in_one_argument(family):
    args = dict(embed_dim=16, num_heads=2, depth=2, residual="prenorm", norm="rmsnorm")
    args.update(vocab_size=16, block_size=4) if family == "gpt" else args.update(img_size=8, patch_size=4)
    model = create_model(family, **args)
    norms = [m for m in model.modules() if isinstance(m, (nn.LayerNorm, nn.RMSNorm))]
    assert type(model.norm) is nn.RMSNorm and all(type(m) is nn.RMSNorm for m in norms)
    x = torch.randint(0, 16, (2, 4)) if family == "gpt" else torch.randn(2, 3, 8, 8)
    assert torch.isfinite(model(x)).all()
    with pytest.raises(ValueError, match="norm must be one of"):
        create_model(family, **{**args, "norm": "layer"})
