"""Cost of ``analyze_depth`` on a deep Fashion-MNIST ViT, against one forward pass and the naive ablation.

Run: python benchmarks/bench_analysis.py [--threads 1] [--depth 48] [--width 64] [--examples 1000] [--naive]
     [--criteria gromov,block_influence]

The model is the ``fashion`` study preset's ViT (28×28 images, patch 7: 16 patches + class token, width 64, 4 heads)
at depth 48, with random weights (the cost does not depend on the weights). The evaluation set is the first
``--examples`` images of the Fashion-MNIST test split when its IDX files are installed
(``/usr/share/datasets/fashion-mnist``), else random images of the same shape (the script says which).

Printed: the analysis's wall time and process CPU time (issue 27's target: ≤ 60 s of CPU time on one thread for
depth 48 and 1,000 images, the contiguous n-block removal curve and the bootstrap intervals included; on a shared
machine the CPU time is the steady figure), its ratio to one clean forward pass over the same images (the median
of ``--forward-rounds`` passes before and as many after the analysis, since one pass alone moves by half on a
loaded machine; the cached-suffix ablation should cost about ``L/2`` forwards, the removal curve at most as much
again — usually far less — plus a second clean pass), the block evaluations the removal curve needed, and with ``--naive`` the ratio to
a naive ablation that runs the whole model once per ablated block (``L`` forwards, ablation only: no early exit,
geometry, removal curve, probes, bootstrap or CKA). The default analysis includes the set-variant effective depth
(issue 55: greedy by ablation above 8 blocks; its search and result are printed); ``--criteria`` also times
``analyze_depth(..., criteria=...)``, which removes n = 1 … L − 1 blocks by each named criterion, as a separate
ratio (issue 55's budget — 30 forward passes for the default analysis — does not include it).
"""

from __future__ import annotations

import argparse
import time

import torch
from torch import nn

from layerscale import create_model
from layerscale.analysis import analyze_depth


def evaluation_images(n: int) -> tuple[torch.Tensor, torch.Tensor, str]:
    try:
        from layerscale.data.registry import load_dataset

        test = load_dataset("fashion-mnist").test
        items = [test[i] for i in range(min(n, len(test)))]
        return (torch.stack([x for x, _ in items]), torch.tensor([int(y) for _, y in items]),
                "Fashion-MNIST test split")
    except (FileNotFoundError, ValueError, ImportError) as exc:
        g = torch.Generator().manual_seed(0)
        return (torch.randn(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g),
                f"random 28x28 images (Fashion-MNIST not available: {exc})")


def clocks() -> tuple[float, float]:
    """(wall, process CPU) seconds: on a shared machine only the CPU time is steady enough to compare."""
    return time.perf_counter(), time.process_time()


def since(start: tuple[float, float]) -> tuple[float, float]:
    now = clocks()
    return now[0] - start[0], now[1] - start[1]


def forward_seconds(model: nn.Module, images: torch.Tensor, batch: int) -> tuple[float, float]:
    start = clocks()
    with torch.inference_mode():
        for i in range(0, len(images), batch):
            model(images[i:i + batch])
    return since(start)


def naive_ablation_seconds(model: nn.Module, images: torch.Tensor, labels: torch.Tensor,
                           batch: int) -> tuple[float, float]:
    start = clocks()
    for index in range(len(model.blocks)):
        original = model.blocks[index]
        model.blocks[index] = nn.Identity()
        try:
            with torch.inference_mode():
                for i in range(0, len(images), batch):
                    nn.functional.cross_entropy(model(images[i:i + batch]), labels[i:i + batch])
        finally:
            model.blocks[index] = original
    return since(start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--depth", type=int, default=48)
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--examples", type=int, default=1000)
    parser.add_argument("--batch", type=int, default=250)
    parser.add_argument("--naive", action="store_true", help="also time the naive whole-model ablation")
    parser.add_argument("--criteria", default=None, help="also time the analysis with these criteria compared")
    parser.add_argument("--forward-rounds", type=int, default=3,
                        help="clean forward passes timed before and after the analysis; the median is the unit")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.set_flush_denormal(True)
    images, labels, what = evaluation_images(args.examples)
    torch.manual_seed(0)
    model = create_model("vit", img_size=28, patch_size=7, in_chans=1, num_classes=10, embed_dim=args.width,
                         depth=args.depth, num_heads=4, init_value=0.1).eval()
    print(f"ViT depth {args.depth}, width {args.width}, 17 tokens; {len(images)} images: {what}; "
          f"{args.threads} threads, batch {args.batch}")
    forward_seconds(model, images[:args.batch], args.batch)  # warm-up
    passes = [forward_seconds(model, images, args.batch) for _ in range(args.forward_rounds)]
    start = clocks()
    result = analyze_depth(model, (images, labels), batch_size=args.batch, max_examples=None)
    analysis = since(start)
    passes += [forward_seconds(model, images, args.batch) for _ in range(args.forward_rounds)]
    # the median over passes before and after the analysis: one pass alone moves by half on a loaded machine
    cpu = sorted(p[1] for p in passes)
    forward = (sorted(p[0] for p in passes)[len(passes) // 2], cpu[len(cpu) // 2])
    print(f"  forward passes (CPU s, {len(passes)} before and after the analysis): "
          + " ".join(f"{c:.2f}" for c in cpu))
    print("  seconds: wall / process CPU; ratios from CPU time")
    print(f"  one forward pass (median)       {forward[0]:7.2f} / {forward[1]:7.2f}")
    print(f"  analyze_depth (all measures)    {analysis[0]:7.2f} / {analysis[1]:7.2f}   = "
          f"{analysis[1] / forward[1]:5.1f} forward passes (the cached-suffix ablation alone ≈ L/2 = "
          f"{args.depth / 2:.0f}); wall on {args.threads} idle core(s) ≈ CPU / threads = "
          f"{analysis[1] / args.threads:.1f} s")
    summary = result.summary
    print(f"  set variant: {summary.set_search} by {summary.set_criterion}, D_set = {summary.set_depth} of "
          f"{args.depth} (D_δ = {summary.effective_depth})")
    if args.criteria:
        start = clocks()
        analyze_depth(model, (images, labels), batch_size=args.batch, max_examples=None, criteria=args.criteria)
        compared = since(start)
        print(f"  with --criteria {args.criteria}     {compared[0]:7.2f} / {compared[1]:7.2f}   = "
              f"{compared[1] / forward[1]:5.1f} forward passes ({(compared[1] - analysis[1]) / forward[1]:.1f} for "
              "the comparison)")
    if args.naive:
        naive = naive_ablation_seconds(model, images, labels, args.batch)
        print(f"  naive ablation (L full passes)  {naive[0]:7.2f} / {naive[1]:7.2f}   = "
              f"{naive[1] / forward[1]:5.1f} forward passes; analysis / naive ablation = "
              f"{analysis[1] / naive[1]:.3f}")
    depth = args.depth
    removal_blocks = sum(depth - last for first, last in result.removal_spans if last > first and last < depth)
    print(f"  removal curve: {removal_blocks} block evaluations per batch for its spans (ablation: "
          f"{depth * (depth - 1) // 2}); {result.settings['bootstrap']} bootstrap replicates, "
          f"{result.settings['probe_splits']} probe splits")
    print("  " + "\n  ".join(result.summary.lines))


if __name__ == "__main__":
    main()
