import pytest
import torch
from torch import nn

from layerscale.layers import Block, ClassAttentionBlock
from layerscale.models import create_model
from layerscale.residual import get_residual, list_residuals
from layerscale.residual.normalization.dyt import DyTResidual
from layerscale.residual.normalization.mixln import MixLN
from layerscale.residual.branch_scaling.skipinit import SkipInit

ALL_METHODS = {"prenorm", "postnorm", "layerscale", "layerscale_head", "scalar", "rezero", "skipinit", "tfixup",
               "deepnorm", "lns", "periln", "mixln", "dyt"}
WITH_PLACEMENT = {"layerscale", "layerscale_head", "scalar"}
NEEDS_DEPTH = {"tfixup", "deepnorm", "lns", "mixln"}
FRONTIER_METHODS = {"hc", "hc_static", "mhc", "normformer", "admin",  # tested in test_residual_frontier.py
                    "attnres", "attnres_block",  # tested in test_residual_attnres*.py
                    "bhyt"}  # tested in test_residual_bhyt.py


def test_list_residuals_names_the_thirteen_classic_and_eight_frontier_methods():
    assert set(list_residuals()) == ALL_METHODS | FRONTIER_METHODS
    assert len(list_residuals()) == 21


@pytest.mark.parametrize("name", sorted(ALL_METHODS))
def test_every_name_resolves_to_a_method_with_that_name(name):
    assert get_residual(name).name == name


def test_unknown_method_lists_every_known_one():
    with pytest.raises(ValueError, match="unknown residual method 'zero_init'; known methods: ") as err:
        get_residual("zero_init")
    assert all(name in str(err.value) for name in ALL_METHODS)


@pytest.mark.parametrize("name", sorted(NEEDS_DEPTH))
@pytest.mark.parametrize("block_type", [Block, ClassAttentionBlock])
def test_methods_that_need_the_depth_refuse_a_block_without_one(name, block_type):
    with pytest.raises(ValueError, match=f"residual '{name}' needs the block's place in its stack"):
        block_type(32, 4, residual=name)
    block_type(32, 4, residual=name, index=1, depth=1)


@pytest.mark.parametrize("name", sorted(ALL_METHODS - NEEDS_DEPTH))
def test_methods_that_do_not_need_the_depth_build_a_lone_block(name):
    Block(32, 4, residual=name)


def test_a_block_index_without_a_depth_is_an_error():
    with pytest.raises(ValueError, match="block index 3 needs depth="):
        Block(32, 4, index=3)


@pytest.mark.parametrize("name", sorted(ALL_METHODS - WITH_PLACEMENT))
@pytest.mark.parametrize("placement", ["attn", "mlp", "none"])
def test_placement_other_than_both_is_an_error_for_methods_without_a_layerscale(name, placement):
    with pytest.raises(ValueError, match=f"ls_placement='{placement}' does not apply to residual '{name}'"):
        Block(32, 4, residual=name, index=1, depth=4, ls_placement=placement)


def test_placement_error_also_comes_from_the_models():
    with pytest.raises(ValueError, match="ls_placement='mlp' does not apply to residual 'deepnorm'"):
        create_model("gpt", embed_dim=32, num_heads=4, depth=2, residual="deepnorm", ls_placement="mlp")


@pytest.mark.parametrize("name", sorted(WITH_PLACEMENT))
def test_layerscale_family_still_honours_placement(name):
    keys = set(Block(32, 4, residual=name, ls_placement="mlp").state_dict())
    assert "ls2.gamma" in keys and "ls1.gamma" not in keys


def test_skipinit_small_alpha_must_stay_below_one_over_sqrt_depth():
    block = Block(32, 4, residual=SkipInit(alpha=0.2), index=1, depth=16)
    assert block.ls1.gamma.item() == pytest.approx(0.2) and block.ls2.gamma.item() == pytest.approx(0.2)
    with pytest.raises(ValueError, match=r"skipinit alpha must be below 1/sqrt\(depth\) = 0.25 for depth 16, got 0.25"):
        Block(32, 4, residual=SkipInit(alpha=0.25), index=1, depth=16)
    with pytest.raises(ValueError, match="needs depth="):
        Block(32, 4, residual=SkipInit(alpha=0.2))
    with pytest.raises(ValueError, match="alpha must be a finite number >= 0, got -1"):
        SkipInit(alpha=-1)


def test_bad_method_constants_are_errors():
    with pytest.raises(ValueError, match=r"post_fraction must be a number in \[0, 1\], got 1.5"):
        MixLN(post_fraction=1.5)
    with pytest.raises(ValueError, match="DyT alpha_init must be > 0"):
        DyTResidual(alpha_init=0.0)


def test_lns_needs_a_layernorm_to_scale():
    with pytest.raises(ValueError, match="residual 'lns' scales a LayerNorm, but norm_layer builds RMSNorm"):
        Block(32, 4, residual="lns", index=1, depth=2, norm_layer=lambda d: nn.RMSNorm(d))


def test_methods_build_on_the_meta_device():
    with torch.device("meta"):
        for name in sorted(ALL_METHODS):
            block = Block(32, 4, residual=name, index=2, depth=4)
            assert all(p.is_meta for p in block.parameters())


@pytest.mark.parametrize("name, room", [("hyper_connections", "multi_stream"), ("mhc", "multi_stream"),
                                        ("fused_hyper_connections", "multi_stream"), ("attnres_block", "multi_stream"),
                                        ("torch_default_init", "initialization"), ("bhyt", "normalization"),
                                        ("admin", "branch_scaling")])
def test_a_documented_module_path_gives_the_moved_module_itself(name, room):
    import importlib

    assert importlib.import_module(f"layerscale.residual.{name}") is \
        importlib.import_module(f"layerscale.residual.{room}.{name}")
