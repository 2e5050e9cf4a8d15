"""Model folders for the source-resolver, language-data and healing tests: random-weight timm / Hugging Face models
saved the way their libraries save them, a BPE tokenizer trained inside the test with the ``tokenizers`` library on
a few hundred lines of text, and that text as a plain file and as JSON Lines."""

from __future__ import annotations

import json
import random
from contextlib import contextmanager
from pathlib import Path

import torch

WORDS = ("the model reads a layer block depth scale residual stream token window text train prune grow heal "
         "loss value small large deep network learns each every from into over under with while").split()


def corpus_lines(count: int = 300, seed: int = 0) -> list[str]:
    """``count`` deterministic lines of 6–14 words."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 14))) + "." for _ in range(count)]


def write_text(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_jsonl(path: Path, lines: list[str], field: str = "text") -> Path:
    path.write_text("".join(json.dumps({field: line, "id": i}) + "\n" for i, line in enumerate(lines)),
                    encoding="utf-8")
    return path


def train_bpe_tokenizer(folder: Path, lines: list[str], vocab_size: int = 400) -> Path:
    """A byte-level BPE tokenizer trained on ``lines`` (256 byte symbols, ``<eos>`` and the merges learned up to
    ``vocab_size``), saved as a Hugging Face tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tokenizer.train_from_iterator(lines, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>").save_pretrained(folder)
    return folder


def tokenizer_vocab(folder: Path) -> int:
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(folder / "tokenizer.json")).get_vocab_size(with_added_tokens=True)


def llama(vocab: int, layers: int = 4, hidden: int = 32, positions: int = 64, seed: int = 0):
    import transformers

    torch.manual_seed(seed)
    config = transformers.LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=vocab,
                                      max_position_embeddings=positions, bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(config).eval()


def gpt2(vocab: int, layers: int = 3, hidden: int = 32, positions: int = 64, seed: int = 0):
    import transformers

    torch.manual_seed(seed)
    config = transformers.GPT2Config(n_embd=hidden, n_layer=layers, n_head=2, vocab_size=vocab, n_positions=positions,
                                     bos_token_id=0, eos_token_id=0)
    return transformers.GPT2LMHeadModel(config).eval()


def hf_folder(folder: Path, model, tokenizer: Path | None, *, shard: str | None = None) -> Path:
    """``model.save_pretrained(folder)`` (in shards of ``shard`` when given) with the tokenizer's files beside it."""
    model.save_pretrained(folder, **({"max_shard_size": shard} if shard else {}))
    if tokenizer is not None:
        for path in tokenizer.iterdir():
            (folder / path.name).write_bytes(path.read_bytes())
    return folder


def timm_vit(depth: int = 3, seed: int = 0, name: str = "vit_tiny_patch16_224"):
    """A timm ViT for 8×8 one-channel images of 10 classes (scikit-learn's digits)."""
    import timm

    torch.manual_seed(seed)
    return timm.create_model(name, img_size=8, patch_size=4, in_chans=1, num_classes=10, depth=depth, embed_dim=32,
                             num_heads=2).eval()


def timm_folder(folder: Path, model) -> Path:
    import timm

    timm.models.save_for_hf(model, str(folder), safe_serialization=True)
    return folder


