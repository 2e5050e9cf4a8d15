"""add_layerscale: exact identity of outputs at init_value=1, near-identity blocks at small ε, only the new scales
as new parameters; unrecognised models are an error naming their class."""

import pytest
import torch
from torch import nn

from layerscale import LayerScale
from layerscale.residual import list_residuals
from layerscale.surgery import LayerScaledLinear, add_layerscale, fold_layerscale
from surgery_models import TINY, count_parameters, inputs_for, ours, randomize_vectors_


def run(model, x):
    with torch.no_grad():
        return model(x)


@pytest.mark.parametrize("name", ["vit", "cait", "gpt"])
def test_init_one_leaves_outputs_unchanged_exactly(name):
    model = ours(name, residual="prenorm")
    x = inputs_for(model)
    expected, before = run(model, x), count_parameters(model)
    assert add_layerscale(model, init_value=1.0) is model
    assert torch.equal(run(model, x), expected)
    blocks = list(model.blocks) + list(getattr(model, "blocks_token_only", []))
    assert count_parameters(model) - before == 2 * model.embed_dim * len(blocks)
    assert all(isinstance(b.ls1, LayerScale) and isinstance(b.ls2, LayerScale) for b in blocks)


def test_retrofitted_prenorm_vit_has_the_keys_of_a_layerscale_vit():
    model = add_layerscale(ours("vit", residual="prenorm"), init_value=1e-4)
    native = ours("vit", residual="layerscale", init_value=1e-4)
    assert model.state_dict().keys() == native.state_dict().keys()
    native.load_state_dict(model.state_dict())
    x = inputs_for(model)
    torch.testing.assert_close(run(native, x), run(model, x), atol=0, rtol=0)


def test_small_epsilon_starts_every_block_near_the_identity():
    model = add_layerscale(ours("vit", residual="prenorm"), init_value=1e-6)
    x = torch.randn(2, 17, TINY["embed_dim"])
    with torch.no_grad():
        for block in model.blocks:
            change = (block(x) - x).abs().max()
            assert 0 < change < 1e-4  # each branch is scaled by 1e-6; without it the change is O(1)


def test_default_init_value_follows_the_depth_rule():
    deep = add_layerscale(ours("vit", residual="prenorm", depth=20))
    assert torch.all(deep.blocks[0].ls1.gamma == 1e-5)  # 18 < depth ≤ 24: ε = 1e-5 (CaiT)


def test_only_missing_branches_are_filled_and_head_scale_counts_as_a_scale():
    attn_only = add_layerscale(ours("vit", residual="layerscale", ls_placement="attn"), init_value=0.5)
    assert all(torch.all(b.ls2.gamma == 0.5) and not torch.all(b.ls1.gamma == 0.5) for b in attn_only.blocks)
    per_head = add_layerscale(ours("vit", residual="layerscale_head", ls_placement="attn"), init_value=0.5)
    assert all(b.ls1 is None and isinstance(b.ls2, LayerScale) for b in per_head.blocks)


def test_fold_then_retrofit_then_fold_round_trip():
    model = ours("vit")
    x = inputs_for(model)
    expected = run(model, x)
    add_layerscale(fold_layerscale(model), init_value=1.0)
    torch.testing.assert_close(run(model, x), expected, atol=1e-5, rtol=0)


def test_copy_leaves_the_original_alone():
    model = ours("vit", residual="prenorm")
    copy = add_layerscale(model, init_value=0.1, inplace=False)
    assert copy is not model and all(b.ls1 is None for b in model.blocks)
    assert all(isinstance(b.ls1, LayerScale) for b in copy.blocks)


def test_errors_name_the_model_class():
    with pytest.raises(ValueError, match=r"does not recognise the residual blocks of ConvNet"):
        add_layerscale(type("ConvNet", (nn.Sequential,), {})(nn.Conv2d(3, 4, 3), nn.ReLU()))
    with pytest.raises(ValueError, match=r"VisionTransformer already has LayerScale on every residual branch"):
        add_layerscale(ours("vit"))
    with pytest.raises(ValueError, match=r"init_value must be a finite number >= 0, got -1"):
        add_layerscale(ours("vit", residual="prenorm"), init_value=-1)


