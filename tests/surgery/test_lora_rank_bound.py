"""LoRA healing bounds its sizes before allocating (:mod:`layerscale.surgery.healing.lora`): a rank above the
largest ``min(in_features, out_features)`` of the linears it adapts adds nothing (``B A`` cannot have a higher rank)
and is refused in one line naming the value and that largest rank — by ``add_lora`` before it touches the model, and
by ``layerscale prune --heal lora --lora-rank R`` (exit status 2) before any work and before DEST changes; a rank
whose adapters, their gradients and AdamW's moments would not fit this machine's memory is refused alike. The
healing loop refuses a batch size that is no integer >= 1 (a negative one looped forever), and a batch size above the
calibration set uses the set itself: memory follows the data, not the number asked for."""

from __future__ import annotations

import pytest
import torch

from layerscale.analysis.eval_data.evaluation import EvalSet
from layerscale.cli import main
from layerscale.surgery.healing.heal_loop import heal_model
from layerscale.surgery.healing.lora import add_lora, lora_rank_bound
from surgery_models import count_parameters, ours
from source_models import tiny_gpt_folder

HUGE = 1_000_000_000


def _one_line(exc_info, *words):
    text = str(exc_info.value)
    assert "\n" not in text, text
    for word in words:
        assert word in text, text


def test_the_bound_is_the_largest_min_dimension_of_the_adapted_linears():
    assert lora_rank_bound(ours("gpt")) == 32  # every linear of the embed_dim 32 GPT has min(in, out) = 32
    transformers = pytest.importorskip("transformers")
    config = transformers.LlamaConfig(hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                                      num_key_value_heads=2, vocab_size=64, max_position_embeddings=16)
    # k_proj / v_proj map 32 -> 16; q_proj, o_proj and the MLP allow 32: a rank of 32 still adds to those
    assert lora_rank_bound(transformers.LlamaForCausalLM(config)) == 32


@pytest.mark.parametrize("rank", [33, HUGE])
def test_add_lora_refuses_a_rank_past_the_bound_before_touching_the_model(rank):
    model = ours("gpt")
    before = {name: type(module) for name, module in model.named_modules()}
    with pytest.raises(ValueError) as exc:
        add_lora(model, rank)
    _one_line(exc, f"--lora-rank {rank}", "at most 32")
    assert {name: type(module) for name, module in model.named_modules()} == before
    assert count_parameters(model) == count_parameters(ours("gpt"))


def test_add_lora_takes_the_bound_itself():
    pytest.importorskip("peft")
    wrapped = add_lora(ours("gpt"), 32)
    shapes = {tuple(p.shape) for name, p in wrapped.named_parameters() if "lora_A" in name}
    assert shapes == {(32, 32), (32, 128)}


def test_add_lora_refuses_adapters_past_this_machines_memory(monkeypatch):
    from layerscale import machine

    monkeypatch.setattr(machine, "machine_memory_bytes", lambda: 1 << 19)  # 512 KiB
    with pytest.raises(ValueError) as exc:
        add_lora(ours("gpt"), 32)  # 3 blocks x 32 x (128 + 64 + 160 + 160): 49,152 parameters x 4 copies x 4 bytes
    _one_line(exc, "--lora-rank 32", "GiB", "more than this machine's", "lower --lora-rank")


def test_prune_refuses_a_huge_lora_rank_before_any_work_and_keeps_dest(tmp_path, capsys):
    folder, text = tiny_gpt_folder(tmp_path)
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "marker.txt").write_text("keep\n")
    capsys.readouterr()
    assert main(["prune", str(folder), "--blocks", "1", "--data-path", str(text), "--seq-len", "16", "--samples", "4",
                 "--heal-steps", "1", "--heal", "lora", "--lora-rank", str(HUGE), "--out", str(dest), "--force"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and f"--lora-rank {HUGE}" in err and "at most 16" in err, err
    assert "loss" not in captured.out  # refused before the data was read and scored
    assert [p.name for p in dest.iterdir()] == ["marker.txt"]


def _data(n=6, tokens=8):
    gen = torch.Generator().manual_seed(0)
    inputs = torch.randint(0, 256, (n, tokens), generator=gen)
    return EvalSet(inputs, torch.roll(inputs, -1, dims=1))


@pytest.mark.timeout(60)
@pytest.mark.parametrize("batch_size", [0, -1, True, 2.5, "8"])
def test_heal_model_refuses_a_batch_size_that_is_no_integer_at_least_1(batch_size):
    with pytest.raises(ValueError) as exc:
        heal_model(ours("gpt", vocab_size=256), _data(), 1, batch_size=batch_size)
    _one_line(exc, "batch size", repr(batch_size))


def test_a_huge_heal_batch_size_uses_the_calibration_set_itself(monkeypatch):
    model = ours("gpt", vocab_size=256)
    seen = []
    forward = type(model).forward

    def counting(self, x, *args, **kwargs):
        seen.append(x.shape[0])
        return forward(self, x, *args, **kwargs)

    monkeypatch.setattr(type(model), "forward", counting)
    _, result = heal_model(model, _data(6), 2, batch_size=HUGE)
    assert result.steps == 2 and seen == [6, 6]
