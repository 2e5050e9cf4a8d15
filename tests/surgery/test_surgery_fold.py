"""fold_layerscale: same eval outputs with the scales multiplied into the linear layers, for our models and timm's;
anything that cannot fold exactly is an error naming the module."""

import copy

import pytest
import torch
from torch import nn

from layerscale import LayerScale, create_model
from layerscale.residual import ResidualMethod, list_residuals
from layerscale.surgery import fold_layerscale, fold_state_dict, scale_modules
from surgery_models import TINY, count_parameters, inputs_for, ours, randomize_vectors_

OUR_CASES = [
    ("vit", {"residual": "layerscale"}),
    ("vit", {"residual": "layerscale_head"}),
    ("vit", {"residual": "scalar"}),
    ("vit", {"residual": "layerscale", "ls_placement": "mlp"}),
    ("cait", {"depth_token_only": 2}),
    ("gpt", {}),
]


def run(model, x):
    with torch.no_grad():
        return model(x)


@pytest.mark.parametrize("name, overrides", OUR_CASES, ids=[f"{n}-{'-'.join(map(str, o.values()))}"
                                                            for n, o in OUR_CASES])
def test_folding_our_models_keeps_outputs_and_removes_every_scale(name, overrides):
    model = ours(name, **overrides)
    x = inputs_for(model)
    expected = run(model, x)
    scales = sum(module.gamma.numel() for _, module in scale_modules(model))
    folded = fold_layerscale(model, inplace=False)
    torch.testing.assert_close(run(folded, x), expected, atol=1e-5, rtol=0)
    assert scale_modules(folded) == []
    assert count_parameters(model) - count_parameters(folded) == scales > 0
    torch.testing.assert_close(run(model, x), expected, atol=0, rtol=0)  # inplace=False left it alone


