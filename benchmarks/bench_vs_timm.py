"""Our ViT and CaiT against timm's at identical configurations: training step, evaluation, activation memory.

Both models are built in this process with random weights, ours then loaded with timm's weights (so that both
compute the same function: the script checks the outputs agree), and timed interleaved round by round.
Configuration: 32×32 images, patch 4 (64 patches), width 192 (``--widths``), LayerScale ε = 1e-5, batch 64; ViT with
heads of 64 channels (3 at width 192), a class token and the position embedding on the patches only (DeiT III, timm
``no_embed_class=True``); CaiT with heads of 48 channels (4 at width 192, CaiT-XXS) and 2 class-attention blocks.
Training step: forward, cross-entropy, backward, AdamW step.

MFU (``mfu.py``): the FLOPs each model executes per training step (forward + backward, ``FlopCounterMode``), the
FLOP rate that achieves, and its fraction of a GEMM peak measured at the start of the run in the same process
(fp32 and bf16; the peak of the run's ``--dtype`` is used). ``--full-path`` also times our ViT with its
class-token path switched off (``model.class_token_path = False``), which isolates that saving.

Run: python benchmarks/bench_vs_timm.py [--families vit,cait] [--depths 12,24] [--widths 192] [--rounds 5]
     [--threads 1] [--clock auto|wall|cpu] [--device cpu|cuda] [--dtype fp32|bf16|fp16] [--full-path]
     (bf16/fp16: autocast around the forward)
Targets: ours / timm speed ≥ 1.10 for training, ≥ 1.0 for evaluation; activation memory ≤ timm's.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from activation_memory import autocast_context, parse_dtype, saved_tensor_bytes, synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock
from mfu import count_flops, describe_peaks, measure_peaks, mfu

from layerscale import create_model
from layerscale.interop import convert_state_dict

IMG, PATCH, CLASSES, EPS = 32, 4, 10, 1e-5


def build(family: str, depth: int, device: str, width: int = 192):
    """``(ours, timm's)`` with the same weights."""
    timm_vit = __import__("timm.models.vision_transformer", fromlist=["VisionTransformer"])
    timm_cait = __import__("timm.models.cait", fromlist=["Cait"])
    torch.manual_seed(0)
    if family == "vit":
        heads = width // 64
        theirs = timm_vit.VisionTransformer(img_size=IMG, patch_size=PATCH, num_classes=CLASSES, embed_dim=width,
                                            depth=depth, num_heads=heads, init_values=EPS, class_token=True,
                                            no_embed_class=True, global_pool="token")
        ours = create_model("vit", img_size=IMG, patch_size=PATCH, num_classes=CLASSES, embed_dim=width, depth=depth,
                            num_heads=heads, init_value=EPS)
        ours.load_state_dict(theirs.state_dict())
    elif family == "cait":
        heads = width // 48
        theirs = timm_cait.Cait(img_size=IMG, patch_size=PATCH, num_classes=CLASSES, embed_dim=width, depth=depth,
                                num_heads=heads, init_values=EPS, depth_token_only=2)
        ours = create_model("cait", img_size=IMG, patch_size=PATCH, num_classes=CLASSES, embed_dim=width,
                            depth=depth, num_heads=heads, init_value=EPS, depth_token_only=2)
        ours.load_state_dict(convert_state_dict(theirs.state_dict(), source="timm_cait"))
    else:
        raise ValueError(f"--families takes vit and cait, got {family!r}")
    return ours.to(device), theirs.to(device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--families", default="vit,cait")
    parser.add_argument("--depths", default="12,24")
    parser.add_argument("--widths", default="192", help="multiples of 192 (whole heads for ViT and CaiT)")
    parser.add_argument("--full-path", action="store_true",
                        help="also time our ViT with the class-token path off (isolates that saving)")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    add_timing_arguments(parser)
    args = parser.parse_args()
    widths = [int(w) for w in args.widths.split(",")]
    if any(w % 192 for w in widths):
        raise ValueError(f"--widths must be multiples of 192 (64-channel ViT heads, 48-channel CaiT heads), got "
                         f"{args.widths!r}")
    apply_timing_arguments(args)
    dtype, device, sync = parse_dtype(args.dtype), args.device, synchronizer(args.device)
    autocast = autocast_context(device, dtype)
    peaks = measure_peaks(device, args.clock, sync)
    peak_name = "bf16" if dtype in (torch.bfloat16, torch.float16) else "fp32"
    peak = peaks[peak_name]
    print(f"device {device}, dtype {args.dtype}, {args.threads} threads, batch {args.batch}, {IMG}x{IMG}/patch "
          f"{PATCH}, {args.clock} clock; median of {args.rounds} interleaved rounds; "
          f"speed-up = timm time / our time")
    print(describe_peaks(peaks) + f"; MFU against the {peak_name} peak")
    print(f"{'model':6s} {'width':>5s} {'depth':>5s} | {'train ours':>10s} {'timm':>8s} {'speed-up':>8s} | "
          f"{'eval ours':>9s} {'timm':>8s} {'speed-up':>8s} | {'act. MiB ours':>13s} {'timm':>7s} | "
          f"{'train GFLOP ours':>16s} {'timm':>6s} | {'GFLOP/s ours':>12s} {'timm':>6s} | "
          f"{'MFU ours':>8s} {'timm':>6s}")
    for family in args.families.split(","):
        for width in widths:
            for depth in (int(d) for d in args.depths.split(",")):
                run_one(family, width, depth, args, autocast, sync, peak)


def run_one(family: str, width: int, depth: int, args, autocast, sync, peak: float) -> None:
    """Time, count and print one (family, width, depth) configuration."""
    device = args.device
    models = dict(zip(("ours", "timm"), build(family, depth, device, width)))
    if args.full_path and family == "vit":
        full = build(family, depth, device, width)[0]
        full.class_token_path = False
        models["ours_full"] = full
    x = torch.randn(args.batch, 3, IMG, IMG, device=device)
    y = torch.randint(0, CLASSES, (args.batch,), device=device)
    with torch.no_grad():
        outs = [m.eval()(x) for m in models.values()]
    for out in outs[1:]:
        torch.testing.assert_close(outs[0], out, rtol=1e-4, atol=1e-4)
    train, evaluate, memory, flops = {}, {}, {}, {}
    for name, model in models.items():
        model.train()
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step(model=model, opt=opt):
            with autocast():
                loss = F.cross_entropy(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sync()

        def infer(model=model):
            model.eval()
            with torch.inference_mode(), autocast():
                model(x)
            sync()
            model.train()

        def forward(model=model):
            with autocast():
                return F.cross_entropy(model(x), y)

        def forward_backward(model=model):
            forward(model).backward()
            model.zero_grad(set_to_none=True)

        train[name], evaluate[name] = step, infer
        memory[name], loss = saved_tensor_bytes(forward, exclude=list(model.parameters()))
        del loss  # free the graph before timing
        flops[name] = count_flops(forward_backward)
    t = medians_on_clock(train, rounds=args.rounds, clock=args.clock)
    e = medians_on_clock(evaluate, rounds=args.rounds, clock=args.clock)
    rate = {name: flops[name] / t[name] for name in models}
    print(f"{family:6s} {width:5d} {depth:5d} | {t['ours'] * 1e3:10.0f} {t['timm'] * 1e3:8.0f} "
          f"{t['timm'] / t['ours']:8.3f} | {e['ours'] * 1e3:9.0f} {e['timm'] * 1e3:8.0f} "
          f"{e['timm'] / e['ours']:8.3f} | {memory['ours'] / 2**20:13.1f} {memory['timm'] / 2**20:7.1f} | "
          f"{flops['ours'] / 1e9:16.2f} {flops['timm'] / 1e9:6.2f} | {rate['ours'] / 1e9:12.1f} "
          f"{rate['timm'] / 1e9:6.1f} | {mfu(flops['ours'], t['ours'], peak):8.3f} "
          f"{mfu(flops['timm'], t['timm'], peak):6.3f}", flush=True)
    if "ours_full" in models:
        print(f"{'':18s}  class-token path off: train {t['ours_full'] * 1e3:.0f} ms (speed-up vs timm "
              f"{t['timm'] / t['ours_full']:.3f}, path on / off {t['ours_full'] / t['ours']:.3f}), eval "
              f"{e['ours_full'] * 1e3:.0f} ms (vs timm {e['timm'] / e['ours_full']:.3f}), "
              f"{flops['ours_full'] / 1e9:.2f} GFLOP", flush=True)


if __name__ == "__main__":
    main()
