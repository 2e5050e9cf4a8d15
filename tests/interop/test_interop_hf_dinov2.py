"""Hugging Face DINOv2 weights load into our ViT (no_embed_class=False) with equal features, and export back, in
the key names of either transformers layout (before 5.18: attention.attention.query ...; since: q_proj ...)."""

import pytest
import torch

from interop_peers import images, randomize_vectors_
from layerscale import create_model
from layerscale.interop import (
    convert_state_dict, convert_with_report, detect_format, export_state_dict, load_pretrained_into,
)
from layerscale.interop.hf_dinov2 import HF_DINOV2

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


# (transformers >= 5.18, transformers < 5.18): the attention's key names, the only difference between the layouts.
RENAMES = (("attention.q_proj.", "attention.attention.query."), ("attention.k_proj.", "attention.attention.key."),
           ("attention.v_proj.", "attention.attention.value."), ("attention.o_proj.", "attention.output.dense."))


def in_layout(state_dict, layout):
    """``state_dict`` (either layout) with the attention keys of ``layout``: ``"current"`` or ``"legacy"``."""
    out = {}
    for key, value in state_dict.items():
        for current, legacy in RENAMES:
            key = key.replace(legacy, current) if layout == "current" else key.replace(current, legacy)
        out[key] = value
    return out


def test_dinov2_backbone_gives_equal_features(hf_model):
    ours = our_vit()
    assert detect_format(hf_model.state_dict()) == "hf_dinov2"
    report = load_pretrained_into(ours, hf_model.state_dict(), strict=False)
    assert sum(n for label, n in report.counts.items() if label.endswith(" -> blocks.{i}.attn.qkv.{p}")) == 12
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


def test_both_layouts_are_read(hf_model):
    current, legacy = (in_layout(hf_model.state_dict(), layout) for layout in ("current", "legacy"))
    assert "encoder.layer.0.attention.q_proj.weight" in current
    assert "encoder.layer.0.attention.attention.query.weight" in legacy
    from_current, from_legacy = convert_state_dict(current), convert_state_dict(legacy)
    assert from_current.keys() == from_legacy.keys()
    assert all(torch.equal(from_current[k], from_legacy[k]) for k in from_current)


@pytest.mark.parametrize("layout", ["current", "legacy"])
def test_export_writes_the_layout_of_the_target_keys(hf_model, layout):
    target = in_layout(hf_model.state_dict(), layout)
    ours = our_vit()
    load_pretrained_into(ours, target, strict=False)
    exported, report = convert_with_report(ours.state_dict(), "layerscale", "hf_dinov2", target_keys=target.keys())
    assert exported.keys() == target.keys()
    assert all(torch.equal(exported[k], target[k]) for k in target if k != "embeddings.mask_token")
    assert any("transformers < 5.18" in note for note in report.notes) == (layout == "legacy")


def test_export_without_a_target_writes_the_installed_layout(hf_model):
    exported = export_state_dict(our_vit(), "hf_dinov2")
    assert exported.keys() == hf_model.state_dict().keys()
    assert HF_DINOV2.uses_legacy_names(exported) == HF_DINOV2.uses_legacy_names(hf_model.state_dict())


def test_our_weights_load_into_the_installed_dinov2_model_with_equal_features():
    ours = randomize_vectors_(our_vit(), seed=5)
    peer = transformers.Dinov2Model(transformers.Dinov2Config(**CONFIG)).eval()
    load_pretrained_into(peer, ours)
    x = images(seed=3)
    with torch.no_grad():
        torch.testing.assert_close(hf_features(peer, x), ours.forward_features(x), atol=1e-5, rtol=0)


def test_target_keys_mixing_both_layouts_are_refused(hf_model):
    current, legacy = (in_layout(hf_model.state_dict(), layout) for layout in ("current", "legacy"))
    mixed = [k for k in current if not k.startswith("encoder.layer.1.")] + [k for k in legacy
                                                                          if k.startswith("encoder.layer.1.")]
    with pytest.raises(ValueError, match=r"mix the current names \[encoder\.layer\.0\.attention\.\w_proj.* and "
                                         r"those of transformers < 5\.18 \[encoder\.layer\.1\.attention\.attention\."):
        convert_state_dict(our_vit().state_dict(), "layerscale", "hf_dinov2", target_keys=mixed)
    assert HF_DINOV2.uses_legacy_names("dinov2." + k for k in legacy)  # a task model's keys: prefix stripped


def test_patch_only_position_embedding_cannot_become_dinov2():
    with pytest.raises(ValueError, match=r"no_embed_class=False"):
        export_state_dict(create_model("vit", img_size=32, patch_size=8, embed_dim=32, depth=1, num_heads=4),
                          "hf_dinov2")


def test_swiglu_dinov2_is_refused_with_its_keys():
    torch.manual_seed(0)
    swiglu = transformers.Dinov2Model(transformers.Dinov2Config(**CONFIG, use_swiglu_ffn=True))
    # SwiGLU keys: mlp.{gate,up,down}_proj since transformers 5.18, mlp.weights_{in,out} before
    with pytest.raises(ValueError, match=r"no counterpart.*mlp\.((down|gate|up)_proj|weights_(in|out))"):
        convert_state_dict(swiglu.state_dict())
