"""LoRA healing of Hugging Face GPT-2, whose blocks hold transformers' ``Conv1D`` (``y = x W + b``, ``W`` stored
``(nx, nf)``) and, after ``add_layerscale``, ``LayerScaledConv1D`` (``y = γ ⊙ (x W + b)``) on ``attn.c_proj`` /
``mlp.c_proj``: every one is adapted (``fan_in_fan_out`` set), the ``LayerScaledConv1D`` before γ, and the merge is
exact and restores the original modules and keys. It found no target at all before ("no linear layer inside its
blocks"), so ``layerscale prune --heal lora`` failed on GPT-2 folders."""

from __future__ import annotations

import json

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("peft")

from transformers.pytorch_utils import Conv1D  # noqa: E402

from layerscale import add_layerscale  # noqa: E402
from layerscale.surgery.healing.lora import (ScaledBranch, add_lora, check_lora_rank, lora_rank_bound,  # noqa: E402
                                             lora_targets, merge_lora)
from layerscale.surgery.hf.scaled_conv1d import LayerScaledConv1D  # noqa: E402

LAYERS = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")


def _gpt2(scaled: bool = False):
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=64, n_positions=16, bos_token_id=0,
                                     eos_token_id=0)
    model = transformers.GPT2LMHeadModel(config).eval()
    if scaled:
        model = add_layerscale(model, init_value=0.5)
        with torch.no_grad():
            for name, param in model.named_parameters():
                if name.endswith(".layer_scale"):
                    param.uniform_(0.1, 0.9)  # γ far from 1, so where the update sits matters
    return model


def _tokens(seed: int) -> torch.Tensor:
    return torch.randint(0, 64, (2, 8), generator=torch.Generator().manual_seed(seed))


def _one_adamw_step(wrapped) -> None:
    """One AdamW step of the adapters on random tokens: ``B`` leaves zero, so the adapters change the function."""
    params = [p for p in wrapped.parameters() if p.requires_grad]
    assert params and all("lora_" in n for n, p in wrapped.named_parameters() if p.requires_grad)
    optimizer = torch.optim.AdamW(params, lr=1e-2, weight_decay=0.0)
    wrapped.train()
    tokens = _tokens(1)
    wrapped(tokens, labels=tokens).loss.backward()
    optimizer.step()
    wrapped.eval()
    assert all(p.abs().max() > 0 for n, p in wrapped.named_parameters() if "lora_B" in n)


def _trained_and_merged(wrapped):
    """``(merged model, adapted logits)`` after one adapter step; the merged model computes the adapted one."""
    _one_adamw_step(wrapped)
    tokens = _tokens(2)
    with torch.no_grad():
        adapted = wrapped(tokens).logits
        merged = merge_lora(wrapped).eval()
        assert torch.allclose(merged(tokens).logits, adapted, atol=1e-5)
    return merged, adapted


def _lora_layers(wrapped):
    return {name: module for name, module in wrapped.named_modules() if hasattr(module, "lora_A")
            and "default" in getattr(module, "lora_A", {})}


def test_plain_gpt2_adapts_every_conv1d_and_merges_exactly_into_conv1d(recwarn):
    base = _gpt2()
    keys = sorted(base.state_dict())
    assert lora_targets(base) == [f"transformer.h.{i}.{layer}" for i in range(2) for layer in LAYERS]
    wrapped = add_lora(base, rank=4)
    assert not [w for w in recwarn if "fan_in_fan_out" in str(w.message)]  # set explicitly: peft rewrote nothing
    config = wrapped.peft_config["default"]
    assert config.fan_in_fan_out is True
    assert sorted(config.target_modules) == sorted(f"transformer.h.{i}.{layer}" for i in range(2) for layer in LAYERS)
    layers = _lora_layers(wrapped)
    assert len(layers) == 8 and all(m.fan_in_fan_out and isinstance(m.base_layer, Conv1D) for m in layers.values())
    merged, adapted = _trained_and_merged(wrapped)
    with torch.no_grad():
        assert not torch.allclose(_gpt2()(_tokens(2)).logits, adapted, atol=1e-3)  # the step changed the function
    assert type(merged) is transformers.GPT2LMHeadModel
    for block in merged.transformer.h:
        assert all(type(block.get_submodule(layer)) is Conv1D for layer in LAYERS)
    assert sorted(merged.state_dict()) == keys
    assert not any("lora" in name for name, _ in merged.named_modules())


def test_layer_scaled_gpt2_adapts_before_gamma_and_merges_back_into_layer_scaled_conv1d():
    base = _gpt2(scaled=True)
    keys = sorted(base.state_dict())
    gammas = {n: p for n, p in base.named_parameters() if n.endswith(".layer_scale")}
    values = {n: p.detach().clone() for n, p in gammas.items()}
    assert len(gammas) == 4
    wrapped = add_lora(base, rank=4)
    assert len([m for m in wrapped.modules() if isinstance(m, ScaledBranch)]) == 4
    assert not [m for m in wrapped.modules() if isinstance(m, LayerScaledConv1D)]
    targets = wrapped.peft_config["default"].target_modules
    assert len([n for n in targets if n.endswith((".attn.c_proj.linear", ".mlp.c_proj.linear"))]) == 4
    assert len(targets) == 8 and wrapped.peft_config["default"].fan_in_fan_out is True
    merged, _ = _trained_and_merged(wrapped)
    assert sorted(merged.state_dict()) == keys  # LayerScaledConv1D again: its γ keys, no adapter keys
    for block in merged.transformer.h:
        assert type(block.attn.c_proj) is LayerScaledConv1D and type(block.mlp.c_proj) is LayerScaledConv1D
        assert type(block.attn.c_attn) is Conv1D and type(block.mlp.c_fc) is Conv1D
    for name, param in merged.named_parameters():
        if name.endswith(".layer_scale"):
            assert param is gammas[name] and torch.equal(param.detach(), values[name])  # the same γ, untouched


