"""Depth analysis of every model family of ours under every residual method, of timm and Hugging Face models built
locally with random weights, and the one-line refusals."""

from __future__ import annotations

import json
import math

import pytest
import torch
from torch import nn

from layerscale.analysis import DepthAnalysis, analyze_depth, effective_depth
from layerscale.layers import Block
from layerscale.models.registry import create_model
from layerscale.residual.registry import list_residuals

MULTI_STREAM = {"hc", "hc_static", "mhc", "attnres", "attnres_block"}  # multi-stream residuals, refused by name

IMAGES = torch.randn(12, 1, 8, 8, generator=torch.Generator().manual_seed(0))
LABELS = torch.arange(12) % 5
TOKENS = torch.randint(0, 32, (6, 9), generator=torch.Generator().manual_seed(0))


def _ours(family: str, residual: str) -> tuple[nn.Module, object]:
    torch.manual_seed(0)
    if family == "gpt":
        return create_model("gpt", vocab_size=32, block_size=16, embed_dim=16, depth=2, num_heads=2,
                            residual=residual), TOKENS
    return create_model(family, img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=2,
                        num_heads=2, residual=residual), (IMAGES, LABELS)


def _check_complete(result: DepthAnalysis, depth: int) -> None:
    assert result.depth == depth
    for values in (result.ablation_loss, result.ablation_accuracy, result.angular_distance, result.relative_update):
        assert len(values) == depth and all(math.isfinite(v) for v in values)
    assert len(result.early_exit_loss) == depth + 1
    assert result.early_exit_loss[-1] == pytest.approx(result.clean_loss)
    assert len(result.cka) == depth and all(len(row) == depth for row in result.cka)
    assert 2 <= len(result.summary.lines) <= 3 and result.summary.set_depth <= result.summary.effective_depth
    again = DepthAnalysis.from_dict(json.loads(result.to_json()))
    assert again.to_dict() == result.to_dict()
    assert effective_depth(again) == result.summary.effective_depth
    assert result.to_csv().count("\n") == depth + 1


@pytest.mark.parametrize("residual", list_residuals())
@pytest.mark.parametrize("family", ["vit", "cait", "gpt"])
def test_every_family_of_ours_under_every_residual_method(family, residual):
    model, data = _ours(family, residual)
    if residual in MULTI_STREAM:
        with pytest.raises(ValueError, match=rf"{type(model).__name__}.*{residual!r}") as info:
            analyze_depth(model, data, batch_size=6)
        assert "\n" not in str(info.value)
        return
    training = model.training
    result = analyze_depth(model, data, batch_size=6)
    assert model.training == training  # the mode is restored
    _check_complete(result, 2)
    assert result.residual == residual
    assert result.task == ("language_model" if family == "gpt" else "classification")
    assert bool(result.probe_accuracy) == (family != "gpt")
    # CaiT's class token joins after the main stack: only mean pooling, and the class-attention blocks are head
    assert result.settings["class_token"] == (family == "vit")
    assert all(name.startswith("blocks.") for name in result.block_names)


def test_timm_vit_deit3_and_cait():
    timm = pytest.importorskip("timm")
    small = dict(img_size=8, patch_size=4, in_chans=1, num_classes=5, embed_dim=16, depth=3, num_heads=2)
    for name, extra in (("vit_tiny_patch16_224", {}), ("deit3_small_patch16_224", {"init_values": 1e-2}),
                        ("cait_xxs24_224", {"depth_token_only": 1})):
        model = timm.create_model(name, pretrained=False, **small, **extra).eval()
        result = analyze_depth(model, (IMAGES, LABELS), batch_size=6)
        _check_complete(result, 3)
        assert result.block_names == ["blocks.0", "blocks.1", "blocks.2"]
        assert "block_out/mean" in result.probe_accuracy


def test_hugging_face_gpt2_and_llama_from_tiny_configs():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    gpt2 = transformers.GPT2LMHeadModel(transformers.GPT2Config(
        n_embd=16, n_layer=3, n_head=2, vocab_size=32, n_positions=16)).eval()
    llama = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        hidden_size=16, intermediate_size=32, num_hidden_layers=3, num_attention_heads=2, num_key_value_heads=1,
        vocab_size=32, max_position_embeddings=16)).eval()
    for model, prefix in ((gpt2, "transformer.h."), (llama, "model.layers.")):
        result = analyze_depth(model, TOKENS, batch_size=3)
        _check_complete(result, 3)
        assert result.task == "language_model"
        assert result.block_names == [f"{prefix}{i}" for i in range(3)]
        # the logit lens after the last block is the model itself
        with torch.no_grad():
            logits = model(TOKENS[:, :-1]).logits
        full = torch.nn.functional.cross_entropy(logits.transpose(1, 2), TOKENS[:, 1:]).item()
        assert result.clean_loss == pytest.approx(full, rel=1e-5)


