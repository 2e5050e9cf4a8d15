"""Hugging Face DINOv2 weights load into our ViT (no_embed_class=False) with equal features, and export back."""

import pytest
import torch

from interop_peers import images, randomize_vectors_
from layerscale import create_model
from layerscale.interop import (
    convert_state_dict, convert_with_report, detect_format, export_state_dict, load_pretrained_into,
)

transformers = pytest.importorskip("transformers")

# image_size 32 = the configured size: Hugging Face interpolates the position embedding for any other grid.
CONFIG = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, image_size=32, patch_size=8,
              layerscale_value=0.1)


def our_vit(**overrides):
    return create_model("vit", img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=5,
                        no_embed_class=False, **overrides).eval()


@pytest.fixture(scope="module")
def hf_model():
    torch.manual_seed(0)
    return randomize_vectors_(transformers.Dinov2Model(transformers.Dinov2Config(**CONFIG))).eval()


def hf_features(model, x):
    with torch.no_grad():
        return model(pixel_values=x).last_hidden_state


def test_dinov2_backbone_gives_equal_features(hf_model):
    ours = our_vit()
    assert detect_format(hf_model.state_dict()) == "hf_dinov2"
    report = load_pretrained_into(ours, hf_model.state_dict(), strict=False)
    assert report.counts["encoder.layer.{i}.attention.{q|k|v}_proj.{p} -> blocks.{i}.attn.qkv.{p}"] == 12
    assert [k for k, _ in report.dropped] == ["embeddings.mask_token"]
    assert "head.bias" in report.notes[-1] and "head.weight" in report.notes[-1]
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours.forward_features(x), hf_features(hf_model, x), atol=1e-5, rtol=0)


def test_strict_load_of_a_backbone_names_the_missing_head(hf_model):
    with pytest.raises(ValueError, match=r"2 missing key\(s\) \[head.bias, head.weight\]"):
        load_pretrained_into(our_vit(), hf_model.state_dict())


def test_export_to_dinov2_loads_strictly_with_equal_features(hf_model):
    ours = randomize_vectors_(our_vit(), seed=4)
    exported, report = convert_with_report(ours.state_dict(), "layerscale", "hf_dinov2")
    assert ("head.weight", "Dinov2Model has no classification head") in report.dropped
    assert torch.equal(exported["embeddings.mask_token"], torch.zeros(1, 32))
    peer = transformers.Dinov2Model(transformers.Dinov2Config(**CONFIG)).eval()
    peer.load_state_dict(exported, strict=True)
    x = images(seed=2)
    with torch.no_grad():
        torch.testing.assert_close(hf_features(peer, x), ours.forward_features(x), atol=1e-5, rtol=0)


def test_round_trip_dinov2_ours_dinov2_is_exact(hf_model):
    ours = our_vit()
    load_pretrained_into(ours, hf_model.state_dict(), strict=False)
    back = export_state_dict(ours, "hf_dinov2")
    original = hf_model.state_dict()
    assert back.keys() == original.keys()
    for key in original:
        if key != "embeddings.mask_token":  # not carried by our ViT; exported as zeros
            assert torch.equal(back[key], original[key]), key


def test_task_model_prefix_is_stripped_and_its_classifier_must_be_dropped_explicitly(hf_model):
    torch.manual_seed(0)
    task = transformers.Dinov2ForImageClassification(transformers.Dinov2Config(**CONFIG, num_labels=3)).eval()
    task.dinov2.load_state_dict(hf_model.state_dict())
    with pytest.raises(ValueError, match=r"classifier\.bias, classifier\.weight"):
        convert_state_dict(task.state_dict())
    ours = our_vit()
    report = load_pretrained_into(ours, task.state_dict(), strict=False, drop=["classifier."])
    assert "prefix 'dinov2.' stripped" in report.notes
    x = images()
    with torch.no_grad():
        torch.testing.assert_close(ours.forward_features(x), hf_features(task.dinov2, x), atol=1e-5, rtol=0)


def test_transformers_4_key_names_are_read(hf_model):
    legacy = {}
    for key, value in hf_model.state_dict().items():
        for new, old in (("attention.q_proj", "attention.attention.query"), ("attention.k_proj",
                         "attention.attention.key"), ("attention.v_proj", "attention.attention.value"),
                         ("attention.o_proj", "attention.output.dense")):
            key = key.replace(new, old)
        legacy[key] = value
    assert "encoder.layer.0.attention.attention.query.weight" in legacy
    current = convert_state_dict(hf_model.state_dict())
    from_legacy = convert_state_dict(legacy)
    assert current.keys() == from_legacy.keys()
    assert all(torch.equal(current[k], from_legacy[k]) for k in current)


def test_patch_only_position_embedding_cannot_become_dinov2():
    with pytest.raises(ValueError, match=r"no_embed_class=False"):
        export_state_dict(create_model("vit", img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=4),
                          "hf_dinov2")


def test_swiglu_dinov2_is_refused_with_its_keys():
    torch.manual_seed(0)
    swiglu = transformers.Dinov2Model(transformers.Dinov2Config(**CONFIG, use_swiglu_ffn=True))
    with pytest.raises(ValueError, match=r"no counterpart.*mlp\.(down|gate|up)_proj"):
        convert_state_dict(swiglu.state_dict())
