"""fp32 against bf16 autocast for our ViT across widths: where bf16 starts to pay on this device.

bf16 halves the bytes moved and, on CPUs with AVX-512 BF16 / AMX (oneDNN) and on GPUs, multiplies the GEMM rate; but
autocast adds a cast before every matrix product and keeps norms and softmax in fp32, a fixed cost per operator.
Narrow models are dominated by such per-operator costs, wide ones by GEMMs, so there is a crossover width. For each
width: the median training step (forward + cross-entropy + backward + AdamW) and evaluation forward in fp32 and
under ``torch.autocast(dtype=torch.bfloat16)``, interleaved round by round in one process; ratio = fp32 time / bf16
time (> 1: bf16 faster). Models: ViT (LayerScale), heads of 32 channels, MLP ratio ``--mlp-ratio``, ``--depth``
blocks, two token counts: 32×32 / patch 4 (65 tokens) and 28×28 / patch 7 (17 tokens, the Fashion-MNIST study).

Run: python benchmarks/bench_precision.py [--widths 64,96,128,192,256,384] [--depth 4] [--batch 64] [--rounds 3]
     [--threads 1] [--clock auto|wall|cpu] [--device cpu|cuda]
The crossover feeds ``layerscale.train.precision_policy`` (``run.precision: auto``).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from activation_memory import synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale import create_model

#: (name, image size, patch size, input channels): 65 and 17 tokens.
SHAPES = (("32x32/p4", 32, 4, 3), ("28x28/p7", 28, 7, 1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="64,96,128,192,256,384")
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--mlp-ratio", type=float, default=4.0)
    parser.add_argument("--rounds", type=int, default=3)
    add_timing_arguments(parser, dtype=False)
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    if any(w % 32 for w in widths):
        raise ValueError(f"--widths must be multiples of 32 (heads of 32 channels), got {args.widths!r}")
    apply_timing_arguments(args)
    device, sync = args.device, synchronizer(args.device)
    print(f"device {device}, {args.threads} threads, {args.clock} clock, depth {args.depth}, batch {args.batch}, "
          f"MLP ratio {args.mlp_ratio:g}; median of {args.rounds} interleaved rounds; ratio = fp32 time / bf16 time")
    print(f"{'shape':9s} {'width':>5s} | {'train fp32 ms':>13s} {'bf16 ms':>8s} {'ratio':>6s} | "
          f"{'eval fp32 ms':>12s} {'bf16 ms':>8s} {'ratio':>6s}")
    for shape, img, patch, chans in SHAPES:
        for width in widths:
            torch.manual_seed(0)
            model = create_model("vit", img_size=img, patch_size=patch, in_chans=chans, num_classes=10,
                                 embed_dim=width, depth=args.depth, num_heads=width // 32,
                                 mlp_ratio=args.mlp_ratio).to(device)
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
            x = torch.randn(args.batch, chans, img, img, device=device)
            y = torch.randint(0, 10, (args.batch,), device=device)

            def step(bf16: bool):
                model.train()
                with torch.autocast(torch.device(device).type, dtype=torch.bfloat16, enabled=bf16):
                    logits = model(x)
                loss = F.cross_entropy(logits.float(), y)
                opt.zero_grad(set_to_none=True)
                loss.backward()
                opt.step()
                sync()

            def infer(bf16: bool):
                model.eval()
                with torch.inference_mode(), torch.autocast(torch.device(device).type, dtype=torch.bfloat16,
                                                            enabled=bf16):
                    model(x)
                sync()

            t = medians_on_clock({"fp32": lambda: step(False), "bf16": lambda: step(True)}, rounds=args.rounds,
                                 clock=args.clock)
            e = medians_on_clock({"fp32": lambda: infer(False), "bf16": lambda: infer(True)}, rounds=args.rounds,
                                 clock=args.clock)
            print(f"{shape:9s} {width:5d} | {t['fp32'] * 1e3:13.1f} {t['bf16'] * 1e3:8.1f} "
                  f"{t['fp32'] / t['bf16']:6.3f} | {e['fp32'] * 1e3:12.1f} {e['bf16'] * 1e3:8.1f} "
                  f"{e['fp32'] / e['bf16']:6.3f}", flush=True)


if __name__ == "__main__":
    main()
