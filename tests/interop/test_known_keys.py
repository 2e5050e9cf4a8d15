"""The table of weight names with our key layout (:mod:`layerscale.interop.known_keys`) holds every name of every
model it covers: each of our models with each residual method, scale placement and CaiT attention, and timm's
``VisionTransformer`` with its options that add weights. A model that gains a weight fails here, not in a user's
``layerscale fold``."""

from __future__ import annotations

import pytest
import torch

from layerscale import list_residuals
from layerscale.interop.known_keys import unknown_weight_names
from layerscale.models.registry import create_model

SIZES = {"vit": dict(img_size=8, patch_size=4), "cait": dict(img_size=8, patch_size=4),
         "gpt": dict(vocab_size=10, block_size=4)}
EXTRA = {"vit": [{}, {"global_pool": "avg"}, {"no_embed_class": False}],
         "cait": [{"attn_type": "talking_heads"}, {"attn_type": "self"}], "gpt": [{}]}


@pytest.mark.parametrize("name", sorted(SIZES))
def test_every_weight_of_our_models_is_known(name):
    built = 0
    with torch.device("meta"):
        for residual in list_residuals():
            for placement in ("both", "attn", "mlp", "none"):
                for extra in EXTRA[name]:
                    try:
                        model = create_model(name, embed_dim=8, num_heads=2, depth=2, residual=residual,
                                             ls_placement=placement, **SIZES[name], **extra)
                    except ValueError:  # a placement the method has no branches for
                        continue
                    built += 1
                    unknown = unknown_weight_names(model.state_dict())
                    assert not unknown, (name, residual, placement, extra, unknown)
    assert built >= len(list_residuals())


def test_every_weight_of_timm_vits_is_known():
    timm = pytest.importorskip("timm")
    variants = [{}, {"init_values": 1e-5}, {"class_token": False, "global_pool": "avg"}, {"qk_norm": True},
                {"reg_tokens": 4}, {"global_pool": "map"}, {"fc_norm": True, "global_pool": "avg"},
                {"scale_attn_norm": True, "scale_mlp_norm": True}, {"no_embed_class": True}, {"pre_norm": True}]
    for options in variants:
        model = timm.models.vision_transformer.VisionTransformer(img_size=8, patch_size=4, embed_dim=8, depth=2,
                                                                 num_heads=2, num_classes=3, **options)
        assert not unknown_weight_names(model.state_dict()), (options, unknown_weight_names(model.state_dict()))


@pytest.mark.parametrize("name", ["x\n\x1b[2J", "blocks.0.unknown_thing", "blocks.01.ls1.gamma", "blocks.0.ls3.gamma",
                                  "optimizer.state", "blocks.0.attn.qkv.weight.extra", "", "head.weight\n"])
def test_names_no_such_model_has_are_unknown(name):
    assert unknown_weight_names(["blocks.3.ls1.gamma", name]) == [name]
