"""The state-dict key names are part of the public contract (docs/state_dict_keys.md lists them)."""

from layerscale.models import create_model

VIT_KEYS = [
    "cls_token", "pos_embed", "patch_embed.proj.weight", "patch_embed.proj.bias",
    "blocks.0.norm1.weight", "blocks.0.norm1.bias", "blocks.0.attn.qkv.weight", "blocks.0.attn.qkv.bias",
    "blocks.0.attn.proj.weight", "blocks.0.attn.proj.bias", "blocks.0.ls1.gamma", "blocks.0.norm2.weight",
    "blocks.0.norm2.bias", "blocks.0.mlp.fc1.weight", "blocks.0.mlp.fc1.bias", "blocks.0.mlp.fc2.weight",
    "blocks.0.mlp.fc2.bias", "blocks.0.ls2.gamma", "norm.weight", "norm.bias", "head.weight", "head.bias",
]


def test_vit_keys_are_stable_and_timm_compatible():
    model = create_model("vit", img_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2)
    assert sorted(model.state_dict()) == sorted(VIT_KEYS)


def test_cait_keys_are_stable():
    model = create_model("cait", img_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2, depth_token_only=1)
    keys = set(model.state_dict())
    expected_attn = {"blocks.0.attn.proj_l.weight", "blocks.0.attn.proj_w.weight", "blocks.0.attn.qkv.weight"}
    expected_ca = {f"blocks_token_only.0.attn.{n}.weight" for n in "qkv"} | {"blocks_token_only.0.ls1.gamma",
                                                                              "blocks_token_only.0.ls2.gamma"}
    assert expected_attn | expected_ca <= keys
    assert {"cls_token", "pos_embed", "norm.weight", "head.weight", "blocks.0.ls1.gamma"} <= keys
    assert model.state_dict()["pos_embed"].shape == (1, 4, 8)


def test_gpt_keys_hold_the_tied_embedding_once():
    model = create_model("gpt", embed_dim=8, depth=1, num_heads=2, block_size=16)
    keys = set(model.state_dict())
    assert {"wte.weight", "wpe.weight", "blocks.0.ls1.gamma", "norm.weight"} <= keys
    assert not any("lm_head" in k for k in keys)


def test_per_head_method_keys():
    model = create_model("vit", img_size=8, patch_size=4, embed_dim=8, depth=1, num_heads=2,
                         residual="layerscale_head")
    keys = set(model.state_dict())
    assert "blocks.0.attn.head_scale.gamma" in keys and "blocks.0.ls2.gamma" in keys
    assert "blocks.0.ls1.gamma" not in keys and "blocks.0.attn.proj.bias" not in keys
