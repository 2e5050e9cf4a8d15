import pytest
import torch

from layerscale import create_model, param_groups


def _names(groups, i):
    return set(groups[i]["param_names"])


def test_scales_norms_biases_tokens_get_no_decay():
    model = create_model("cait", img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2)
    groups = param_groups(model, 0.05)
    decayed, free = _names(groups, 0), _names(groups, 1)
    assert groups[0]["weight_decay"] == 0.05 and groups[1]["weight_decay"] == 0.0
    assert {"blocks.0.ls1.gamma", "blocks_token_only.1.ls2.gamma", "cls_token", "pos_embed",
            "blocks.0.norm1.weight", "blocks.0.attn.qkv.bias"} <= free
    assert {"blocks.0.attn.qkv.weight", "blocks.0.mlp.fc1.weight", "head.weight"} <= decayed
    assert decayed.isdisjoint(free)
    assert len(decayed) + len(free) == len(list(model.parameters()))


def test_switch_puts_scales_back_under_decay():
    model = create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2,
                         residual="layerscale_head")
    groups = param_groups(model, 0.1, decay_scales=True)
    assert {"blocks.0.attn.head_scale.gamma", "blocks.1.ls2.gamma"} <= _names(groups, 0)


def test_frozen_parameters_are_left_out_and_groups_work_with_adamw():
    model = create_model("gpt", embed_dim=16, depth=1, num_heads=2, block_size=8)
    model.wpe.weight.requires_grad_(False)
    groups = param_groups(model, 0.1)
    assert "wpe.weight" not in _names(groups, 0) | _names(groups, 1)
    torch.optim.AdamW(groups, lr=1e-3)


def test_negative_weight_decay_is_rejected():
    with pytest.raises(ValueError, match="weight_decay must be >= 0, got -1"):
        param_groups(create_model("gpt_nano", depth=1), -1)


def test_hugging_face_vision_tokens_and_position_embeddings_get_no_decay():
    """HF ViT / DINOv2 name them ``embeddings.position_embeddings``, ``cls_token``, ``mask_token``,
    ``register_tokens`` (timm: ``pos_embed``, ``cls_token``, ``reg_token``): the same rule for both."""
    transformers = pytest.importorskip("transformers")
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, image_size=8, patch_size=4,
                 num_channels=1, num_labels=5, intermediate_size=32)
    models = [transformers.ViTForImageClassification(transformers.ViTConfig(**small)),
              transformers.Dinov2ForImageClassification(transformers.Dinov2Config(**small)),
              transformers.Dinov2WithRegistersForImageClassification(
                  transformers.Dinov2WithRegistersConfig(**small, num_register_tokens=2))]
    for model in models:
        decay, no_decay = param_groups(model, 0.1)
        tokens = {n for n, _ in model.named_parameters()
                  if n.rpartition(".")[2] in ("position_embeddings", "cls_token", "mask_token", "register_tokens")}
        assert any(n.endswith("position_embeddings") for n in tokens), type(model).__name__
        assert tokens <= set(no_decay["param_names"]), sorted(tokens & set(decay["param_names"]))
        assert any(n.endswith("query.weight") or n.endswith("q_proj.weight") for n in decay["param_names"])
