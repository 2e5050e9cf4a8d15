"""grow(): at γ = 0 the grown model computes exactly the source's function (ours, timm ViT / DeiT III / CaiT, HF
GPT-2 / Llama, generate() too); placements; the new-block record; bad arguments refused before any change."""

from __future__ import annotations

import pytest
import torch

from layerscale import create_model, grow
from layerscale.surgery.growth.grow import insertion_points

timm = pytest.importorskip("timm")
transformers = pytest.importorskip("transformers")

IMAGES = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
TOKENS = torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(1))


def ours(name, residual="layerscale"):
    torch.manual_seed(0)
    if name == "gpt":
        return create_model("gpt", embed_dim=32, depth=3, num_heads=4, block_size=16, residual=residual).eval()
    model = create_model(name, img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=4, num_classes=5,
                         residual=residual).eval()
    model.class_token_path = False  # the full path in both models (the shortcut rounds the last block differently)
    return model


def timm_model(name):
    torch.manual_seed(0)
    kwargs = dict(img_size=32, patch_size=8, depth=3, num_classes=5)
    if name.startswith("deit3"):
        kwargs.update(embed_dim=32, num_heads=2)
    return timm.create_model(name, **kwargs).eval()


def hf_model(family, layers=2):
    torch.manual_seed(0)
    if family == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=layers, n_head=2, vocab_size=64, n_positions=32,
                                         bos_token_id=0, eos_token_id=1)
        return transformers.GPT2LMHeadModel(config).eval()
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=64,
                                      max_position_embeddings=32, bos_token_id=0, eos_token_id=1)
    return transformers.LlamaForCausalLM(config).eval()


def out(model, x):
    with torch.no_grad():
        y = model(x)
    return getattr(y, "logits", y)


@pytest.mark.parametrize("name,residual", [("vit", "layerscale"), ("vit", "prenorm"), ("cait", "layerscale"),
                                           ("gpt", "layerscale"), ("gpt", "prenorm")])
@pytest.mark.parametrize("init", ["copy", "random"])
def test_ours_identity_at_zero(name, residual, init):
    model = ours(name, residual)
    x = TOKENS if name == "gpt" else IMAGES
    grown = grow(model, 3, where="every:1", init=init)
    assert len(grown.blocks) == 6 and grown.depth == 6 and grown.layerscale_new_blocks == (1, 3, 5)
    assert grown.residual == "layerscale"
    assert torch.equal(out(grown, x), out(model, x))
    assert len(model.blocks) == 3  # a copy: the source is untouched


@pytest.mark.parametrize("name", ["vit_tiny_patch16_224", "deit3_small_patch16_224", "cait_xxs24_224"])
def test_timm_identity_at_zero(name):
    model = timm_model(name)
    grown = grow(model, 2, where="after:0,2", init="random")
    assert len(grown.blocks) == 5 and grown._model_args["depth"] == 5 and grown.layerscale_new_blocks == (1, 4)
    assert torch.equal(out(grown, IMAGES), out(model, IMAGES))
    if hasattr(grown, "feature_info"):
        assert [f["module"] for f in grown.feature_info] == [f"blocks.{i}" for i in range(5)]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
@pytest.mark.parametrize("init", ["copy", "random"])
def test_hf_identity_at_zero_with_generate(family, init):
    model = hf_model(family)
    grown = grow(model, 2, where="top", init=init)
    assert grown.config.num_hidden_layers == 4
    assert torch.equal(out(grown, TOKENS), out(model, TOKENS))
    layers = grown.transformer.h if family == "gpt2" else grown.model.layers
    attn = [(layer.attn if family == "gpt2" else layer.self_attn).layer_idx for layer in layers]
    assert attn == [0, 1, 2, 3]  # KV-cache slots renumbered
    mask = torch.ones_like(TOKENS)
    kwargs = dict(attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(grown.generate(TOKENS, **kwargs), model.generate(TOKENS, **kwargs))


def test_positive_gamma_moves_the_function_by_the_new_branches():
    model = ours("vit")
    near = grow(model, 1, where="top", gamma=1e-3)
    far = grow(model, 1, where="top", gamma=1.0)
    base = out(model, IMAGES)
    d_near, d_far = (out(near, IMAGES) - base).abs().max(), (out(far, IMAGES) - base).abs().max()
    assert 0 < d_near < d_far
    assert all(torch.all(s.gamma == 1e-3) for s in (near.blocks[3].ls1, near.blocks[3].ls2))


def test_copy_keeps_the_neighbours_weights_and_random_does_not():
    model = ours("vit")
    copied = grow(model, 1, where="after:1", init="copy")
    fresh = grow(model, 1, where="after:1", init="random", seed=3)
    assert torch.equal(copied.blocks[2].attn.qkv.weight, model.blocks[1].attn.qkv.weight)
    assert not torch.equal(fresh.blocks[2].attn.qkv.weight, model.blocks[1].attn.qkv.weight)


def test_insertion_points():
    assert insertion_points("top", 2, 4) == [3, 3]
    assert insertion_points("every:2", 2, 4) == [1, 3]
    assert insertion_points(None, 2, 8) == [3, 7]  # every:floor(L/K)
    assert insertion_points("after:3,0,0", 3, 4) == [0, 0, 3]


@pytest.mark.parametrize("insert,where,match", [
    (0, "top", "insert must be an integer >= 1"),
    (1, "after:3", "past the depth"),
    (2, "after:1", "names 1 places"),
    (3, "every:2", "fewer than insert=3"),
    (1, "bottom", "where must be"),
    (1, "top:", "where must be"),  # was taken as "top"
    (1, "after:-1", r"block index -1 is negative \(blocks 0\.\.2\)"),  # was "past the depth"
    (4, None, "cannot be spread"),
])
def test_bad_arguments_are_refused(insert, where, match):
    with pytest.raises(ValueError, match=match):
        insertion_points(where, insert, 3)


def test_models_it_cannot_grow_are_refused():
    with pytest.raises(ValueError, match="cannot edit the blocks of a Linear"):
        grow(torch.nn.Linear(2, 2), 1)
    deepnorm = create_model("vit", img_size=32, patch_size=8, embed_dim=32, depth=3, num_heads=4, residual="deepnorm")
    with pytest.raises(ValueError, match="depend on the depth"):
        grow(deepnorm, 1)
    with pytest.raises(ValueError, match="gamma must be a finite number >= 0"):
        grow(ours("vit"), 1, gamma=-1.0)