def hf_windows(tokenizer: Path, text: str, seq_len: int, samples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(calibration, evaluation)`` windows computed independently of the library: the ``tokenizers`` library's
    ids of ``text`` without special tokens, cut into windows of ``seq_len``, first half / second half."""
    from tokenizers import Tokenizer

    ids = Tokenizer.from_file(str(tokenizer / "tokenizer.json")).encode(text, add_special_tokens=False).ids
    count = len(ids) // seq_len
    windows = torch.tensor(ids[:count * seq_len]).reshape(count, seq_len)
    half = (count + 1) // 2
    return windows[:half][:samples], windows[half:][:samples]


def hf_loss(model, windows: torch.Tensor) -> float:
    """transformers' own loss, ``model(input_ids, labels=input_ids).loss``, averaged over the windows (each has the
    same number of predicted tokens)."""
    with torch.no_grad():
        return float(torch.stack([model(input_ids=w[None], labels=w[None]).loss for w in windows]).double().mean())


def tiny_gpt_folder(tmp_path: Path) -> tuple[Path, Path]:
    """``(folder, text)``: a 3-block byte-level GPT of ours saved with ``save_pretrained`` (seed 0) and a short
    English text file to read it with, for the command-line tests of ``analyze`` / ``prune``."""
    from layerscale import create_model

    torch.manual_seed(0)
    folder = tmp_path / "gpt"
    create_model("gpt", vocab_size=256, block_size=32, embed_dim=16, depth=3, num_heads=2).save_pretrained(folder)
    text = tmp_path / "text.txt"
    text.write_text("the quick brown fox jumps over the lazy dog. " * 40, encoding="utf-8")
    return folder, text


def hf_vit(layers: int = 3, channels: int = 1, seed: int = 0):
    """A Hugging Face ``ViTForImageClassification`` for 8×8 images of 10 classes (scikit-learn's digits)."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.ViTConfig(image_size=8, patch_size=4, num_channels=channels, hidden_size=32,
                                    num_hidden_layers=layers, num_attention_heads=2, intermediate_size=64,
                                    num_labels=10)
    return transformers.ViTForImageClassification(config).eval()


def hf_deit(layers: int = 3, teacher: bool = False, seed: int = 0):
    """A Hugging Face ``DeiTForImageClassification`` (``teacher``: ``…WithTeacher``, the distillation head too) for
    8×8 one-channel images of 10 classes."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.DeiTConfig(image_size=8, patch_size=4, num_channels=1, hidden_size=32,
                                     num_hidden_layers=layers, num_attention_heads=2, intermediate_size=64,
                                     num_labels=10)
    model_class = (transformers.DeiTForImageClassificationWithTeacher if teacher
                   else transformers.DeiTForImageClassification)
    return model_class(config).eval()


def hf_dinov2(layers: int = 3, seed: int = 0, **backbone):
    """A Hugging Face ``Dinov2ForImageClassification`` for 8×8 one-channel images of 10 classes, its LayerScale
    ``lambda1`` drawn at random (so folding it is not the identity); ``backbone``: ``out_indices`` and the like."""
    import transformers

    torch.manual_seed(seed)
    config = transformers.Dinov2Config(image_size=8, patch_size=4, num_channels=1, hidden_size=32,
                                       num_hidden_layers=layers, num_attention_heads=2, mlp_ratio=2, num_labels=10,
                                       **backbone)
    model = transformers.Dinov2ForImageClassification(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("lambda1"):
                param.uniform_(0.2, 1.5)
    return model


def decoder_layers(model) -> list:
    """A Hugging Face model's decoder layers (``*DecoderLayer``, GPT-J's ``GPTJBlock``, GPT-NeoX's ``GPTNeoXLayer``,
    BLOOM's ``BloomBlock``, MPT's ``MptBlock``, the Mamba family's and Nemotron-H's blocks), in forward order."""
    return [m for m in model.modules() if type(m).__name__.endswith("DecoderLayer")
            or type(m).__name__ in ("GPTJBlock", "GPTNeoXLayer", "BloomBlock", "MptBlock", "MambaBlock",
                                    "Mamba2Block", "FalconMambaBlock", "NemotronHBlock")]


def _with_stream(output, stream: torch.Tensor):
    """A layer's ``output`` with its stream replaced by ``stream``: the tensor itself, or the first entry of the tuple
    a layer such as BLOOM's returns (``(hidden_states, attention weights)``)."""
    return (stream, *output[1:]) if isinstance(output, tuple) else stream


