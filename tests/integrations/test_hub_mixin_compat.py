"""Our models as ``huggingface_hub.ModelHubMixin`` users expect them: a flat ``config.json`` both ways,
``from_pretrained`` overrides (``num_classes``, ``img_size``, ``torch_dtype``), ``push_to_hub``; and timm
``CheckpointSaver`` files loading the same weights through both timm paths (item 7 of issue 28)."""

from __future__ import annotations

import json

import pytest
import torch

import layerscale
from layerscale import CaiT, VisionTransformer

huggingface_hub = pytest.importorskip("huggingface_hub")
pytest.importorskip("safetensors")

TINY = dict(img_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=4, num_classes=7)


def _images(size=32):
    return torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))


class HubNativeViT(huggingface_hub.PyTorchModelHubMixin, VisionTransformer):
    """The same constructor, saved and loaded by huggingface_hub's own mixin."""


def test_config_json_is_flat_and_loads_both_ways(tmp_path):
    torch.manual_seed(0)
    ours = VisionTransformer(**TINY).eval()
    ours.save_pretrained(tmp_path / "ours")
    config = json.loads((tmp_path / "ours" / "config.json").read_text())
    assert config["embed_dim"] == 32 and config["architecture"] == "VisionTransformer" and "model_args" not in config
    native = HubNativeViT.from_pretrained(tmp_path / "ours").eval()  # huggingface_hub's loader reads our folder
    torch.testing.assert_close(native(_images()), ours(_images()), rtol=0, atol=0)
    torch.manual_seed(1)
    HubNativeViT(**TINY).save_pretrained(tmp_path / "native")  # huggingface_hub's saver writes, we read
    original = HubNativeViT.from_pretrained(tmp_path / "native").eval()
    assert "architecture" not in json.loads((tmp_path / "native" / "config.json").read_text())
    loaded = VisionTransformer.from_pretrained(tmp_path / "native")  # the class that loads it names it
    torch.testing.assert_close(loaded(_images()), original(_images()), rtol=0, atol=0)


def test_a_foreign_config_without_architecture_is_refused(tmp_path):
    VisionTransformer(**TINY).save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    del config["architecture"]
    (tmp_path / "config.json").write_text(json.dumps({**config, "hidden_size": 32}))
    with pytest.raises(ValueError, match=r"not a VisionTransformer config .*\['hidden_size'\]"):
        VisionTransformer.from_pretrained(tmp_path)


def test_format_1_folders_still_load(tmp_path):
    model = CaiT(**TINY, depth_token_only=1).eval()
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    args = {k: v for k, v in config.items() if k not in ("architecture", "library", "format_version")}
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "CaiT", "library": "torch-layerscale",
                                                      "format_version": 1, "model_args": args}))
    torch.testing.assert_close(CaiT.from_pretrained(tmp_path)(_images()), model(_images()), rtol=0, atol=0)


def test_from_pretrained_overrides(tmp_path):
    torch.manual_seed(0)
    model = VisionTransformer(**TINY).eval()
    model.save_pretrained(tmp_path)
    five = VisionTransformer.from_pretrained(tmp_path, num_classes=5)
    assert five.head.out_features == 5 and five.num_classes == 5
    for key, value in model.state_dict().items():
        if not key.startswith("head."):
            torch.testing.assert_close(five.state_dict()[key], value, rtol=0, atol=0)
    half = VisionTransformer.from_pretrained(tmp_path, torch_dtype=torch.float16)
    assert all(p.dtype == torch.float16 for p in half.parameters())
    assert next(VisionTransformer.from_pretrained(tmp_path, torch_dtype="bfloat16").parameters()).dtype == \
        torch.bfloat16
    larger = VisionTransformer.from_pretrained(tmp_path, img_size=48)
    assert larger.pos_embed.shape == (1, 36, 32) and larger(_images(48)).shape == (2, 7)
    with pytest.raises(ValueError, match="unknown constructor argument.*num_clases.*allowed: img_size"):
        VisionTransformer.from_pretrained(tmp_path, num_clases=5)
    with pytest.raises(ValueError, match=r"model.safetensors: \S+ has shape \(32,?\S*\), the model built with "
                                         r"these overrides needs"):
        VisionTransformer.from_pretrained(tmp_path, embed_dim=64, num_heads=4)
    with pytest.raises(ValueError, match="torch_dtype='int8'"):
        VisionTransformer.from_pretrained(tmp_path, torch_dtype="int8")


def test_push_to_hub_saves_then_uploads_the_folder(tmp_path, monkeypatch):
    calls = {}

    def create_repo(self, repo_id, private=None, exist_ok=False):
        calls["repo"] = (repo_id, private, exist_ok)
        return huggingface_hub.RepoUrl(f"https://huggingface.co/{repo_id}")

    def upload_folder(self, repo_id, folder_path, commit_message, revision=None, create_pr=None):
        calls["files"] = sorted(p.name for p in __import__("pathlib").Path(folder_path).iterdir())
        calls["upload"] = (repo_id, commit_message, revision, create_pr)
        return "https://huggingface.co/me/tiny/commit/abc"

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    monkeypatch.setattr(huggingface_hub.HfApi, "upload_folder", upload_folder)
    model = VisionTransformer(**TINY)
    assert model.push_to_hub("me/tiny", private=True) == "https://huggingface.co/me/tiny/commit/abc"
    assert calls["repo"] == ("me/tiny", True, True)
    assert calls["files"] == ["README.md", "config.json", "model.safetensors"]
    model.save_pretrained(tmp_path / "tiny", push_to_hub=True, repo_id="me/tiny", branch="dev")
    assert calls["upload"][0] == "me/tiny" and calls["upload"][2] == "dev"