def test_the_naive_merge_of_an_adapter_after_gamma_is_not_the_adapted_model():
    """What the split avoids: peft refuses an unsplit ``LayerScaledConv1D``; made to accept it (as a custom
    module), its adapter sits after γ and ``merge_and_unload`` puts it into ``W`` under γ — another function. The
    tolerance of the test above tells the two apart."""
    from peft import LoraConfig, get_peft_model
    from peft.tuners.lora.layer import Linear as LoraLinear

    names = [f"transformer.h.{i}.{layer}" for i in range(2) for layer in ("attn.c_proj", "mlp.c_proj")]
    with pytest.raises(ValueError, match="not supported"):
        get_peft_model(_gpt2(scaled=True), LoraConfig(r=4, target_modules=names, fan_in_fan_out=True))
    base = _gpt2(scaled=True)
    for name in names:
        layer = base.get_submodule(name)
        layer.in_features, layer.out_features = layer.nx, layer.nf
    config = LoraConfig(r=4, lora_alpha=8.0, lora_dropout=0.0, target_modules=names, fan_in_fan_out=True)
    if not hasattr(config, "_register_custom_module"):
        pytest.skip("this peft has no custom-module registration")
    config._register_custom_module({LayerScaledConv1D: LoraLinear})
    wrapped = get_peft_model(base, config)
    _one_adamw_step(wrapped)
    tokens = _tokens(2)
    with torch.no_grad():
        adapted = wrapped(tokens).logits
        naive = wrapped.merge_and_unload().eval()(tokens).logits
    assert not torch.allclose(naive, adapted, atol=1e-3), (naive - adapted).abs().max()


@pytest.mark.parametrize("scaled", [False, True])
def test_check_lora_rank_refuses_a_rank_above_min_nx_nf(scaled):
    model = _gpt2(scaled)
    assert lora_rank_bound(model) == 32  # min(nx, nf) of c_attn 32x96, c_proj 32x32, c_fc 32x128, mlp.c_proj 128x32
    assert check_lora_rank(model, 32) == 32
    before = {name: type(module) for name, module in model.named_modules()}
    for call in (check_lora_rank, add_lora):
        with pytest.raises(ValueError) as exc:
            call(model, 33)
        text = str(exc.value)
        assert "\n" not in text and "--lora-rank 33" in text and "at most 32" in text, text
    assert {name: type(module) for name, module in model.named_modules()} == before


def test_the_bound_reads_nx_and_nf():
    model = _gpt2()
    for block in model.transformer.h:  # narrow every layer's input to 8 (nx): the bound follows nx, not nf
        for layer in LAYERS:
            conv = block.get_submodule(layer)
            conv.nx, conv.weight = 8, torch.nn.Parameter(conv.weight.detach()[:8].clone())
    assert lora_rank_bound(model) == 8
    with pytest.raises(ValueError, match="at most 8"):
        check_lora_rank(model, 9)


def test_blocks_mixing_linear_and_conv1d_are_refused_in_one_line_untouched():
    model = _gpt2()
    model.transformer.h[0].mlp.c_fc = torch.nn.Linear(32, 128)
    before = {name: type(module) for name, module in model.named_modules()}
    for call in (check_lora_rank, add_lora):
        with pytest.raises(ValueError) as exc:
            call(model, 4)
        text = str(exc.value)
        assert "\n" not in text and "mix 1 nn.Linear and 7 transformers Conv1D" in text, text
    assert {name: type(module) for name, module in model.named_modules()} == before


def test_heal_model_heals_gpt2_with_lora():
    from layerscale.analysis.eval_data.evaluation import EvalSet
    from layerscale.surgery.healing.heal_loop import heal_model

    model = _gpt2(scaled=True)
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    inputs = torch.randint(0, 64, (6, 8), generator=torch.Generator().manual_seed(3))
    healed, result = heal_model(model, EvalSet(inputs, torch.roll(inputs, -1, dims=1)), 2, lr=1e-2, method="lora",
                                lora_rank=4, batch_size=3)
    assert result.steps == 2 and result.method == "lora"
    after = healed.state_dict()
    assert sorted(after) == sorted(before)
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed == {f"transformer.h.{i}.{layer}.weight" for i in range(2) for layer in LAYERS}


def test_prune_heals_a_gpt2_folder_with_lora(tmp_path, capsys):
    pytest.importorskip("tokenizers")
    from layerscale.cli import main
    from source_models import corpus_lines, gpt2, hf_folder, tokenizer_vocab, train_bpe_tokenizer, write_text

    lines = corpus_lines(120)
    tokenizer = train_bpe_tokenizer(tmp_path / "tokenizer", lines)
    source = hf_folder(tmp_path / "gpt2", gpt2(tokenizer_vocab(tokenizer), layers=3), tokenizer)
    corpus = write_text(tmp_path / "corpus.txt", lines)
    dest = tmp_path / "healed"
    assert main(["prune", str(source), "--blocks", "1", "--data-path", str(corpus), "--seq-len", "16", "--samples",
                 "8", "--heal-steps", "2", "--heal", "lora", "--lora-rank", "4", "--heal-lr", "1e-2",
                 "--heal-batch-size", "4", "--out", str(dest)]) == 0, capsys.readouterr().err
    assert "healed 2 steps" in capsys.readouterr().out
    assert json.loads((dest / "config.json").read_text())["layerscale_surgery"]["heal"] == "lora"
    written = transformers.AutoModelForCausalLM.from_pretrained(dest)
    assert len(written.transformer.h) == 2 and type(written.transformer.h[0].attn.c_proj) is Conv1D