@contextmanager
def skipping_layer(model, skip: int | None):
    """While inside, decoder layer ``skip`` of ``model`` returns its input (the residual stream passes it by: the
    reference a pruned model must equal, written without the block editor); ``None``: no layer skipped."""
    handle = None
    if skip is not None:
        handle = decoder_layers(model)[skip].register_forward_hook(
            lambda module, args, kwargs, out: _with_stream(out, args[0] if args else kwargs["hidden_states"]),
            with_kwargs=True)
    try:
        yield
    finally:
        if handle is not None:
            handle.remove()


def logits_skipping(model, tokens: torch.Tensor, skip: int | None = None) -> torch.Tensor:
    """``model(input_ids=tokens).logits`` without a cache; with ``skip``, that decoder layer skipped
    (:func:`skipping_layer`)."""
    with skipping_layer(model, skip), torch.no_grad():
        return model(input_ids=tokens, use_cache=False).logits


def text_source(root: Path, build, lines: int = 120) -> tuple[Path, Path]:
    """``(folder, corpus)``: ``build(vocab_size)``, a Hugging Face causal LM, saved with a BPE tokenizer trained on
    ``lines`` lines of :func:`corpus_lines`, and those lines as a text file."""
    text = corpus_lines(lines)
    tokenizer = train_bpe_tokenizer(root / "tokenizer", text)
    folder = hf_folder(root / "src", build(tokenizer_vocab(tokenizer)), tokenizer)
    return folder, write_text(root / "corpus.txt", text)


def pruned_folder(model, root: Path, main, blocks: str = "1"):
    """``model`` saved, ``layerscale prune --blocks`` run on it through the CLI's ``main``, and the written folder
    read back: ``(pruned model, transformers' loading info)``."""
    import transformers

    model.save_pretrained(root / "source")
    assert main(["prune", str(root / "source"), "--blocks", blocks, "--out", str(root / "pruned")]) == 0
    return transformers.AutoModelForCausalLM.from_pretrained(root / "pruned", output_loading_info=True)


def assert_healing_moves_weights(source: Path, corpus: Path, root: Path, main, capsys) -> None:
    """``layerscale prune --blocks 1`` of ``source`` with and without three steps of full healing on ``corpus``:
    both folders load with the same keys, and healing changed some weight."""
    import transformers

    plain, healed = root / "plain", root / "healed"
    assert main(["prune", str(source), "--blocks", "1", "--out", str(plain)]) == 0
    assert main(["prune", str(source), "--blocks", "1", "--data-path", str(corpus), "--seq-len", "16", "--samples",
                 "8", "--heal-steps", "3", "--heal", "full", "--heal-lr", "1e-2", "--heal-batch-size", "4", "--out",
                 str(healed)]) == 0
    assert "healed 3 steps" in capsys.readouterr().out
    auto = transformers.AutoModelForCausalLM
    before, after = auto.from_pretrained(plain).state_dict(), auto.from_pretrained(healed).state_dict()
    assert before.keys() == after.keys() and any(not torch.equal(v, after[k]) for k, v in before.items())


def assert_pruned_skips_layer(source, root: Path, main, tokens: torch.Tensor, skip: int = 1):
    """``layerscale prune --blocks skip`` of ``source`` (a Hugging Face causal LM) read back: the same class, every
    key loaded, one layer fewer in the stack and in the config, the logits of ``source`` with that layer skipped
    (bit for bit), and greedy ``generate`` with the KV cache equal to a full recompute. Returns the pruned model."""
    pruned, info = pruned_folder(source, root, main, blocks=str(skip))
    assert type(pruned) is type(source) and not info["missing_keys"] and not info["unexpected_keys"]
    depth = len(decoder_layers(source)) - 1
    assert len(decoder_layers(pruned)) == depth and pruned.config.get_text_config().num_hidden_layers == depth
    assert torch.equal(logits_skipping(pruned.eval(), tokens), logits_skipping(source, tokens, skip=skip))
    cached = pruned.generate(tokens[:1], max_new_tokens=8, do_sample=False, use_cache=True)
    recomputed = pruned.generate(tokens[:1], max_new_tokens=8, do_sample=False, use_cache=False)
    assert torch.equal(cached, recomputed)
    return pruned
