"""Cost of ``layerscale prune`` on a 16-layer Llama over token windows read through its own BPE tokenizer, against
one forward pass over the evaluation windows.

Run: python benchmarks/bench_prune_llama.py [--threads 1] [--depth 16] [--width 128] [--windows 64]
     [--seq-len 256] [--remove 4] [--by gromov,block_influence] [--heal-steps 0]

The text is every regular file of ``/usr/share/common-licenses`` (Debian's ``base-files`` package; sorted, links
skipped), else generated words (the script says which); a byte-level BPE tokenizer (vocabulary 2,000) is trained on
it with the ``tokenizers`` library, and a random-weight ``LlamaForCausalLM`` (``--depth`` layers of width
``--width``, 4 heads of which 2 key/value, MLP 2.75 × width) is saved with it as a Hugging Face folder — the set-up
is not timed. Timed: the whole command (``layerscale.cli.main(["prune", ...])``: reading the folder, tokenizing,
``--windows`` calibration and ``--windows`` evaluation windows of ``--seq-len`` tokens, scoring every criterion of
``--by`` on the calibration windows, the removal table with intervals, the perplexities, writing DEST), as wall time
and process CPU time, and its ratio (from CPU time) to one clean forward pass over the evaluation windows.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from contextlib import redirect_stdout
from io import StringIO
from pathlib import Path

import torch

LICENSES = Path("/usr/share/common-licenses")


def corpus_text() -> tuple[str, str]:
    files = sorted(p for p in LICENSES.iterdir() if p.is_file() and not p.is_symlink()) if LICENSES.is_dir() else []
    if files:
        return "\n\n".join(p.read_text(encoding="utf-8", errors="replace") for p in files), \
            f"{len(files)} files of {LICENSES} (Debian base-files)"
    rng = random.Random(0)
    words = "the model reads a layer block depth scale residual stream token window text".split()
    return " ".join(rng.choice(words) for _ in range(60_000)), "generated words (no Debian licence texts here)"


def clocks() -> tuple[float, float]:
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clocks()
    return now[0] - start[0], now[1] - start[1]


def build(folder: Path, text: str, depth: int, width: int, seq_len: int) -> None:
    import transformers
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer, bpe.decoder = pre_tokenizers.ByteLevel(add_prefix_space=False), decoders.ByteLevel()
    bpe.train_from_iterator(text.splitlines(), trainers.BpeTrainer(
        vocab_size=2000, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False))
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe)
    torch.manual_seed(0)
    config = transformers.LlamaConfig(hidden_size=width, intermediate_size=int(2.75 * width), num_hidden_layers=depth,
                                      num_attention_heads=4, num_key_value_heads=2, vocab_size=len(tokenizer),
                                      max_position_embeddings=seq_len)
    transformers.LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--depth", type=int, default=16)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--windows", type=int, default=64)
    parser.add_argument("--seq-len", type=int, default=256)
    parser.add_argument("--remove", type=int, default=4)
    parser.add_argument("--by", default="gromov,block_influence")
    parser.add_argument("--heal-steps", type=int, default=0)
    parser.add_argument("--batch", type=int, default=8, help="windows per forward pass (default 8)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    import transformers

    from layerscale.analysis.options.data_options import data_request
    from layerscale.analysis.eval_data.source_data import source_data
    from layerscale.cli import main as cli
    from layerscale.sources import read_source

    text, what = corpus_text()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "corpus.txt").write_text(text, encoding="utf-8")
        build(root / "llama", text, args.depth, args.width, args.seq_len)
        source = read_source(root / "llama")
        split = source_data(source, data_request(argparse.Namespace(
            data=None, data_path=str(root / "corpus.txt"), tokenizer=None, seq_len=args.seq_len,
            samples=args.windows, text_field=None, img_size=None), None))
        evaluation = split.evaluation
        print(f"Llama {args.depth} layers, width {args.width}; {what}; {split.lines[0]}; {args.threads} threads, "
              f"transformers {transformers.__version__}")
        model = transformers.AutoModelForCausalLM.from_pretrained(root / "llama").eval()
        with torch.inference_mode():
            model(evaluation.inputs[:args.batch])  # warm-up
            start = clocks()
            for i in range(0, len(evaluation), args.batch):
                model(evaluation.inputs[i:i + args.batch])
            forward = since(start)
        command = ["prune", str(root / "llama"), "--by", args.by, "--remove", str(args.remove), "--data-path",
                   str(root / "corpus.txt"), "--seq-len", str(args.seq_len), "--samples", str(args.windows),
                   "--batch-size", str(args.batch), "--out", str(root / "pruned")]
        if args.heal_steps:
            command += ["--heal-steps", str(args.heal_steps)]
        printed = StringIO()
        start = clocks()
        with redirect_stdout(printed):
            status = cli(command)
        pruned = since(start)
        if status != 0:
            raise SystemExit(f"prune failed with status {status}")
        print("  seconds: wall / process CPU; ratios from CPU time")
        print(f"  one forward pass over the {len(evaluation)} evaluation windows  {forward[0]:7.2f} / "
              f"{forward[1]:7.2f}")
        print(f"  layerscale prune --by {args.by} --remove {args.remove}  {pruned[0]:7.2f} / {pruned[1]:7.2f}   = "
              f"{pruned[1] / forward[1]:5.1f} forward passes")
        for line in printed.getvalue().splitlines():
            if line.startswith(("unpruned:", "pruned:", "removed blocks")):
                print(f"  {line}")


if __name__ == "__main__":
    main()
