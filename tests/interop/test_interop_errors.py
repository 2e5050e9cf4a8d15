"""Every conversion problem is one clear error that names the offending keys or values."""

import pytest
import torch

from layerscale import create_model
from layerscale.interop import (
    convert_state_dict, detect_format, export_state_dict, format_of_model, list_formats, load_pretrained_into,
)


@pytest.fixture(scope="module")
def cait_state():
    return create_model("cait", img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2).state_dict()


def test_unknown_format_lists_the_known_ones(cait_state):
    with pytest.raises(ValueError, match=r"unknown checkpoint format 'timmy'; known formats: .*hf_dinov2"):
        convert_state_dict(cait_state, source="timmy")
    with pytest.raises(ValueError, match=r"unknown checkpoint format 'onnx'"):
        convert_state_dict(cait_state, target="onnx")
    assert {"layerscale", "timm_vit", "timm_cait", "deit3_official", "hf_dinov2"} <= set(list_formats())


def test_unrecognisable_keys():
    with pytest.raises(ValueError, match=r"cannot recognise the checkpoint format from its keys \[conv1.weight"):
        detect_format({"conv1.weight": torch.ones(1), "fc.bias": torch.ones(1)})


def test_unexpected_source_keys_are_listed(cait_state):
    foreign = convert_state_dict(cait_state, target="timm_cait")
    foreign["blocks.0.attn.rel_pos"] = torch.zeros(3)
    with pytest.raises(ValueError, match=r"1 key\(s\) have no counterpart .*\[blocks.0.attn.rel_pos\]"):
        convert_state_dict(foreign, source="timm_cait")


def test_keys_without_a_slot_in_the_target_are_listed():
    head_scaled = create_model("vit", img_size=16, patch_size=8, embed_dim=16, depth=1, num_heads=2,
                               residual="layerscale_head")
    with pytest.raises(ValueError, match=r"no slot in the timm_vit format: \[blocks.0.attn.head_scale.gamma\]"):
        export_state_dict(head_scaled, "timm_vit")


def test_mixed_conventions_are_refused(cait_state):
    mixed = convert_state_dict(cait_state, target="timm_cait")
    mixed["blocks.0.ls1.gamma"] = cait_state["blocks.0.ls1.gamma"]
    with pytest.raises(ValueError, match=r"no counterpart .*blocks.0.ls1.gamma"):
        convert_state_dict(mixed, source="timm_cait")


def test_incomplete_qkv_triplet_names_the_missing_part():
    part = {"encoder.layer.0.attention.q_proj.weight": torch.ones(4, 4),
            "encoder.layer.0.attention.k_proj.weight": torch.ones(4, 4)}
    with pytest.raises(ValueError, match=r"v_proj.* missing"):
        convert_state_dict(part, source="hf_dinov2")


def test_load_lists_missing_unexpected_and_mismatched_keys(cait_state):
    model = create_model("cait", img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3)
    broken = dict(cait_state)
    del broken["norm.weight"]
    broken["extra.weight"] = torch.ones(1)
    with pytest.raises(ValueError) as err:
        load_pretrained_into(model, broken, source="layerscale")
    message = str(err.value)
    assert "\n" not in message
    assert "unexpected key(s) [extra.weight]" in message and "missing key(s) [norm.weight]" in message
    assert "head.weight: checkpoint (1000, 16) vs model (3, 16)" in message


def test_failed_load_changes_nothing(cait_state):
    model = create_model("cait", img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"shape mismatch"):
        load_pretrained_into(model, cait_state)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def test_drop_prefix_must_match_something(cait_state):
    with pytest.raises(ValueError, match=r"drop prefix 'classifier.' matches no key"):
        convert_state_dict(cait_state, drop=["classifier."])


def test_models_of_unknown_libraries_have_no_format():
    with pytest.raises(ValueError, match=r"no checkpoint format known for a Sequential"):
        format_of_model(torch.nn.Sequential(torch.nn.Linear(2, 2)))
