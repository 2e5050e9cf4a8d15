"""The worked example's corpus and tokenizer (docs/results/llama-prune/DESIGN.md): Debian's ``fortunes`` package,
split by fortune into training, validation and held-out text, and a byte-level BPE trained with the ``tokenizers``
library on the training text only.

Each fortune file is a list of entries separated by lines holding a single ``%`` (the strfile format, fortune(6)).
Entry ``i`` in the order of sorted file names, then file order, goes to the held-out text when ``i % 10 == 0``, to
validation when ``i % 10 == 1``, to training otherwise. The held-out text is what ``layerscale prune`` reads: its
first half of windows calibrates (scores, chooses, heals), its second half judges.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

FORTUNES = Path("/usr/share/games/fortunes")
PACKAGE = "fortunes"
VOCAB_SIZE = 2048
SPLITS = ("train", "validation", "heldout")


def fortune_entries(folder: Path = FORTUNES) -> list[str]:
    """Every entry of every regular fortune file in ``folder`` (links and the ``.dat`` indexes skipped), in order."""
    entries = []
    for path in sorted(folder.iterdir()):
        if path.is_symlink() or not path.is_file() or path.suffix == ".dat":
            continue
        text = path.read_text(encoding="utf-8", errors="strict")
        block: list[str] = []
        for line in text.splitlines():
            if line.strip() == "%":
                if block:
                    entries.append("\n".join(block).strip())
                block = []
            else:
                block.append(line)
        if block and "\n".join(block).strip():
            entries.append("\n".join(block).strip())
    return [entry for entry in entries if entry]


def split_entries(entries: list[str]) -> dict[str, list[str]]:
    """``heldout``: ``i % 10 == 0``; ``validation``: ``i % 10 == 1``; ``train``: the rest."""
    splits: dict[str, list[str]] = {name: [] for name in SPLITS}
    for index, entry in enumerate(entries):
        name = "heldout" if index % 10 == 0 else "validation" if index % 10 == 1 else "train"
        splits[name].append(entry)
    return splits


def _write(path: Path, text: str) -> None:
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def build_corpus(out: Path) -> dict:
    """Write ``train.txt``, ``validation.txt``, ``heldout.txt`` (entries joined by a blank line), the tokenizer
    folder ``tokenizer/`` (trained on ``train.txt`` only) and ``corpus.json`` (sizes and SHA-256 of each file)."""
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    out.mkdir(parents=True, exist_ok=True)
    entries = fortune_entries()
    splits = split_entries(entries)
    record: dict = {"package": PACKAGE, "folder": str(FORTUNES), "entries": len(entries), "files": {}}
    for name, items in splits.items():
        _write(out / f"{name}.txt", "\n\n".join(items) + "\n")
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB_SIZE, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  special_tokens=["<|endoftext|>"], show_progress=False)
    bpe.train_from_iterator(splits["train"], trainer)
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|endoftext|>")
    tokenizer.save_pretrained(str(out / "tokenizer"))
    for name in SPLITS:
        data = (out / f"{name}.txt").read_bytes()
        ids = tokenizer(data.decode("utf-8"))["input_ids"]
        record["files"][name] = {"entries": len(splits[name]), "bytes": len(data), "tokens": len(ids),
                                 "sha256": hashlib.sha256(data).hexdigest()}
    record["vocab_size"] = len(tokenizer)
    _write(out / "corpus.json", json.dumps(record, indent=2) + "\n")
    return record