def test_hugging_face_vit_and_dinov2_classifiers():
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    small = dict(hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32, image_size=8,
                 patch_size=4, num_channels=1, num_labels=5)
    for model in (transformers.Dinov2ForImageClassification(transformers.Dinov2Config(**small)).eval(),
                  transformers.ViTForImageClassification(transformers.ViTConfig(**small)).eval()):
        result = analyze_depth(model, (IMAGES, LABELS), batch_size=6)
        _check_complete(result, 2)
        assert result.block_names[0].endswith((".layer.0", ".layers.0"))
        assert result.settings["class_token"] is True
        assert "norm2_in/cls" in result.probe_accuracy


class _MultiStream(nn.Module):
    """A model that runs its blocks on two stacked copies of the stream (batch·2, tokens, width)."""

    residual = "two_streams"

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*[Block(8, 2, index=i + 1, depth=2) for i in range(2)])
        self.head = nn.Linear(8, 5)

    def forward(self, x):
        h = x.flatten(2).transpose(1, 2)[..., :8]
        h = self.blocks(torch.cat([h, h]))
        return self.head(h.view(2, x.shape[0], *h.shape[1:]).sum(0).mean(1))


def test_bad_inputs_are_one_line_errors():
    model, _ = _ours("vit", "layerscale")
    cases = [
        (lambda: analyze_depth(model, (IMAGES[:0], LABELS[:0])), "empty"),
        (lambda: analyze_depth(model, (IMAGES, LABELS + 5)), "has 5 classes"),
        (lambda: analyze_depth(model, (torch.randn(12, 3, 8, 8), LABELS)), r"expected images of shape \(B, 1, 8, 8\)"),
        (lambda: analyze_depth(_ours("gpt", "prenorm")[0], TOKENS + 40), r"token ids must be in \[0, 32\)"),
        (lambda: analyze_depth(model, (IMAGES, LABELS[:5])), "same first dimension"),
        (lambda: analyze_depth(model, (IMAGES, LABELS.float())), "integer"),
        (lambda: analyze_depth(model, (IMAGES, LABELS), batch_size=0), "batch_size"),
        (lambda: analyze_depth(model, (IMAGES, LABELS), tolerance=-1), "tolerance"),
        (lambda: analyze_depth(model, (IMAGES, LABELS), spans="all"), "spans must be one of"),
        (lambda: analyze_depth(model, (IMAGES, LABELS), cka="rbf"), "cka must be one of"),
        (lambda: analyze_depth(model, (IMAGES, LABELS), bootstrap=1), "bootstrap"),
        (lambda: analyze_depth(model, (IMAGES, LABELS), level=1.0), "level"),
        (lambda: analyze_depth(model, "images"), "str"),
        (lambda: analyze_depth(nn.Sequential(nn.Linear(4, 4)), (IMAGES, LABELS)), "cannot analyse Sequential"),
        (lambda: analyze_depth(_MultiStream(), (IMAGES, LABELS)), "'two_streams'.*single residual stream"),
    ]
    for call, message in cases:
        with pytest.raises(ValueError, match=message) as info:
            call()
        assert "\n" not in str(info.value)
    # a language model's bare token ids must be 2-D integers
    gpt, _ = _ours("gpt", "layerscale")
    with pytest.raises(ValueError, match="token ids"):
        analyze_depth(gpt, torch.randn(4, 9))


def test_dataset_and_dataloader_forms_give_the_same_result():
    from torch.utils.data import DataLoader, TensorDataset

    model, _ = _ours("vit", "prenorm")
    reference = analyze_depth(model, (IMAGES, LABELS), batch_size=6)
    for data in (TensorDataset(IMAGES, LABELS), DataLoader(TensorDataset(IMAGES, LABELS), batch_size=5)):
        result = analyze_depth(model, data, batch_size=6)
        assert result.ablation_loss == pytest.approx(reference.ablation_loss, abs=1e-6)
    capped = analyze_depth(model, TensorDataset(IMAGES, LABELS), max_examples=7, batch_size=6)
    assert capped.num_examples == 7


class _InPlaceBlock(Block):
    def forward(self, x):
        return x.add_(self.mlp(self.norm2(x)))


def test_a_block_updating_its_input_in_place_is_refused():
    model, _ = _ours("vit", "prenorm")
    model.blocks[1].__class__ = _InPlaceBlock
    with pytest.raises(ValueError, match=r"block 'blocks.1' returns its input tensor \(an in-place update\)"):
        analyze_depth(model, (IMAGES, LABELS))
