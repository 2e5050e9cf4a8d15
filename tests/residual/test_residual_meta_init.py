"""Meta-device initialisation reproduces the methods' special initialisations (T-Fixup, DeepNorm)."""

import math

import pytest
import torch

from layerscale.residual.branch_scaling.deepnorm import deepnorm_beta
from layerscale.residual.initialization.tfixup import tfixup_scale
from layerscale.residual.initialization.xavier_linear import XavierLinear

from residual_helpers import (FAMILIES, all_blocks, assert_meta_construction_initialises_alike, tiny_model,
                              tiny_model_on_meta)

VALUE_FACTOR = {"tfixup": tfixup_scale, "deepnorm": deepnorm_beta}


def _value_thirds(model):
    return torch.cat([b.attn.qkv.weight[64:].flatten() for b in model.blocks])


@pytest.mark.parametrize("name", sorted(VALUE_FACTOR))
@pytest.mark.parametrize("family", FAMILIES)
def test_model_reset_parameters_after_to_empty_equals_normal_construction(name, family):
    meta = assert_meta_construction_initialises_alike(family, name, depth=3)
    # ... and it is the method's initialisation, not the models' default truncated normal.
    total = len(all_blocks(meta))  # CaiT counts its class-attention blocks too
    assert _value_thirds(meta).std().item() == pytest.approx(VALUE_FACTOR[name](total) * math.sqrt(2 / 64), rel=0.1)


@pytest.mark.parametrize("name", sorted(VALUE_FACTOR))
def test_resetting_every_module_in_pre_order_keeps_the_special_init(name):
    depth = 24
    meta = tiny_model_on_meta("vit", name, depth)
    torch.manual_seed(0)
    for module in meta.modules():  # parents before children, as a meta-device loader does
        if callable(getattr(module, "reset_parameters", None)):
            module.reset_parameters()
    torch.manual_seed(0)
    normal = tiny_model("vit", name, depth=depth)
    # v is Xavier (fans 32, 32) times the method's factor: std = factor · √(2/64) either way.
    expected = VALUE_FACTOR[name](depth) * math.sqrt(2 / 64)
    assert _value_thirds(meta).std().item() == pytest.approx(expected, rel=0.05)
    assert _value_thirds(normal).std().item() == pytest.approx(expected, rel=0.05)
    owned = [m for b in all_blocks(meta) for m in b.modules() if isinstance(m, XavierLinear)]
    assert len(owned) == 4 * depth and all(m.bias.abs().max() == 0 for m in owned)
