"""How the cost of a training step grows with depth (12 → 1,000 blocks) and with batch size.

For each point: the median time of a training step (forward, backward, AdamW step) and the activation memory — the
bytes still allocated when the forward returns, i.e. everything kept for the backward (exact, from the allocator) —
with activation checkpointing off and on. Model: ViT (LayerScale), 32×32 images, patch 4 (65 tokens), ``--width``
channels, random weights. Writes a CSV and a four-panel plot. Each row also gives the step's FLOPs (forward +
backward, ``FlopCounterMode``), the FLOP rate achieved and the MFU: that rate over the GEMM peak of the run's dtype,
measured at the start in the same process (``mfu.py``).

Run: python benchmarks/bench_scaling.py [--depths 12,24,48,96,192,384,1000] [--batches 1,2,4,8,16,32,64]
     [--width 64] [--batch 8] [--depth 12] [--rounds 3] [--threads 1] [--clock auto|wall|cpu]
     [--device cpu|cuda] [--dtype fp32|bf16]
     [--csv benchmarks/results/scaling.csv] [--plot docs/img/perf_scaling.png]
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import tempfile

import torch
import torch.nn.functional as F

from activation_memory import allocation_profile, autocast_context, parse_dtype, synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, clock_function
from mfu import count_flops, describe_peaks, measure_peaks, mfu

from layerscale import create_model

FIELDS = ["sweep", "depth", "batch", "width", "checkpointing", "step_ms", "activation_mib", "gflop", "gflops_per_s",
          "mfu", "device", "dtype", "threads", "clock"]


def measure(depth: int, batch: int, checkpointing: bool, args, peak: float) -> dict:
    dtype, device, sync = parse_dtype(args.dtype), args.device, synchronizer(args.device)
    autocast = autocast_context(device, dtype)
    torch.manual_seed(0)
    model = create_model("vit", img_size=32, patch_size=4, num_classes=10, embed_dim=args.width, depth=depth,
                         num_heads=args.width // 32, grad_checkpointing=checkpointing).to(device).train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    x = torch.randn(batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (batch,), device=device)

    def forward():
        with autocast():
            return F.cross_entropy(model(x), y)

    clock = clock_function(args.clock)

    def step() -> float:
        start = clock()
        loss = forward()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sync()
        return clock() - start

    step()  # warm-up (optimizer state, lazy initialisation)
    held, _, loss = allocation_profile(forward, device)
    del loss
    flops = count_flops(lambda: forward().backward())
    opt.zero_grad(set_to_none=True)
    seconds = statistics.median(step() for _ in range(args.rounds))
    return {"depth": depth, "batch": batch, "width": args.width, "checkpointing": checkpointing,
            "step_ms": round(seconds * 1e3, 2), "activation_mib": round(held / 2**20, 3),
            "gflop": round(flops / 1e9, 4), "gflops_per_s": round(flops / seconds / 1e9, 2),
            "mfu": round(mfu(flops, seconds, peak), 4), "device": device, "dtype": args.dtype,
            "threads": args.threads, "clock": args.clock}


def write_csv(rows: list[dict], path: str) -> None:
    """Write ``rows`` to ``path`` atomically (temporary file in the same directory, then ``os.replace``)."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
    try:
        with os.fdopen(fd, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=FIELDS)
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def plot(rows: list[dict], path: str, args) -> None:
    try:
        import matplotlib
    except ImportError:
        raise ImportError("the scaling plot needs matplotlib: pip install 'torch-layerscale[plots]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    plain = FuncFormatter(lambda value, _: f"{value:g}")

    fig, axes = plt.subplots(2, 2, figsize=(11, 8), constrained_layout=True)
    panels = [("depth", "step_ms", "time per training step (ms)"),
              ("depth", "activation_mib", "activation memory (MiB)"),
              ("batch", "step_ms", "time per training step (ms)"),
              ("batch", "activation_mib", "activation memory (MiB)")]
    for ax, (sweep, key, ylabel) in zip(axes.flat, panels):
        for checkpointing, style in ((False, dict(color="C0", marker="o", label="checkpointing off")),
                                     (True, dict(color="C3", marker="s", ls="--", label="checkpointing on"))):
            points = sorted((r[sweep], r[key]) for r in rows if r["sweep"] == sweep
                            and r["checkpointing"] == checkpointing)
            if points:
                ax.plot(*zip(*points), **style)
        fixed = f"batch {args.batch}" if sweep == "depth" else f"depth {args.depth}"
        ax.set(xscale="log", yscale="log", xlabel="depth (blocks)" if sweep == "depth" else "batch size",
               ylabel=ylabel, title=f"{ylabel.split(' (')[0]} vs {sweep} ({fixed})")
        ax.set_xticks(sorted({r[sweep] for r in rows if r["sweep"] == sweep}))
        ax.xaxis.set_major_formatter(plain)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(NullFormatter())
        ax.grid(True, which="major", alpha=0.4)
        ax.legend()
    fig.suptitle(f"ViT with LayerScale, width {args.width}, 65 tokens, {args.device} {args.dtype}, "
                 f"{args.threads} thread{'' if args.threads == 1 else 's'}, {args.clock} clock (fwd + bwd + AdamW)")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, suffix=".png")
    os.close(fd)
    try:
        fig.savefig(tmp, dpi=110, format="png")
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    finally:
        plt.close(fig)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="12,24,48,96,192,384,1000")
    parser.add_argument("--batches", default="1,2,4,8,16,32,64")
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--batch", type=int, default=8, help="batch size of the depth sweep")
    parser.add_argument("--depth", type=int, default=12, help="depth of the batch sweep")
    parser.add_argument("--rounds", type=int, default=3)
    add_timing_arguments(parser)
    parser.add_argument("--csv", default="benchmarks/results/scaling.csv")
    parser.add_argument("--plot", default="docs/img/perf_scaling.png")
    args = parser.parse_args()
    if args.width % 32:
        raise ValueError(f"--width must be a multiple of 32 (heads of 32 channels), got {args.width}")
    parse_dtype(args.dtype)
    apply_timing_arguments(args)
    peaks = measure_peaks(args.device, args.clock, synchronizer(args.device))
    peak_name = "bf16" if args.dtype in ("bf16", "fp16") else "fp32"
    print(describe_peaks(peaks) + f"; MFU against the {peak_name} peak")
    rows = []
    print(f"{'sweep':>5s} {'depth':>5s} {'batch':>5s} {'ckpt':>5s} | {'step ms':>9s} {'act. MiB':>9s} | "
          f"{'GFLOP':>8s} {'GFLOP/s':>8s} {'MFU':>6s}")
    points = [("depth", int(d), args.batch) for d in args.depths.split(",")]
    points += [("batch", args.depth, int(b)) for b in args.batches.split(",")]
    for sweep, depth, batch in points:
        for checkpointing in (False, True):
            row = {"sweep": sweep, **measure(depth, batch, checkpointing, args, peaks[peak_name])}
            rows.append(row)
            print(f"{sweep:>5s} {depth:5d} {batch:5d} {str(checkpointing):>5s} | {row['step_ms']:9.1f} "
                  f"{row['activation_mib']:9.2f} | {row['gflop']:8.3f} {row['gflops_per_s']:8.1f} "
                  f"{row['mfu']:6.3f}", flush=True)
    write_csv(rows, args.csv)
    plot(rows, args.plot, args)
    print(f"wrote {args.csv} and {args.plot}")


if __name__ == "__main__":
    main()
