"""Inference cost after folding LayerScale: folded model vs the same ViT built without LayerScale, and vs unfolded.

Run: python benchmarks/bench_fold.py [--threads 1] [--depth 12] [--width 192] [--batch 64] [--rounds 30]
Three candidates, interleaved round by round in one process, eval mode under ``torch.inference_mode``:
``plain`` (``residual="prenorm"``), ``unfolded`` (``residual="layerscale"``) and ``folded``
(``fold_layerscale`` of the unfolded model). Prints median forward times and the ratios folded / plain (target
1.00 within noise: folding leaves exactly the plain model's computation) and unfolded / plain, both as the ratio of
medians and as the median of per-round ratios (each round times the three back to back, so a slowdown of a shared
machine hits all three alike; the quartiles of the per-round ratios show how noisy the run was). Also checks that
the folded model's logits equal the unfolded model's to 1e-5 before timing.
"""

from __future__ import annotations

import collections
import statistics
import time

import torch

from common import model_timing_parser, print_table

from layerscale import create_model
from layerscale.surgery import fold_layerscale


def build(residual: str, args) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model("vit", img_size=32, patch_size=4, in_chans=3, num_classes=10, embed_dim=args.width,
                        depth=args.depth, num_heads=args.width // 64, residual=residual, init_value=0.1).eval()


def forward_fn(model: torch.nn.Module, x: torch.Tensor):
    def forward():
        with torch.inference_mode():
            model(x)

    return forward


def main() -> None:
    parser = model_timing_parser(__doc__.splitlines()[0], threads=1, depth=12, width=192, batch=64, rounds=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    plain, unfolded = build("prenorm", args), build("layerscale", args)
    folded = fold_layerscale(unfolded, inplace=False)
    x = torch.randn(args.batch, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        torch.testing.assert_close(folded(x), unfolded(x), atol=1e-5, rtol=0)
    candidates = {"plain (prenorm)": forward_fn(plain, x), "unfolded (layerscale)": forward_fn(unfolded, x),
                  "folded": forward_fn(folded, x)}
    samples = interleaved_samples(candidates, rounds=args.rounds)
    medians = {name: statistics.median(values) for name, values in samples.items()}
    print(f"ViT 32x32/4, width {args.width}, depth {args.depth}, batch {args.batch}, {args.threads} thread(s), "
          f"eval forward, median of {args.rounds} interleaved rounds")
    print_table(medians, "plain (prenorm)")
    plain_ops = operator_counts(plain, x[:1])
    for name, model in (("folded", folded), ("unfolded", unfolded)):
        ops = operator_counts(model, x[:1])
        diff = {op: ops.get(op, 0) - plain_ops.get(op, 0) for op in set(ops) | set(plain_ops)
                if ops.get(op, 0) != plain_ops.get(op, 0)}
        print(f"{name} vs plain, aten operators per forward: {sum(ops.values())} vs {sum(plain_ops.values())}; "
              f"differences: {dict(sorted(diff.items())) or 'none'}")
    base = samples["plain (prenorm)"]
    for name in ("folded", "unfolded (layerscale)"):
        per_round = [t / b for t, b in zip(samples[name], base, strict=True)]
        q1, q2, q3 = statistics.quantiles(per_round, n=4)
        print(f"{name.split()[0]} / plain: ratio of medians {medians[name] / medians['plain (prenorm)']:.3f}, "
              f"median per-round ratio {q2:.3f} (quartiles {q1:.3f}-{q3:.3f})")


def operator_counts(model: torch.nn.Module, x: torch.Tensor) -> dict[str, int]:
    """How many times each aten operator runs in one forward (a noise-free view of the work done)."""
    # TorchDispatchMode sees every aten call; it lives in a private module but is stable and quiet, where the
    # profiler prints its own start/stop lines.
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.counts: collections.Counter[str] = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.counts[str(func.overloadpacket)] += 1
            return func(*args, **(kwargs or {}))

    with torch.inference_mode(), Count() as counter:
        model(x)
    return dict(counter.counts)


def interleaved_samples(candidates, rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """Seconds per call of each candidate in each round; the order rotates every round so that no candidate
    always runs first (warm caches) or last."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    names = list(candidates)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        for name in names[r % len(names):] + names[:r % len(names)]:
            start = time.perf_counter()
            candidates[name]()
            samples[name].append(time.perf_counter() - start)
    return samples


if __name__ == "__main__":
    main()
