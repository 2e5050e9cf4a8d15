"""``LayerScaleTrainer``: a retrofitted GPT-2 trained by the Hugging Face ``Trainer`` keeps every γ out of weight
decay (the plain ``Trainer`` decays them: that is what the adapter is for)."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from layerscale import add_layerscale, param_groups  # noqa: E402
from layerscale.integrations.hf_trainer import LayerScaleTrainer  # noqa: E402

VOCAB = 64


class _Tokens(torch.utils.data.Dataset):
    def __init__(self, n: int = 8, length: int = 12) -> None:
        self.ids = torch.randint(0, VOCAB, (n, length), generator=torch.Generator().manual_seed(0))

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def _gpt2():
    torch.manual_seed(0)
    config = transformers.GPT2Config(n_embd=32, n_layer=3, n_head=2, vocab_size=VOCAB, n_positions=16,
                                     bos_token_id=0, eos_token_id=1)
    return add_layerscale(transformers.GPT2LMHeadModel(config), init_value=1.0)


def _args(tmp_path, **kwargs):
    kwargs.setdefault("max_steps", 2)
    return transformers.TrainingArguments(output_dir=str(tmp_path), per_device_train_batch_size=4,
                                          learning_rate=1e-2, weight_decay=0.1, use_cpu=True, report_to=[],
                                          save_strategy="no", logging_strategy="no", disable_tqdm=True,
                                          dataloader_num_workers=0, **kwargs)


def _groups_of(optimizer, model):
    """parameter name -> weight decay of its optimizer group."""
    ids = {id(p): g["weight_decay"] for g in optimizer.param_groups for p in g["params"]}
    return {name: ids[id(p)] for name, p in model.named_parameters() if id(p) in ids}


def test_the_trainer_keeps_every_gamma_out_of_weight_decay(tmp_path):
    model = _gpt2()
    scales = [n for n, _ in model.named_parameters() if n.endswith(".layer_scale")]
    assert len(scales) == 6  # attn.c_proj and mlp.c_proj in each of 3 blocks
    before = {n: model.get_parameter(n).detach().clone() for n in scales}
    trainer = LayerScaleTrainer(model=model, args=_args(tmp_path), train_dataset=_Tokens())
    result = trainer.train()
    assert result.global_step == 2
    decay = _groups_of(trainer.optimizer, model)
    assert set(decay) == {n for n, p in model.named_parameters() if p.requires_grad}  # every parameter trained
    assert {n: decay[n] for n in scales} == dict.fromkeys(scales, 0.0)
    assert all(not torch.equal(model.get_parameter(n), before[n]) for n in scales)  # γ trained
    # exactly the library's groups: the matrices decay, γ / norms / biases / wpe do not
    ours_decay, ours_no_decay = param_groups(model, 0.1)
    assert {n for n, wd in decay.items() if wd == 0.1} == set(ours_decay["param_names"])
    assert {n for n, wd in decay.items() if wd == 0.0} == set(ours_no_decay["param_names"])
    assert decay["transformer.h.0.attn.c_attn.weight"] == 0.1


def test_the_plain_trainer_would_decay_gamma(tmp_path):
    """Why the adapter exists: transformers' own rule reads only parameter names and LayerNorm modules."""
    model = _gpt2()
    trainer = transformers.Trainer(model=model, args=_args(tmp_path), train_dataset=_Tokens())
    decay = _groups_of(trainer.create_optimizer(), model)
    assert {wd for n, wd in decay.items() if n.endswith(".layer_scale")} == {0.1}


class _OurGPT(torch.nn.Module):
    """A GPT of ours with BHyT, returning the loss the ``Trainer`` reads."""

    def __init__(self) -> None:
        super().__init__()
        from layerscale import create_model

        self.gpt = create_model("gpt", depth=2, embed_dim=32, num_heads=2, vocab_size=VOCAB, block_size=16,
                                residual="bhyt")

    def forward(self, input_ids, labels):
        logits = self.gpt(input_ids[:, :-1])
        return {"loss": torch.nn.functional.cross_entropy(logits.reshape(-1, VOCAB), labels[:, 1:].reshape(-1))}


def test_the_trainer_runs_the_residual_step_hook_as_bhyt_authors_trainer_does(tmp_path, monkeypatch):
    """BHyT's correction c after the last of 4 steps is the one of the trained weights (4 // 50 → every step)."""
    from layerscale.integrations import hf_trainer
    from layerscale.residual.normalization.bhyt import attention_variance_gain

    calls = []
    real = hf_trainer.after_optimizer_step
    monkeypatch.setattr(hf_trainer, "after_optimizer_step", lambda m, s, t: (calls.append((s, t)), real(m, s, t)))
    torch.manual_seed(0)
    model = _OurGPT()
    trainer = LayerScaleTrainer(model=model, args=_args(tmp_path, max_steps=4, gradient_accumulation_steps=2),
                                train_dataset=_Tokens(n=32))
    assert sum(isinstance(c, hf_trainer.ResidualStepCallback) for c in trainer.callback_handler.callbacks) == 1
    trainer.train()
    assert calls == [(1, 4), (2, 4), (3, 4), (4, 4)]  # once per optimizer step, not per micro-batch
    for block in model.gpt.blocks:
        expected = attention_variance_gain(block.attn, 11)
        assert torch.equal(block.norm2.attn_variance_gain, expected)
