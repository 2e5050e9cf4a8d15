"""add_layerscale / fold_layerscale on Hugging Face causal LMs built from configs (GPT-2, Llama, Mistral, Qwen2):
identity at γ = 1, trainable γ outside weight decay, save_pretrained round trip, folding back to the original
architecture, and the diagnostics monitor finding the blocks."""

from __future__ import annotations

import json
import pickle
import warnings

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("safetensors")

from layerscale import add_layerscale, fold_layerscale, param_groups  # noqa: E402
from layerscale.diagnostics import LayerScaleMonitor  # noqa: E402
from layerscale.integrations.hf_causal_lm import from_pretrained_with_layerscale  # noqa: E402

VOCAB = 64
_LLAMA_LIKE = dict(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                   num_key_value_heads=2, vocab_size=VOCAB, max_position_embeddings=16, bos_token_id=0,
                   eos_token_id=1)


def _build(family: str):
    torch.manual_seed(0)
    if family == "gpt2":
        config = transformers.GPT2Config(n_embd=32, n_layer=2, n_head=2, vocab_size=VOCAB, n_positions=16,
                                         bos_token_id=0, eos_token_id=1)
        return transformers.GPT2LMHeadModel(config).eval()
    cls = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
           "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM),
           "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM)}[family]
    return cls[1](cls[0](**_LLAMA_LIKE)).eval()


FAMILIES = ["gpt2", "llama", "mistral", "qwen2"]
SCALED_OUTPUTS = {"gpt2": ("attn.c_proj", "mlp.c_proj"), "llama": ("self_attn.o_proj", "mlp.down_proj")}


def _tokens():
    return torch.randint(0, VOCAB, (2, 8), generator=torch.Generator().manual_seed(1))


def _randomize_scales(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("layer_scale"):
                p.copy_(0.5 + torch.rand_like(p))


@pytest.mark.parametrize("family", FAMILIES)
def test_identity_at_one_and_trainable_scales(family):
    model = _build(family)
    x = _tokens()
    with torch.no_grad():
        before = model(x).logits
    add_layerscale(model, init_value=1.0)
    scales = [n for n, _ in model.named_parameters() if n.endswith(".layer_scale")]
    assert len(scales) == 4  # two branches × two layers
    suffixes = SCALED_OUTPUTS["gpt2" if family == "gpt2" else "llama"]
    assert all(any(n.endswith(f"{s}.layer_scale") for n in scales) for s in suffixes)
    with torch.no_grad():
        assert (model(x).logits - before).abs().max().item() <= 1e-6
    model.train()
    model(x, labels=x).loss.backward()
    grads = {n: p.grad for n, p in model.named_parameters() if n.endswith(".layer_scale")}
    assert all(g is not None and g.abs().sum() > 0 for g in grads.values())
    decay, no_decay = param_groups(model, 0.1)
    assert set(scales) <= set(no_decay["param_names"]) and not set(scales) & set(decay["param_names"])


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_save_pretrained_round_trip_keeps_the_scales(tmp_path, family):
    model = add_layerscale(_build(family), init_value=1e-2)
    _randomize_scales(model)
    x = _tokens()
    with torch.no_grad():
        expected = model(x).logits
    model.save_pretrained(tmp_path)
    from safetensors import safe_open

    with safe_open(str(tmp_path / "model.safetensors"), framework="pt") as handle:
        saved = {k for k in handle.keys() if k.endswith("layer_scale")}
    assert saved == {n for n, _ in model.named_parameters() if n.endswith("layer_scale")}  # names unchanged
    loaded = from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path).eval()
    assert type(loaded) is type(model)
    for name, param in model.named_parameters():
        torch.testing.assert_close(loaded.get_parameter(name), param, rtol=0, atol=0)
    with torch.no_grad():
        torch.testing.assert_close(loaded(x).logits, expected, rtol=0, atol=0)
    # a loader without the scales would silently lose them, so the saved config marks them (see the tests below)
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == f"{family}_layerscale"
    assert loaded.config.model_type == f"{family}_layerscale"  # loaded with γ: still marked
    fold_layerscale(loaded)
    assert loaded.config.model_type == family
    assert not {"layerscale_loader", "layerscale_plain_load_guard"} & set(loaded.config.to_dict())


def _saved_with_scales(tmp_path, family):
    model = add_layerscale(_build(family), init_value=1e-2)
    _randomize_scales(model)
    model.save_pretrained(tmp_path)
    return model


@pytest.mark.parametrize("family", FAMILIES)
def test_transformers_auto_classes_load_a_folder_with_scales_exactly(tmp_path, family):
    """Importing layerscale.integrations.hf_causal_lm (done above) registers the marked types with transformers."""
    model = _saved_with_scales(tmp_path, family)
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    assert config.model_type == f"{family}_layerscale"
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert isinstance(loaded, type(model)) and type(loaded).__name__ == f"LayerScale{type(model).__name__}"
    assert loaded.state_dict().keys() == model.state_dict().keys()
    for name, param in model.named_parameters():
        torch.testing.assert_close(loaded.get_parameter(name), param, rtol=0, atol=0)
    x = _tokens()
    with torch.no_grad():
        torch.testing.assert_close(loaded(x).logits, model(x).logits, rtol=0, atol=0)
    built = transformers.AutoModelForCausalLM.from_config(config)  # a fresh model of the type has its scales
    assert {n for n, _ in built.named_parameters() if n.endswith(".layer_scale")} == \
        {n for n, _ in model.named_parameters() if n.endswith(".layer_scale")}
    again = pickle.loads(pickle.dumps(loaded))
    with torch.no_grad():
        torch.testing.assert_close(again(x).logits, model(x).logits, rtol=0, atol=0)


