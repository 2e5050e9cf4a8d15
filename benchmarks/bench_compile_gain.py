"""Where regional compilation pays: steady-state training step, eager against ``compile_blocks``, and its cost.

For one configuration (``--width``, ``--depth``, image / patch, ``--batch``): our ViT trained eagerly and a copy with
every block compiled by Inductor (:func:`layerscale.models.compile_blocks`), same weights, timed interleaved round
by round (forward + cross-entropy + backward + AdamW). Reports the steady-state speed-up (eager time / compiled
time), the compile time (first compiled step minus a steady one, wall-clock: Inductor's C++ compiler runs in child
processes) and the break-even: the number of steps after which the compiled run has caught up,
``compile_s / (eager_s − compiled_s)`` (never, when compiling is not faster). Run each configuration in its own
process with a fresh ``TORCHINDUCTOR_CACHE_DIR`` for a cold compile.

Run: TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) python benchmarks/bench_compile_gain.py --width 64 --depth 12 --img 28
     --patch 7 --chans 1 [--batch 64] [--rounds 5] [--threads 1] [--clock auto|wall|cpu] [--device cpu|cuda]
The table in docs/performance.md feeds ``layerscale.train.loop.auto_policy`` (``run.compile: auto``).
"""

from __future__ import annotations

import argparse
import copy
import time

import torch
import torch.nn.functional as F

from activation_memory import synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale import create_model
from layerscale.models import compile_blocks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--img", type=int, default=28)
    parser.add_argument("--patch", type=int, default=7)
    parser.add_argument("--chans", type=int, default=1)
    parser.add_argument("--mlp-ratio", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    add_timing_arguments(parser, dtype=False)
    args = parser.parse_args()
    if args.width % 16:
        raise ValueError(f"--width must be a multiple of 16 (heads of 16 channels), got {args.width}")
    apply_timing_arguments(args)
    device, sync = args.device, synchronizer(args.device)
    torch.manual_seed(0)
    eager = create_model("vit", img_size=args.img, patch_size=args.patch, in_chans=args.chans, num_classes=10,
                         embed_dim=args.width, depth=args.depth, num_heads=args.width // 16,
                         mlp_ratio=args.mlp_ratio).to(device).train()
    compiled = compile_blocks(copy.deepcopy(eager))
    x = torch.randn(args.batch, args.chans, args.img, args.img, device=device)
    y = torch.randint(0, 10, (args.batch,), device=device)
    steps = {}
    for name, model in (("eager", eager), ("regional", compiled)):
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(model=model, opt=opt):
            loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sync()

        steps[name] = step
    steps["eager"]()
    start = time.perf_counter()
    steps["regional"]()  # compiles
    first = time.perf_counter() - start
    start = time.perf_counter()
    steps["regional"]()
    compile_s = first - (time.perf_counter() - start)
    t = medians_on_clock(steps, rounds=args.rounds, clock=args.clock)
    gain = t["eager"] - t["regional"]
    breakeven = f"{compile_s / gain:.0f} steps" if gain > 0 else "never"
    print(f"device {device}, {args.threads} threads, {args.clock} clock, width {args.width}, depth {args.depth}, "
          f"{args.img}x{args.img}/patch {args.patch}, batch {args.batch}: eager {t['eager'] * 1e3:.1f} ms, "
          f"regional {t['regional'] * 1e3:.1f} ms, speed-up {t['eager'] / t['regional']:.3f}, compile "
          f"{compile_s:.1f} s, break-even {breakeven}", flush=True)


if __name__ == "__main__":
    main()
