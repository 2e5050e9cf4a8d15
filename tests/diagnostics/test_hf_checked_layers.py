"""Every layer class whose reading by discovery's generic layouts is marked checked
(``diagnostics.hf_layer_layouts.CHECKED_GENERIC_LAYERS``) is checked here: built tiny from its model type at the
config's defaults, each discovered block adds its branch outputs up to what it does (``y = x + s₁ + s₂``) and the stream
found entering its MLP branch is ``x + s₁``, in float64; so does each layer read through the table of named layouts by
discovery only (CodeGen, BioGPT, XGLM, Apertus, Llama 4, xLSTM, and GLM-4's, Kolibri's, AFMoE's and LFM3's sandwich
norms, the first three of which the name-matched reading misread). Layers the generic layouts match by their names but
misread — OpenAI GPT's Post-LN with GPT-2's names, MiniCPM3's depth-scaled branches, HyperCLOVA X's post-norms — are
found unchecked: the check fails on them, and the per-branch monitor refuses them in one line while the blocks
themselves are still found for the depth analysis. The hybrid stacks (Qwen3-Next, Qwen3.5, OLMo hybrid, Jamba, Bamba,
LFM2, RecurrentGemma, Nemotron-H) are read whole: their linear-attention, state-space and convolution layers are blocks
too. The blocks of one branch (Mamba, Mamba-2, Falcon Mamba, Nemotron-H) add their mixer's output to their input; the
monitor and a training run's diagnostics refuse them in one line."""

from __future__ import annotations

import pytest
import torch

from layerscale.diagnostics import LayerScaleMonitor, find_blocks
from layerscale.diagnostics.hf_layer_layouts import CHECKED_GENERIC_LAYERS

transformers = pytest.importorskip("transformers")

from hf_tiny_models import branch_errors, tiny_causal_lm  # noqa: E402
from source_models import hf_deit, hf_vit  # noqa: E402

#: a model type for every checked decoder layer class (several share one: exaone and internlm3 build Llama's)
CHECKED_TYPES = (
    "arcee", "aria_text", "axk1", "axk2", "bailing_hybrid", "bitnet", "cwm", "deepseek_v2", "deepseek_v3",
    "deepseek_v32", "diffllama", "doge", "emu3", "ernie4_5", "ernie4_5_moe", "exaone4", "exaone_moe", "flex_olmo",
    "flint", "gemma", "gemma2", "gemma3_text", "glm", "glm4_moe", "glm4_moe_lite", "glm_moe_dsa", "gpt2", "gpt_bigcode",
    "gpt_neo", "gpt_oss", "granite", "granite_swa", "granitemoe", "granitemoe_swa", "granitemoeshared", "helium",
    "hunyuan_v1_dense", "hunyuan_v1_moe", "hy_v3", "jais2", "kimi_linear", "laguna", "llama", "mellum",
    "mimo_v2_flash", "minimax_m2", "minimax_m3_vl_text", "ministral", "ministral3", "mistral", "mixtral", "moshi",
    "nanochat", "nemotron", "olmo", "olmo2", "olmo3", "olmoe", "persimmon", "phi3", "phi4_multimodal", "phimoe",
    "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "seed_oss", "smollm3", "solar_open", "starcoder2", "youtu", "zaya",
    # hybrid stacks: one full-attention and one linear-attention (``linear_attn``) layer each
    "qwen3_next", "qwen3_5_text", "qwen3_5_moe_text", "lara_mini", "olmo_hybrid")
#: misread by the generic layouts (audit of 2026-12-07): the check must fail on them, so they stay unchecked
MISREAD_TYPES = ("openai-gpt", "minicpm3", "hyperclovax")
#: blocks of one branch, ``x ← x + mixer(norm(x))`` (Nemotron-H: one block of each mixer kind): read by the depth
#: analysis, refused by the per-branch monitor
ONE_BRANCH_TYPES = ("mamba", "mamba2", "falcon_mamba", "nemotron_h")
LAYERS = {"nemotron_h": 4}  # blocks in the tiny model, where not 2
#: read through the table of named layouts (hf_layer_layouts.HF_DECODER_LAYOUTS) by discovery only; the table's
#: other layers (parallel branches, OPT, BLOOM) are checked in test_hf_decoder_discovery.py with their options
LISTED_TYPES = ("codegen", "biogpt", "apertus", "apertus1p5_text", "llama4_text", "glm4", "kolibri1", "afmoe",
                "jetmoe", "modernbert-decoder", "vaultgemma", "recurrent_gemma", "jamba", "bamba", "lfm2", "lfm3",
                "xglm", "xlstm", *ONE_BRANCH_TYPES)
TOKENS = torch.randint(3, 60, (2, 10), generator=torch.Generator().manual_seed(1))
TOLERANCE = 1e-10


def _layer_classes(probes) -> set[str]:
    return {type(probe.module).__name__ for probe in probes}


@pytest.mark.parametrize("model_type", CHECKED_TYPES + LISTED_TYPES)
def test_a_checked_layer_adds_its_branches_up_to_its_output(model_type):
    _, model = tiny_causal_lm(model_type)
    probes = find_blocks(model)
    assert len(probes) == LAYERS.get(model_type, 2) and all(probe.checked for probe in probes)
    for y_error, stream_error, smallest in branch_errors(probes, lambda: model(TOKENS, use_cache=False)):
        assert y_error < TOLERANCE and stream_error < TOLERANCE and smallest > 1e-6


