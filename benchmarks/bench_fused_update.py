"""The LayerScale residual update ``x + m ⊙ γ ⊙ y``: forward + backward time, saved and peak memory, three ways.

* ``unfused``  — ``x + gamma * y`` (with stochastic depth: ``x + (gamma * y) * mask``, timm's order), autograd;
* ``addcmul``  — ``torch.addcmul(x, y, gamma)``, autograd (the previous ``LayerScale.add_to``);
* ``fused``    — :func:`layerscale.layers.fused.scaled_residual_add` (one ``addcmul`` + hand-written backward).

Run: python benchmarks/bench_fused_update.py [--threads 1] [--clock auto|wall|cpu] [--rounds 15]
     [--device cpu|cuda] [--dtype fp32|bf16]
``y`` and ``γ`` need gradients; the residual's gradient is the incoming gradient itself in every form, so ``x`` is
left out of the gradient to keep the comparison about the update. Target: fused ≥ 1.5× faster than unfused.
"""

from __future__ import annotations

import argparse

import torch

from activation_memory import allocation_profile, parse_dtype, saved_tensor_bytes, synchronizer
from common import print_table
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale.layers.fused import scaled_residual_add

SHAPES = [(64, 197, 768), (128, 197, 768), (64, 197, 1024)]


def forms():
    return {
        "unfused": lambda x, y, g, m: x + (g * y if m is None else (g * y) * m),
        "addcmul": lambda x, y, g, m: torch.addcmul(x, y, g if m is None else g * m),
        "fused": scaled_residual_add,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    add_timing_arguments(parser)
    args = parser.parse_args()
    apply_timing_arguments(args)
    dtype, device, sync = parse_dtype(args.dtype), args.device, synchronizer(args.device)
    print(f"device {device}, dtype {args.dtype}, {args.threads} threads, {args.clock} clock, forward + backward, "
          f"median of {args.rounds} interleaved rounds")
    for shape in SHAPES:
        for with_mask in (False, True):
            torch.manual_seed(0)
            x = torch.randn(shape, device=device, dtype=dtype)
            y = torch.randn(shape, device=device, dtype=dtype, requires_grad=True)
            gamma = torch.randn(shape[-1], device=device, dtype=torch.float32, requires_grad=True)
            mask = (torch.rand(shape[0], 1, 1, device=device) > 0.1).to(dtype) / 0.9 if with_mask else None
            grad = torch.randn(shape, device=device, dtype=dtype)
            results = {}

            def run(form):
                out = form(x, y, gamma, mask)
                out.backward(grad)
                sync()
                return out

            def clear_and_run(form):
                y.grad = gamma.grad = None
                return run(form)

            candidates = {name: (lambda form=form: clear_and_run(form)) for name, form in forms().items()}
            for name, form in forms().items():
                saved, _ = saved_tensor_bytes(lambda: form(x, y, gamma, mask), exclude=[gamma])
                y.grad = gamma.grad = None  # freed outside the measured call, so the peak is what the update adds
                _, peak, out = allocation_profile(lambda: run(form), device)
                results[name] = (saved, peak, out.detach(), y.grad.clone(), gamma.grad.clone())
            ref = results["unfused"]
            for name, (_, _, out, dy, dg) in results.items():
                tol = dict(rtol=1e-5, atol=1e-4) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
                torch.testing.assert_close(out, ref[2], **tol)
                torch.testing.assert_close(dy, ref[3], **tol)
                torch.testing.assert_close(dg, ref[4], rtol=1e-3, atol=1e-2 * max(1.0, ref[4].abs().max().item()))
            medians = medians_on_clock(candidates, rounds=args.rounds, clock=args.clock)
            print(f"\nshape {shape}{' with stochastic-depth mask' if with_mask else ''} (results equal)")
            print_table(medians, "unfused")
            for name, (saved, peak, *_rest) in results.items():
                print(f"  {name:32s} saved {saved / 2**20:8.1f} MiB   peak during fwd+bwd {peak / 2**20:8.1f} MiB"
                      f"   speed-up vs unfused {medians['unfused'] / medians[name]:5.2f}x")


if __name__ == "__main__":
    main()