def test_timm_vit_retrofit_takes_a_timm_layerscale_checkpoint():
    timm = pytest.importorskip("timm")
    small = dict(TINY, depth=2)
    torch.manual_seed(0)
    plain = randomize_vectors_(timm.create_model("vit_small_patch16_224", pretrained=False, **small)).eval()
    x = torch.randn(2, 3, 32, 32)
    expected, before = run(plain, x), count_parameters(plain)
    add_layerscale(plain, init_value=1.0)
    assert torch.equal(run(plain, x), expected)
    assert count_parameters(plain) - before == 2 * 32 * 2
    scaled = randomize_vectors_(timm.create_model("vit_small_patch16_224", pretrained=False, init_values=1e-5,
                                                  **small), seed=3).eval()
    plain.load_state_dict(scaled.state_dict())  # strict: same keys as timm's own LayerScale (ls1.gamma)
    torch.testing.assert_close(run(plain, x), run(scaled, x), atol=1e-5, rtol=0)


@pytest.fixture(scope="module")
def hf_vit():
    transformers = pytest.importorskip("transformers")

    def build(seed=0):
        torch.manual_seed(seed)
        config = transformers.ViTConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                        intermediate_size=64, image_size=32, patch_size=8, num_labels=3)
        return randomize_vectors_(transformers.ViTForImageClassification(config), seed).eval()

    return build


def test_hf_vit_retrofit_is_exact_at_one_and_counts_only_new_scales(hf_vit):
    model = hf_vit()
    x = torch.randn(2, 3, 32, 32)
    expected, before = run(model, x).logits, count_parameters(model)
    weights = {n: p for n, p in model.named_parameters()}
    add_layerscale(model, init_value=1.0)
    assert torch.equal(run(model, x).logits, expected)
    assert count_parameters(model) - before == 2 * 32 * 2
    layer = model.vit.layers[0]
    assert isinstance(layer.attention.o_proj, LayerScaledLinear) and isinstance(layer.mlp.fc2, LayerScaledLinear)
    new = {n: p for n, p in model.named_parameters() if n not in weights}
    assert sorted(new) == sorted(f"vit.layers.{i}.{m}.layer_scale" for i in range(2)
                                 for m in ("attention.o_proj", "mlp.fc2"))
    assert all(p is weights[n] for n, p in model.named_parameters() if n in weights)  # same tensors reused


def test_hf_vit_small_epsilon_state_dict_round_trip_and_fold(hf_vit):
    model = add_layerscale(hf_vit(), init_value=1e-3)
    with torch.no_grad():
        for layer in model.vit.layers:
            layer.attention.o_proj.layer_scale.uniform_(0.5, 1.5)
    other = add_layerscale(hf_vit(seed=1), init_value=1e-3)
    other.load_state_dict(model.state_dict())
    x = torch.randn(2, 3, 32, 32)
    expected = run(model, x).logits
    torch.testing.assert_close(run(other, x).logits, expected, atol=0, rtol=0)
    fold_layerscale(other)
    assert type(other.vit.layers[0].attention.o_proj) is nn.Linear
    torch.testing.assert_close(run(other, x).logits, expected, atol=1e-5, rtol=0)
    assert other.state_dict().keys() == hf_vit().state_dict().keys()


@pytest.mark.parametrize("residual", list_residuals())
def test_retrofit_at_one_is_exact_for_every_residual_method(residual):
    model = ours("vit", residual=residual, depth=2)
    x = inputs_for(model)
    expected = run(model, x)
    if all(b.ls1 is not None or b.attn.head_scale is not None for b in model.blocks) and \
            all(b.ls2 is not None for b in model.blocks):
        with pytest.raises(ValueError, match=r"already has LayerScale"):
            add_layerscale(model, init_value=1.0)
        return
    add_layerscale(model, init_value=1.0)
    assert torch.equal(run(model, x), expected)