def test_inplace_fold_returns_the_same_model():
    model = ours("vit")
    x = inputs_for(model)
    expected = run(model, x)
    assert fold_layerscale(model) is model
    assert all(block.ls1 is None and block.ls2 is None for block in model.blocks)
    torch.testing.assert_close(run(model, x), expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("name, overrides", [("vit", {}), ("vit", {"residual": "scalar"}), ("cait", {}),
                                             ("gpt", {})])
def test_folded_state_dict_is_the_prenorm_models(name, overrides):
    model = ours(name, **overrides)
    folded = fold_layerscale(model, inplace=False)
    plain = ours(name, residual="prenorm")
    plain.load_state_dict(folded.state_dict())  # strict: exactly the keys of the model built without scales
    x = inputs_for(model)
    torch.testing.assert_close(run(plain, x), run(model, x), atol=1e-5, rtol=0)
    from_state_dict, counts = fold_state_dict(model.state_dict())
    assert from_state_dict.keys() == folded.state_dict().keys()
    assert all(torch.equal(from_state_dict[k], v) for k, v in folded.state_dict().items())
    assert counts["ls2.gamma -> mlp.fc2"] == len(model.blocks) + len(getattr(model, "blocks_token_only", []))


def test_per_head_fold_of_a_state_dict_matches_the_model_fold():
    model = ours("vit", residual="layerscale_head")
    folded = fold_layerscale(model, inplace=False)
    from_state_dict, counts = fold_state_dict(model.state_dict())
    assert counts["attn.head_scale.gamma -> attn.proj (columns per head)"] == TINY["depth"]
    folded.load_state_dict(from_state_dict)
    x = inputs_for(model)
    torch.testing.assert_close(run(folded, x), run(model, x), atol=1e-5, rtol=0)


def test_fold_is_exact_in_training_mode_with_dropout_and_drop_path():
    # Dropout masks and stochastic depth commute with a diagonal scale: the same draws give the same output.
    model = ours("vit", drop_rate=0.2, drop_path_rate=0.3).train()
    folded = fold_layerscale(model, inplace=False)
    x = inputs_for(model)
    torch.manual_seed(7)
    expected = model(x)
    torch.manual_seed(7)
    torch.testing.assert_close(folded(x), expected, atol=1e-5, rtol=0)


class PeriLayerScale(ResidualMethod):
    """A user's method with an output norm before the scale (Peri-LN + LayerScale)."""

    name = "peri_layerscale"

    def output_norm(self, ctx, branch):
        return nn.LayerNorm(ctx.dim)

    def scale(self, ctx, branch):
        return LayerScale(ctx.dim, 0.1)


def test_scale_after_an_output_norm_is_refused_by_name():
    model = create_model("vit", **TINY, residual=PeriLayerScale())
    before = copy.deepcopy(model.state_dict())
    with pytest.raises(ValueError, match=r"cannot fold blocks\.0\.ls1: blocks\.0\.out_norm1 \(LayerNorm\) sits "
                                         r"between"):
        fold_layerscale(model)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # nothing changed
    with pytest.raises(ValueError, match=r"out_norm1 sits between"):
        fold_state_dict(model.state_dict())


def test_unknown_container_with_a_scale_is_refused_by_name():
    model = nn.Sequential(nn.Linear(4, 4), nn.GELU(), LayerScale(4, 0.1))
    with pytest.raises(ValueError, match=r"cannot fold 2 \(LayerScale\) in Sequential: it is not in a block"):
        fold_layerscale(model)


def test_model_without_layerscale_is_an_error():
    with pytest.raises(ValueError, match=r"VisionTransformer has no LayerScale to fold"):
        fold_layerscale(create_model("vit", **TINY, residual="prenorm"))
    with pytest.raises(ValueError, match=r"no LayerScale to fold"):
        fold_state_dict(create_model("vit", **TINY, residual="prenorm").state_dict())


def test_tied_output_linear_is_refused():
    model = ours("vit")
    model.blocks[1].mlp.fc2.weight = model.blocks[0].mlp.fc2.weight
    with pytest.raises(ValueError, match=r"cannot fold blocks\.0\.ls2 into blocks\.0\.mlp\.fc2: its weight is "
                                         r"shared"):
        fold_layerscale(model)


def test_foreign_keys_must_be_converted_before_folding_a_state_dict():
    with pytest.raises(ValueError, match=r"convert these first: \[blocks.0.gamma_1\]"):
        fold_state_dict({"blocks.0.gamma_1": torch.ones(4), "blocks.0.attn.proj.weight": torch.ones(4, 4)})


def test_timm_models_fold():
    timm = pytest.importorskip("timm")
    small = dict(TINY, depth=2)
    x = torch.randn(2, 3, 32, 32)
    for name, extra in (("vit_small_patch16_224", {"init_values": 1e-2}), ("deit3_small_patch16_224", {}),
                        ("cait_xxs24_224", {})):
        torch.manual_seed(0)
        peer = randomize_vectors_(timm.create_model(name, pretrained=False, **small, **extra)).eval()
        expected = run(peer, x)
        folded = fold_layerscale(peer, inplace=False)
        torch.testing.assert_close(run(folded, x), expected, atol=1e-5, rtol=0)
        assert scale_modules(folded) == [], name
        removed = set(peer.state_dict()) - set(folded.state_dict())
        assert removed and all(k.endswith(("gamma", "gamma_1", "gamma_2")) for k in removed), name
        assert set(folded.state_dict()) <= set(peer.state_dict())
        if "cait" in name:  # the folded blocks hold no multiply at all, not gammas set to one
            assert type(folded.blocks[0]).__name__ == "FoldedCaitBlock"
            assert not any("gamma" in n for n, _ in folded.named_parameters())


@pytest.mark.parametrize("name, extra", [("vit_small_patch16_224", {"init_values": 1e-2}),
                                         ("deit3_small_patch16_224", {})])
def test_a_folded_timm_state_dict_loads_strictly_into_timm_built_with_init_values_0(name, extra):
    """The documented target: ``init_values=0`` (``None`` is dropped by ``timm.create_model``, so a DeiT III would
    keep its LayerScale and the strict load would fail)."""
    timm = pytest.importorskip("timm")
    small = dict(TINY, depth=2)
    torch.manual_seed(0)
    peer = randomize_vectors_(timm.create_model(name, pretrained=False, **small, **extra)).eval()
    folded, _ = fold_state_dict(peer.state_dict())
    plain = timm.create_model(name, pretrained=False, **small, init_values=0).eval()
    plain.load_state_dict(folded)  # strict
    x = torch.randn(2, 3, 32, 32)
    torch.testing.assert_close(run(plain, x), run(peer, x), atol=1e-5, rtol=0)


def test_hf_dinov2_folds():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    config = transformers.Dinov2Config(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=32,
                                       patch_size=8)
    model = randomize_vectors_(transformers.Dinov2Model(config)).eval()
    x = torch.randn(2, 3, 32, 32)
    expected = model(pixel_values=x).last_hidden_state.detach()
    fold_layerscale(model)
    assert isinstance(model.encoder.layer[0].layer_scale1, nn.Identity)
    with torch.no_grad():
        torch.testing.assert_close(model(pixel_values=x).last_hidden_state, expected, atol=1e-5, rtol=0)


@pytest.mark.parametrize("residual", list_residuals())
def test_every_residual_method_folds_exactly_or_says_why_not(residual):
    model = ours("vit", residual=residual, depth=2)
    x = inputs_for(model)
    expected = run(model, x)
    if not scale_modules(model):
        with pytest.raises(ValueError, match=r"no LayerScale to fold"):
            fold_layerscale(model)
        return
    folded = fold_layerscale(model, inplace=False)
    torch.testing.assert_close(run(folded, x), expected, atol=1e-5, rtol=0)
    assert scale_modules(folded) == []