def test_push_to_hub_failure_is_one_line(monkeypatch):
    def create_repo(self, **kwargs):
        raise RuntimeError("offline\nno route to host")

    monkeypatch.setattr(huggingface_hub.HfApi, "create_repo", create_repo)
    with pytest.raises(OSError, match=r"could not upload to the Hugging Face Hub repo 'me/tiny' \(RuntimeError: "
                                      r"offline no route to host\)"):
        VisionTransformer(**TINY).push_to_hub("me/tiny")


def test_checkpoint_saver_file_loads_the_ema_weights_through_both_timm_paths(tmp_path):
    timm = pytest.importorskip("timm")
    import timm.utils

    layerscale.register_timm()
    torch.manual_seed(0)
    model = timm.create_model("ls_deit3_small_patch16_224", **TINY)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    ema = timm.utils.ModelEmaV3(model, decay=0.5)
    model(_images()).sum().backward()
    optimizer.step()
    ema.update(model)
    saver = timm.utils.CheckpointSaver(model, optimizer, model_ema=ema, checkpoint_dir=str(tmp_path),
                                       recovery_dir=str(tmp_path), max_history=1)
    saver.save_checkpoint(epoch=0, metric=1.0)
    path = str(tmp_path / "last.pth.tar")
    by_overlay = timm.create_model("ls_deit3_small_patch16_224", pretrained=True, **TINY,
                                   pretrained_cfg_overlay=dict(file=path)).eval()
    by_checkpoint_path = timm.create_model("ls_deit3_small_patch16_224", checkpoint_path=path, **TINY).eval()
    for key, value in ema.module.state_dict().items():  # the EMA weights, not the raw ones, both ways
        torch.testing.assert_close(by_overlay.state_dict()[key], value, rtol=0, atol=0)
        torch.testing.assert_close(by_checkpoint_path.state_dict()[key], value, rtol=0, atol=0)
    assert not torch.equal(ema.module.pos_embed, model.pos_embed)
    report = layerscale.load_pretrained_into(layerscale.create_model("deit3_small_patch16_224", **TINY), path)
    assert "weights found under 'state_dict_ema'" in report.notes


def test_from_pretrained_takes_transformers_dtype_and_hf_layer_scale_init_value(tmp_path):
    torch.manual_seed(0)
    model = VisionTransformer(**TINY).eval()
    model.save_pretrained(tmp_path)
    bf16 = VisionTransformer.from_pretrained(tmp_path, dtype=torch.bfloat16)  # transformers 5's spelling
    assert {p.dtype for p in bf16.parameters()} == {torch.bfloat16}
    assert next(VisionTransformer.from_pretrained(tmp_path, dtype="float16").parameters()).dtype == torch.float16
    same = VisionTransformer.from_pretrained(tmp_path, dtype=torch.bfloat16, torch_dtype="bfloat16")
    assert next(same.parameters()).dtype == torch.bfloat16
    with pytest.raises(ValueError, match=r"dtype=torch.float16 and torch_dtype=torch.bfloat16 disagree"):
        VisionTransformer.from_pretrained(tmp_path, dtype=torch.float16, torch_dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^dtype='int8': expected a floating torch.dtype"):
        VisionTransformer.from_pretrained(tmp_path, dtype="int8")
    VisionTransformer(**TINY).half().save_pretrained(tmp_path / "half")
    assert next(VisionTransformer.from_pretrained(tmp_path / "half", dtype="auto").parameters()).dtype == \
        torch.float16
    # Hugging Face configs' name for the LayerScale initial value (ConvNeXt, BEiT): an override like init_value
    hf_named = VisionTransformer.from_pretrained(tmp_path, layer_scale_init_value=1e-3)
    assert hf_named.hub_config()["init_value"] == 1e-3
    torch.testing.assert_close(hf_named(_images()), model(_images()), rtol=0, atol=0)  # γ still loaded
    with pytest.raises(ValueError, match=r"layer_scale_init_value=0\.001 and init_value=0\.1 disagree"):
        VisionTransformer.from_pretrained(tmp_path, layer_scale_init_value=1e-3, init_value=0.1)


class MyViT(VisionTransformer):
    """A user's subclass: the same constructor."""


class NotedViT(VisionTransformer):
    """A user's subclass whose constructor adds an argument and passes the rest on."""

    def __init__(self, note: str = "none", **kwargs):
        super().__init__(**kwargs)
        self.note = note


def test_a_subclass_loads_its_base_class_save_and_its_own(tmp_path):
    torch.manual_seed(0)
    model = VisionTransformer(**TINY).eval()
    model.save_pretrained(tmp_path / "base")
    mine = MyViT.from_pretrained(tmp_path / "base")
    assert type(mine) is MyViT
    torch.testing.assert_close(mine(_images()), model(_images()), rtol=0, atol=0)
    mine.save_pretrained(tmp_path / "mine")
    assert json.loads((tmp_path / "mine" / "config.json").read_text())["architecture"] == "MyViT"
    assert type(MyViT.from_pretrained(tmp_path / "mine")) is MyViT
    with pytest.raises(ValueError, match="describes a MyViT, not a VisionTransformer"):
        VisionTransformer.from_pretrained(tmp_path / "mine")  # a base class does not build a subclass
    noted = NotedViT(note="mine", **TINY).eval()
    noted.save_pretrained(tmp_path / "noted")
    again = NotedViT.from_pretrained(tmp_path / "noted", num_classes=5)
    assert again.note == "mine" and again.num_classes == 5
    with pytest.raises(ValueError, match="describes a VisionTransformer, not a CaiT"):
        CaiT.from_pretrained(tmp_path / "base")
