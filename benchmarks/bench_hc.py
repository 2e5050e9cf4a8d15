"""Hyper-Connections training-step cost: an ``hc`` (and ``hc_static``, ``mhc``) ViT against the ``prenorm`` ViT of the
same width and depth, expansion rate 4, as ratios measured in one run (interleaved medians).

One step = forward, cross-entropy, backward, AdamW step, on random images (random weights). The issue's target:
``hc`` ≤ 1.3× ``prenorm``. The extra work of a hyper-connection per branch is a few passes over the ``n``-times
wider stream (read, remix, write; plus a LayerNorm and two small projections for the dynamic form), independent
of the attention and MLP cost, so the ratio falls as the width grows.

Run: python benchmarks/bench_hc.py [--width 192] [--depth 12] [--heads 3] [--batch 32] [--img 32] [--patch 4]
     [--rate 4] [--rounds 7] [--threads 1] [--clock auto|wall|cpu] [--device cpu|cuda] [--methods hc,hc_static,mhc]
     [--memory] [--compile] [--eval-batch N] [--separate]

``--memory`` adds, per method, the bytes autograd keeps for the backward of one forward (distinct storages,
parameters excluded): the activation memory a training step holds at its peak, deterministic on a busy machine.
``--compile`` adds every method again with its blocks compiled (:func:`layerscale.models.compile_blocks`, Inductor),
timed in the same interleaved rounds after two warm-up steps; ratios against eager ``prenorm`` and against
compiled ``prenorm``. ``--eval-batch N`` adds, per method, one forward of ``N`` images without gradients (a study's
validation pass), timed in the same rounds. ``--separate`` adds every multi-stream method again with
``fused = False`` on its connections: the separate operations the CPU's one-node read and write replaced (the same
values), the *before* of the same process.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from activation_memory import saved_tensor_bytes, synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale import create_model
from layerscale.models.compile import compile_blocks
from layerscale.residual import get_residual
from layerscale.residual.multi_stream.hyper_connections import HyperConnections
from layerscale.residual.multi_stream.mhc import ManifoldConstrainedHyperConnections


def _method(name: str, rate: int):
    if name == "mhc":
        return ManifoldConstrainedHyperConnections(expansion_rate=rate)
    if name in ("hc", "hc_static"):
        method = get_residual(name)
        return type(method)(expansion_rate=rate) if isinstance(method, HyperConnections) else method
    return get_residual(name)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=192)
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--heads", type=int, default=3)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--img", type=int, default=32)
    parser.add_argument("--patch", type=int, default=4)
    parser.add_argument("--rate", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    add_timing_arguments(parser, dtype=False)
    parser.add_argument("--methods", default="hc,hc_static,mhc")
    parser.add_argument("--memory", action="store_true", help="also print the activation memory saved for backward")
    parser.add_argument("--compile", action="store_true", help="also time every method with its blocks compiled")
    parser.add_argument("--eval-batch", type=int, default=0, metavar="N",
                        help="also time a forward of N images without gradients (an evaluation pass)")
    parser.add_argument("--separate", action="store_true",
                        help="also time every multi-stream method with its connections' fused paths off")
    args = parser.parse_args()
    apply_timing_arguments(args)
    sync = synchronizer(args.device)
    names = ["prenorm"] + [m for m in args.methods.split(",") if m]
    x = torch.randn(args.batch, 3, args.img, args.img, device=args.device)
    y = torch.randint(0, 10, (args.batch,), device=args.device)
    x_eval = torch.randn(args.eval_batch, 3, args.img, args.img, device=args.device) if args.eval_batch else None
    steps, saved = {}, {}
    variants = [(name, False) for name in names] + ([(name, True) for name in names] if args.compile else [])
    separate = [name for name in names if name != "prenorm"] if args.separate else []
    variants += [(f"{name} (separate)", False) for name in separate]
    for name, compiled in variants:
        label = f"{name} (compiled)" if compiled else name
        torch.manual_seed(0)
        model = create_model("vit", img_size=args.img, patch_size=args.patch, num_classes=10, embed_dim=args.width,
                             depth=args.depth, num_heads=args.heads,
                             residual=_method(name.removesuffix(" (separate)"), args.rate),
                             init_value=None).to(args.device).train()
        if name.endswith(" (separate)"):
            for module in model.modules():
                if hasattr(module, "fused"):
                    module.fused = False
        if compiled:
            compile_blocks(model)
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        if args.memory and not compiled:
            saved[name] = saved_tensor_bytes(lambda model=model: model(x), exclude=list(model.parameters()))[0]

        def step(model=model, optimizer=optimizer):
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            sync()

        steps[label] = step
        if x_eval is not None and not compiled:
            def forward(model=model):
                with torch.no_grad():
                    model(x_eval)
                sync()

            steps[f"{name} (eval)"] = forward
    tokens = (args.img // args.patch) ** 2 + 1
    print(f"ViT {args.img}x{args.img}/patch {args.patch} ({tokens} tokens), width {args.width}, depth {args.depth}, "
          f"{args.heads} heads, batch {args.batch}, expansion rate {args.rate}, device {args.device}, "
          f"{args.threads} threads, {args.clock} clock; training step (AdamW), median of {args.rounds} "
          f"interleaved rounds")
    medians = medians_on_clock(steps, rounds=args.rounds, clock=args.clock)
    base = medians["prenorm"]
    for name in names:
        memory = (f"   saved for backward {saved[name] / 2**20:7.1f} MiB  x{saved[name] / saved['prenorm']:5.2f}"
                  if args.memory else "")
        print(f"{name:>10s} {medians[name] * 1e3:9.1f} ms  x{medians[name] / base:5.2f} vs prenorm{memory}")
    for name in separate:
        t = medians[f"{name} (separate)"]
        print(f"{name + ' (separate)':>21s} {t * 1e3:9.1f} ms  x{t / base:5.2f} vs prenorm  "
              f"(fused x{medians[name] / t:5.3f} of separate)")
    if x_eval is not None:
        eval_base = medians["prenorm (eval)"]
        for name in names:
            t = medians[f"{name} (eval)"]
            print(f"{name:>10s} forward of {args.eval_batch} without gradients {t * 1e3:9.1f} ms  "
                  f"x{t / eval_base:5.2f} vs prenorm")
    if args.compile:
        compiled_base = medians["prenorm (compiled)"]
        for name in names:
            t = medians[f"{name} (compiled)"]
            print(f"{name + ' (compiled)':>21s} {t * 1e3:9.1f} ms  x{t / base:5.2f} vs eager prenorm  "
                  f"x{t / compiled_base:5.2f} vs compiled prenorm")


if __name__ == "__main__":
    main()