@pytest.mark.parametrize("build", [hf_vit, hf_deit])
def test_a_checked_vision_layer_adds_its_branches_up_to_its_output(build):
    model = build(layers=2).double().eval()
    probes = find_blocks(model)
    assert _layer_classes(probes) <= CHECKED_GENERIC_LAYERS and all(probe.checked for probe in probes)
    pixels = torch.randn(2, 1, 8, 8, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    for y_error, stream_error, smallest in branch_errors(probes, lambda: model(pixels)):
        assert y_error < TOLERANCE and stream_error < TOLERANCE and smallest > 1e-6


def test_every_checked_class_is_built_by_one_of_the_checked_types():
    built = set()
    for model_type in CHECKED_TYPES:
        with torch.device("meta"):
            built |= _layer_classes(find_blocks(tiny_causal_lm(model_type)[1]))
    assert CHECKED_GENERIC_LAYERS - {"ViTLayer", "DeiTLayer"} == built


@pytest.mark.parametrize("model_type", MISREAD_TYPES)
def test_a_layer_the_generic_layouts_misread_is_found_unchecked_and_the_monitor_refuses_it(model_type):
    _, model = tiny_causal_lm(model_type)
    probes = find_blocks(model)
    assert len(probes) == 2 and not any(probe.checked for probe in probes)  # the blocks are found, unchecked
    errors = branch_errors(probes, lambda: model(TOKENS, use_cache=False))
    assert max(max(y_error, stream_error) for y_error, stream_error, _ in errors) > 1e-3  # and indeed misread
    with pytest.raises(ValueError) as caught:
        LayerScaleMonitor(model)
    message = str(caught.value)
    assert "\n" not in message and type(probes[0].module).__name__ in message
    assert "never checked" in message and "depth analysis" in message


@pytest.mark.parametrize("model_type", ONE_BRANCH_TYPES)
def test_the_monitor_refuses_a_block_of_one_branch_in_one_line(model_type):
    _, model = tiny_causal_lm(model_type)
    probes = find_blocks(model)
    assert all(len(probe.branches) == 1 for probe in probes)
    with pytest.raises(ValueError) as caught:
        LayerScaleMonitor(model)
    message = str(caught.value)
    assert "\n" not in message and type(probes[0].module).__name__ in message
    assert "one residual branch" in message and "depth analysis" in message


@pytest.mark.parametrize("model_type, off", [("llama", None), ("minicpm3", "MiniCPM3DecoderLayer's branch reading is "
                                                                          "not checked"),
                                             ("mamba", "MambaBlock's blocks have one branch")])
def test_training_a_users_model_turns_the_diagnostics_off_for_a_layer_it_cannot_read(tmp_path, capsys, model_type,
                                                                                    off):
    from layerscale.train.records.metrics_log import read_metrics
    from layerscale.train.user_model import run_user_model

    _, model = tiny_causal_lm(model_type)
    data = [(TOKENS[0, :8], TOKENS[1, :8])] * 8

    def loss(output, target):
        return torch.nn.functional.cross_entropy(output.logits.flatten(0, 1), target.flatten())

    run_user_model(model.float().train(), data, config={"optim": {"epochs": 1}, "run": {"progress": "log"},
                                                        "diagnostics": {"every": 1}, "data": {"batch_size": 4}},
                   out=tmp_path / "run", loss_fn=loss)
    printed = capsys.readouterr().out
    records = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["split"] == "diagnostics"]
    assert bool(records) is (off is None)
    if off is None:
        assert "diagnostics off" not in printed
    else:
        assert f"diagnostics off ({off})" in printed


@pytest.mark.parametrize("model_type", ["qwen3_next", "qwen3_5_text", "olmo_hybrid", "jamba", "bamba", "lfm2",
                                        "recurrent_gemma", "nemotron_h"])
def test_the_depth_analysis_reads_every_layer_of_a_hybrid_stack(model_type):
    """Its linear-attention, state-space or convolution layers are blocks too (one of each kind in the tiny stack):
    the stack is chained, so the analysis takes it (it refused a stack with those layers missing as not chained)."""
    from layerscale.analysis.removal.streams import find_block_stack

    _, model = tiny_causal_lm(model_type)
    stack = find_block_stack(model, lambda tokens: model(tokens, use_cache=False).logits)
    mixers = {type(probe.branches[0].output_module).__name__ for probe in find_blocks(model)}
    captured = stack.capture(TOKENS)
    depth = LAYERS.get(model_type, 2)
    assert stack.depth == depth and len(captured.streams) == depth + 1 and len(mixers) == depth


def test_every_layer_class_surgery_edits_is_read_by_a_checked_layout():
    """Prune, grow and the retrofit edit these classes; the diagnostics and the analysis of what they write must read
    them by a checked layout (the table of named layouts, or a checked class of the name-matched ones)."""
    from layerscale.diagnostics.hf_layer_layouts import HF_DECODER_LAYOUTS
    from layerscale.surgery.hf.hf_decoder_layers import (HF_DECODER_LAYERS, HF_HYBRID_DECODER_LAYERS,
                                                         HF_MOE_DECODER_LAYERS, HF_POST_NORM_DECODER_LAYERS,
                                                         HF_STATE_SPACE_DECODER_LAYERS)

    edited = {name for table in (HF_DECODER_LAYERS, HF_HYBRID_DECODER_LAYERS, HF_MOE_DECODER_LAYERS,
                                 HF_POST_NORM_DECODER_LAYERS, HF_STATE_SPACE_DECODER_LAYERS) for name in table.values()}
    assert edited - CHECKED_GENERIC_LAYERS - set(HF_DECODER_LAYOUTS) == set()
