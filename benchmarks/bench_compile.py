"""Compile time of ``torch.compile(model)`` (whole) against :func:`layerscale.models.compile_blocks` (regional).

Each measurement runs in its own process with an empty Inductor cache directory and the FX-graph and autograd caches
off, so every compile is cold. Compile time = first training step (forward + backward, the step that compiles) minus
the median of the next steps, in wall-clock seconds (Inductor runs the C++ compiler in child processes, which a
process CPU clock would miss). Model: ViT, 32×32 images, patch 4, width 64, 2 heads, batch 8, ``depth`` blocks.

Run: python benchmarks/bench_compile.py [--backends aot_eager,inductor] [--depths 12,24,48,96] [--threads 1]
     [--device cpu|cuda] [--dtype fp32|bf16] [--timeout 600]
Expected: whole-model compile time grows with depth; regional stays nearly flat (one block graph reused).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

MODES = ("whole", "regional")


def worker(mode: str, depth: int, backend: str, threads: int, device: str, dtype_name: str) -> dict:
    import torch
    import torch.nn.functional as F

    from activation_memory import autocast_context, parse_dtype, synchronizer

    from layerscale import create_model
    from layerscale.models import compile_blocks

    torch.set_num_threads(threads)
    dtype, sync = parse_dtype(dtype_name), synchronizer(device)
    autocast = autocast_context(device, dtype)
    torch.manual_seed(0)
    model = create_model("vit", img_size=32, patch_size=4, num_classes=10, embed_dim=64, depth=depth,
                         num_heads=2).to(device)
    x = torch.randn(8, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (8,), device=device)

    def step(m) -> float:
        start = time.perf_counter()
        with autocast():
            loss = F.cross_entropy(m(x), y)
        loss.backward()
        sync()
        return time.perf_counter() - start

    step(model)  # warm-up: lazy initialisation is not the eager step time
    eager = statistics.median(step(model) for _ in range(3))
    compiled = torch.compile(model, backend=backend) if mode == "whole" else compile_blocks(model, backend=backend)
    first = step(compiled)
    steady = statistics.median(step(compiled) for _ in range(3))
    return {"mode": mode, "depth": depth, "backend": backend, "compile_s": first - steady, "step_s": steady,
            "eager_step_s": eager}


def run_isolated(mode: str, depth: int, backend: str, args) -> dict | None:
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache, TORCHINDUCTOR_FX_GRAPH_CACHE="0",
                   TORCHINDUCTOR_AUTOGRAD_CACHE="0", PYTHONPATH=os.pathsep.join(
                       [os.path.dirname(os.path.abspath(__file__)), os.environ.get("PYTHONPATH", "")]))
        command = [sys.executable, os.path.abspath(__file__), "--worker", mode, str(depth), backend,
                   "--threads", str(args.threads), "--device", args.device, "--dtype", args.dtype]
        try:
            done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=args.timeout)
        except subprocess.TimeoutExpired:
            return None
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"worker {mode} depth {depth} {backend} failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(lines[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="aot_eager,inductor")
    parser.add_argument("--depths", default="12,24,48,96")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per cold compile before giving up")
    parser.add_argument("--skip", default="", help="comma list of backend:mode:depth to leave out, e.g. "
                                                   "inductor:whole:96")
    parser.add_argument("--worker", nargs=3, metavar=("MODE", "DEPTH", "BACKEND"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        mode, depth, backend = args.worker
        print(json.dumps(worker(mode, int(depth), backend, args.threads, args.device, args.dtype)))
        return
    skip = set(filter(None, args.skip.split(",")))
    print(f"ViT width 64, batch 8, device {args.device}, dtype {args.dtype}, {args.threads} threads; cold compiles")
    print(f"{'backend':10s} {'depth':>5s} | {'whole compile s':>15s} {'regional compile s':>18s} {'ratio':>6s} | "
          f"{'step ms eager':>13s} {'whole':>7s} {'regional':>8s}")
    for backend in args.backends.split(","):
        for depth in (int(d) for d in args.depths.split(",")):
            rows = {}
            for mode in MODES:
                if f"{backend}:{mode}:{depth}" not in skip:
                    rows[mode] = run_isolated(mode, depth, backend, args)

            def cell(mode, key, scale=1.0, width=8):
                row = rows.get(mode)
                if mode not in rows:
                    return f"{'skipped':>{width}s}"
                return f"{'timeout':>{width}s}" if row is None else f"{row[key] * scale:{width}.1f}"

            whole, regional = rows.get("whole"), rows.get("regional")
            ratio = f"{whole['compile_s'] / regional['compile_s']:6.1f}" if whole and regional else f"{'-':>6s}"
            eager = next((r["eager_step_s"] for r in (whole, regional) if r), float("nan"))
            print(f"{backend:10s} {depth:5d} | {cell('whole', 'compile_s', width=15)} "
                  f"{cell('regional', 'compile_s', width=18)} {ratio} | {eager * 1e3:13.1f} "
                  f"{cell('whole', 'step_s', 1e3, 7)} {cell('regional', 'step_s', 1e3, 8)}", flush=True)


if __name__ == "__main__":
    main()
