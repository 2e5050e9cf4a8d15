"""Activation checkpointing per block: memory saved and time paid, on deep narrow ViTs.

For each depth, the same model (random weights) runs a training forward + backward with
``set_grad_checkpointing(False)`` and ``(True)``, interleaved. Memory, exact and deterministic: ``saved`` — bytes
autograd saved for the backward (``saved_tensors_hooks``); ``held`` — bytes still allocated when the forward returns
(everything kept for the backward, including the block inputs the checkpoints keep alive); ``peak`` — highest
allocation above the start during forward + backward.

Run: python benchmarks/bench_checkpointing.py [--depths 96,1000] [--width 32] [--batch 8] [--rounds 5]
     [--threads 1] [--clock auto|wall|cpu] [--device cpu|cuda] [--dtype fp32|bf16]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from activation_memory import allocation_profile, autocast_context, parse_dtype, saved_tensor_bytes, synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale import create_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="96,1000")
    parser.add_argument("--width", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=5)
    add_timing_arguments(parser)
    args = parser.parse_args()
    apply_timing_arguments(args)
    dtype, device, sync = parse_dtype(args.dtype), args.device, synchronizer(args.device)
    autocast = autocast_context(device, dtype)
    print(f"ViT 32x32/patch 4 (65 tokens), width {args.width}, {args.heads} heads, batch {args.batch}, "
          f"device {device}, dtype {args.dtype}, {args.threads} threads, {args.clock} clock; forward + backward, "
          f"median of {args.rounds} interleaved rounds")
    print(f"{'depth':>5s} {'checkpointing':>13s} | {'step ms':>8s} {'x time':>6s} | {'saved MiB':>9s} {'held MiB':>8s} "
          f"{'peak MiB':>8s} {'held / off':>10s}")
    for depth in (int(d) for d in args.depths.split(",")):
        torch.manual_seed(0)
        model = create_model("vit", img_size=32, patch_size=4, num_classes=10, embed_dim=args.width, depth=depth,
                             num_heads=args.heads).to(device).train()
        params = list(model.parameters())
        x = torch.randn(args.batch, 3, 32, 32, device=device)
        y = torch.randint(0, 10, (args.batch,), device=device)

        def forward():
            with autocast():
                return F.cross_entropy(model(x), y)

        def step(enable):
            model.set_grad_checkpointing(enable)
            model.zero_grad(set_to_none=True)
            forward().backward()
            sync()

        memory = {}
        for enable in (False, True):
            model.set_grad_checkpointing(enable)
            model.zero_grad(set_to_none=True)
            saved = saved_tensor_bytes(forward, exclude=params)[0]  # that forward's graph is freed at once
            held, forward_peak, loss = allocation_profile(forward, device)
            _, backward_peak, _ = allocation_profile(loss.backward, device)
            memory[enable] = (saved, held, max(forward_peak, held + backward_peak))
            loss = None
        times = medians_on_clock({"off": lambda: step(False), "on": lambda: step(True)}, rounds=args.rounds,
                                 clock=args.clock)
        for enable, label in ((False, "off"), (True, "on")):
            saved, held, peak = memory[enable]
            print(f"{depth:5d} {label:>13s} | {times[label] * 1e3:8.1f} {times[label] / times['off']:6.2f} | "
                  f"{saved / 2**20:9.1f} {held / 2**20:8.1f} {peak / 2**20:8.1f} "
                  f"{held / memory[False][1]:10.3f}", flush=True)


if __name__ == "__main__":
    main()
