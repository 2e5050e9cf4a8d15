"""Train one model of the worked example (docs/results/llama-prune/DESIGN.md): a 16-layer Llama
(``transformers.LlamaForCausalLM``) on the BPE-tokenized training text, plain Pre-LN or with LayerScale retrofitted
(:func:`layerscale.add_layerscale`, ε = 0.1, the CaiT rule up to depth 18) before its first step.

AdamW (β = 0.9, 0.95; weight decay 0.1 on matrices only: :func:`layerscale.param_groups` keeps γ, norms and
biases out), linear warm-up then cosine decay to zero, gradient norm clipped at 1. Each step takes ``BATCH``
windows of ``SEQ_LEN + 1`` tokens at offsets drawn from the seed's generator. Validation loss is the mean
next-token loss over every non-overlapping window of the validation text. A run records its training loss at
every step, its validation loss every ``EVAL_EVERY`` steps and at the end, and saves the model folder (weights,
config, tokenizer) for ``layerscale prune``.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path

import torch

from .llama_prune_plan import DEPTH, VARIANTS

WIDTH = 64
HEADS = 2
FFN = 192
SEQ_LEN = 64
BATCH = 16
WARMUP = 100
EVAL_EVERY = 500
WEIGHT_DECAY = 0.1
LAYERSCALE_INIT = 0.1


def token_ids(text_path: Path, tokenizer) -> torch.Tensor:
    return torch.tensor(tokenizer(text_path.read_text(encoding="utf-8"))["input_ids"], dtype=torch.long)


def build_model(variant: str, vocab_size: int, seed: int):
    import transformers

    from layerscale import add_layerscale

    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    config = transformers.LlamaConfig(vocab_size=vocab_size, hidden_size=WIDTH, intermediate_size=FFN,
                                      num_hidden_layers=DEPTH, num_attention_heads=HEADS, num_key_value_heads=HEADS,
                                      max_position_embeddings=SEQ_LEN, tie_word_embeddings=False)
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(config)
    if variant == "layerscale":
        add_layerscale(model, init_value=LAYERSCALE_INIT)
    return model


@torch.no_grad()
def mean_loss(model, ids: torch.Tensor, batch: int = 32) -> float:
    """Mean next-token loss over every non-overlapping window of ``SEQ_LEN + 1`` tokens (equal lengths: the mean of
    window means is the token mean)."""
    was_training = model.training
    model.eval()
    count = (ids.numel() - 1) // SEQ_LEN
    windows = torch.stack([ids[i * SEQ_LEN: i * SEQ_LEN + SEQ_LEN + 1] for i in range(count)])
    total = 0.0
    for start in range(0, count, batch):
        chunk = windows[start: start + batch]
        logits = model(input_ids=chunk[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), chunk[:, 1:].reshape(-1),
                                                 reduction="sum")
        total += float(loss)
    model.train(was_training)
    return total / (count * SEQ_LEN)


def train(variant: str, lr: float, seed: int, steps: int, corpus: Path, out: Path) -> dict:
    """Train one model; write ``out/model`` (a Hugging Face folder with the tokenizer) and ``out/run.json``."""
    import transformers

    from layerscale import param_groups

    torch.set_num_threads(1)
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(corpus / "tokenizer"))
    train_ids = token_ids(corpus / "train.txt", tokenizer)
    validation_ids = token_ids(corpus / "validation.txt", tokenizer)
    model = build_model(variant, len(tokenizer), seed)
    groups = [{"params": g["params"], "weight_decay": g["weight_decay"]}
              for g in param_groups(model, WEIGHT_DECAY)]
    optimizer = torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))

    def factor(step: int) -> float:
        if step < WARMUP:
            return (step + 1) / WARMUP
        return 0.5 * (1.0 + math.cos(math.pi * (step - WARMUP) / max(1, steps - WARMUP)))

    schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, factor)
    generator = torch.Generator().manual_seed(1_000_003 * seed + 17)
    train_losses: list[float] = []
    validation: list[list[float]] = [[0, mean_loss(model, validation_ids)]]
    started = time.perf_counter()
    model.train()
    status = "finished"
    for step in range(steps):
        offsets = torch.randint(0, train_ids.numel() - SEQ_LEN - 1, (BATCH,), generator=generator)
        batch = torch.stack([train_ids[o: o + SEQ_LEN + 1] for o in offsets.tolist()])
        logits = model(input_ids=batch[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
        if not torch.isfinite(loss):
            status = "diverged"
            train_losses.append(float("nan"))
            break
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        train_losses.append(loss.item())
        if (step + 1) % EVAL_EVERY == 0 or step + 1 == steps:
            validation.append([step + 1, mean_loss(model, validation_ids)])
    wall = time.perf_counter() - started
    out.mkdir(parents=True, exist_ok=True)
    record = {"variant": variant, "lr": lr, "seed": seed, "steps": steps, "status": status,
              "validation_loss": validation[-1][1] if status == "finished" else float("nan"),
              "validation": validation, "train_loss": train_losses, "wall_time_s": wall,
              "torch": torch.__version__, "transformers": transformers.__version__}
    if status == "finished":
        model.save_pretrained(str(out / "model"))
        tokenizer.save_pretrained(str(out / "model"))
    temporary = out / "run.json.tmp"
    temporary.write_text(json.dumps(record) + "\n", encoding="utf-8")
    os.replace(temporary, out / "run.json")
    return record
