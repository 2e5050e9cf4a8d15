"""ReZero and SkipInit take the ReZero reference code's initialisation: PyTorch's defaults, not ViT's 0.02."""

import math

import pytest
import torch

from layerscale import create_model
from layerscale.residual.initialization.torch_default_init import TorchDefaultLinear
from layerscale.residual.initialization.xavier_linear import XavierLinear


@pytest.mark.parametrize("residual", ["rezero", "skipinit"])
def test_block_linears_follow_the_reference_code(residual):
    torch.manual_seed(0)
    width = 256
    model = create_model("vit", img_size=16, patch_size=4, embed_dim=width, num_heads=4, depth=2, mlp_ratio=2.0,
                         residual=residual)
    block = model.blocks[0]
    qkv, proj, fc1, fc2 = block.attn.qkv, block.attn.proj, block.mlp.fc1, block.mlp.fc2
    assert isinstance(qkv, XavierLinear) and qkv.gains == (1.0,)
    xavier_bound = math.sqrt(6 / (width + 3 * width))  # nn.MultiheadAttention: the packed (3d x d) in_proj
    assert qkv.weight.abs().max() <= xavier_bound and qkv.weight.std().item() == pytest.approx(xavier_bound / math.sqrt(3),
                                                                                         rel=0.05)
    assert torch.count_nonzero(qkv.bias) == 0
    for linear in (proj, fc1, fc2):  # nn.Linear default: U(±1/sqrt(fan_in)) for the weight
        assert isinstance(linear, TorchDefaultLinear)
        bound = 1 / math.sqrt(linear.in_features)
        assert linear.weight.abs().max() <= bound
        assert linear.weight.std().item() == pytest.approx(bound / math.sqrt(3), rel=0.05)
    assert torch.count_nonzero(proj.bias) == 0  # MultiheadAttention zeroes out_proj.bias
    assert torch.count_nonzero(fc1.bias) > 0 and fc1.bias.abs().max() <= 1 / math.sqrt(fc1.in_features)
    # the other methods keep the ViT initialisation
    prenorm = create_model("vit", img_size=16, patch_size=4, embed_dim=width, num_heads=4, depth=2, residual="prenorm")
    assert type(prenorm.blocks[0].mlp.fc1) is torch.nn.Linear
    assert prenorm.blocks[0].mlp.fc1.weight.std().item() == pytest.approx(0.02, rel=0.1)


def test_the_initialisation_survives_meta_device_construction_and_keeps_the_keys():
    kwargs = dict(img_size=16, patch_size=4, embed_dim=64, num_heads=4, depth=2, residual="rezero")
    with torch.device("meta"):
        model = create_model("vit", **kwargs)
    model.to_empty(device="cpu")
    model.reset_parameters()
    fc1 = model.blocks[1].mlp.fc1
    assert fc1.weight.abs().max() <= 1 / math.sqrt(64) and fc1.weight.std() > 0.05
    branch_keys = lambda m: {k for k in m.state_dict() if ".attn." in k or ".mlp." in k}  # noqa: E731
    assert branch_keys(model) == branch_keys(create_model("vit", **{**kwargs, "residual": "prenorm"}))