@pytest.mark.parametrize("family", ["gpt2", "llama", "qwen2"])
def test_a_concrete_class_refuses_a_folder_with_scales(tmp_path, family):
    model = _saved_with_scales(tmp_path, family)
    with pytest.raises(Exception, match=r"holds LayerScale scales \(keys \*\.layer_scale\) that a plain "
                                        r"\w+ would drop") as refused:
        type(model).from_pretrained(tmp_path)
    assert type(refused.value).__name__ == "StrictDataclassFieldValidationError"


def test_without_the_library_transformers_refuses_a_folder_with_scales(tmp_path):
    import subprocess
    import sys

    _saved_with_scales(tmp_path, "llama")
    script = ("import sys, transformers\ntry:\n    transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1])\n"
              "except ValueError as e:\n    print('refused', 'llama_layerscale' in str(e))\n"
              "print('layerscale' in ' '.join(sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["refused", "True", "False"], done.stderr[-2000:]


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_fold_restores_the_original_architecture_and_keys(tmp_path, family):
    original = _build(family)
    keys = {k: v.shape for k, v in original.state_dict().items()}
    types = {n: type(m) for n, m in original.named_modules()}
    model = add_layerscale(_build(family), init_value=1e-2)
    _randomize_scales(model)
    x = _tokens()
    with torch.no_grad():
        expected = model(x).logits
    fold_layerscale(model)
    assert {k: v.shape for k, v in model.state_dict().items()} == keys
    assert {n: type(m) for n, m in model.named_modules()} == types
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, expected, rtol=1e-5, atol=1e-5)
    assert model.config.model_type == family  # no γ left: the model's own type again
    model.save_pretrained(tmp_path)
    plain = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()  # an ordinary checkpoint now
    with torch.no_grad():
        torch.testing.assert_close(plain(x).logits, expected, rtol=1e-5, atol=1e-5)
    assert from_pretrained_with_layerscale(type(model), tmp_path).state_dict().keys() == keys.keys()


@pytest.mark.parametrize("family", ["gpt2", "llama"])
def test_monitor_finds_the_decoder_layers_and_their_scales(family):
    model = add_layerscale(_build(family), init_value=0.25).train()
    monitor = LayerScaleMonitor(model, every=1)
    assert len(monitor.block_names) == 2
    monitor.begin_step(0)
    model(_tokens(), labels=_tokens()).loss.backward()
    monitor.after_backward()
    record = monitor.end_step()
    for block in record["blocks"]:
        for branch in ("attn", "mlp"):
            stats = block[branch]
            assert stats["scale_mean"] == pytest.approx(0.25) and stats["scale_kind"] == "channel"
            assert stats["ratio"] > 0 and stats["stream_in_rms"] > 0
        assert block["grad_norm"] > 0


def test_errors_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="does not recognise the residual blocks of Linear"):
        add_layerscale(torch.nn.Linear(2, 2))
    with pytest.raises(FileNotFoundError, match="no model.safetensors"):
        from_pretrained_with_layerscale(transformers.AutoModelForCausalLM, tmp_path)


def test_a_marked_model_still_runs_generates_and_pickles():
    model = add_layerscale(_build("llama"), init_value=1.0)
    assert model.config.model_type == "llama_layerscale"
    x = _tokens()
    with torch.no_grad():
        assert model.generate(x[:, :3], max_new_tokens=2, do_sample=False).shape == (2, 5)
    again = pickle.loads(pickle.dumps(model))
    with torch.no_grad():
        torch.testing.assert_close(again(x).logits, model(x).logits, rtol=0, atol=0)


def test_add_layerscale_without_init_value_warns_on_a_language_model():
    with pytest.warns(UserWarning, match=r"no init_value given, so γ starts at .* usually wants init_value=1.0"):
        add_layerscale(_build("gpt2"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        add_layerscale(_build("gpt2"), init_value=1.0)


def test_an_older_transformers_is_refused_before_any_scale_is_added(monkeypatch):
    """transformers < 5.9 would load a saved folder without γ through a concrete class: refused in one line."""
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2, num_attention_heads=2))
    import layerscale.surgery.hf.hf_layerscale_config as marking

    monkeypatch.setattr(marking, "installed_transformers", lambda: "4.46.3")
    with pytest.raises(ImportError, match=r"needs transformers>=5\.9 \(found 4\.46\.3") as refused:
        add_layerscale(model, init_value=0.1)
    assert "\n" not in str(refused.value)
    assert not [n for n, _ in model.named_parameters() if n.endswith(".layer_scale")]  # refused before any change
