"""AttnRes's depth aggregation, before and after, in one process: a ViT training step with ``attnres`` /
``attnres_block`` against the ``prenorm`` ViT of the same shape, with :func:`layerscale.residual.multi_stream.attnres.
depth_attention` in its current form (each source read as a ``(tokens, d)`` matrix, one at a time) and in the form
before it (the sources stacked as ``(..., n, d)`` in every pass, kept below as :class:`StackedDepthAttention`, the
same equations), interleaved medians.

One step = forward, cross-entropy, backward, AdamW step, on random images (random weights). The default shape is
DepthBench's deepest cell (32 blocks of width 64, 2 heads, Fashion-MNIST's 28×28 / patch 4, 50 tokens, batch 64),
where Full AttnRes reads 65 sources at its last sub-layer.

Run: python benchmarks/bench_attnres_aggregation.py [--width 64] [--depth 32] [--heads 2] [--batch 64] [--img 28]
     [--patch 4] [--rounds 5] [--threads 1] [--clock auto|wall|cpu] [--device cpu|cuda]
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F

from activation_memory import synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale import create_model
from layerscale.residual.multi_stream import attnres


class StackedDepthAttention(torch.autograd.Function):
    """The previous form of ``attnres._DepthAttention`` (the "before"): the same ``h = Σ_i α_i v_i`` and backward,
    each pass on the values stacked as ``(..., n, d)`` (batched matrix-vector products)."""

    @staticmethod
    def forward(ctx, query, eps, *sources):
        values = torch.stack(sources, dim=-2)
        inv_rms = torch.rsqrt(torch.linalg.vector_norm(values, dim=-1).square() / values.shape[-1] + eps)
        scores = values @ query
        weights = torch.softmax(scores * inv_rms, dim=-1)
        ctx.save_for_backward(query, weights, inv_rms, scores, *sources)
        return (weights.unsqueeze(-2) @ values).squeeze(-2)

    @staticmethod
    def backward(ctx, grad):
        query, weights, inv_rms, scores, *sources = ctx.saved_tensors
        values = torch.stack(sources, dim=-2)
        grad_weights = (values @ grad.unsqueeze(-1)).squeeze(-1)
        grad_logits = weights * (grad_weights - (weights * grad_weights).sum(-1, keepdim=True))
        grad_scores = grad_logits * inv_rms
        coeff_values = -grad_scores * scores * inv_rms.square() / values.shape[-1]
        grad_values = weights.unsqueeze(-1) * grad.unsqueeze(-2)
        grad_values.addcmul_(grad_scores.unsqueeze(-1), query).addcmul_(coeff_values.unsqueeze(-1), values)
        grad_query = (grad_scores.reshape(1, -1) @ values.reshape(-1, values.shape[-1])).squeeze(0)
        return (grad_query, None, *grad_values.unbind(-2))


def _same_gradients(model, x, y) -> float:
    """Largest difference between the two forms' gradients of one float64 step (the check that they compute the
    same function)."""
    model = model.double()
    grads = []
    for form in (attnres._DepthAttention, StackedDepthAttention):
        attnres._DepthAttention = form
        model.zero_grad(set_to_none=True)
        F.cross_entropy(model(x.double()), y).backward()
        grads.append(torch.cat([p.grad.flatten() for p in model.parameters()]))
    return (grads[0] - grads[1]).abs().max().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--width", type=int, default=64)
    parser.add_argument("--depth", type=int, default=32)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--img", type=int, default=28)
    parser.add_argument("--patch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    add_timing_arguments(parser, dtype=False)
    args = parser.parse_args()
    apply_timing_arguments(args)
    sync = synchronizer(args.device)
    current = attnres._DepthAttention
    x = torch.randn(args.batch, 1, args.img, args.img, device=args.device)
    y = torch.randint(0, 10, (args.batch,), device=args.device)
    steps = {}
    for name in ("prenorm", "attnres", "attnres_block"):
        torch.manual_seed(0)
        model = create_model("vit", img_size=args.img, patch_size=args.patch, in_chans=1, num_classes=10,
                             embed_dim=args.width, depth=args.depth, num_heads=args.heads, residual=name,
                             init_value=None).to(args.device).train()
        if name == "attnres":
            check = create_model("vit", img_size=args.img, patch_size=args.patch, in_chans=1, num_classes=10,
                                 embed_dim=16, depth=3, num_heads=2, residual=name, init_value=None)
            for vector in (p for p in check.parameters() if p.dim() == 1):  # non-zero pseudo-queries: the
                torch.nn.init.normal_(vector, std=0.5)                        # weights are not uniform
            difference = _same_gradients(check.to(args.device), x[:4], y[:4])
            attnres._DepthAttention = current
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
        forms = {"": current} if name == "prenorm" else {"": current, " (stacked, before)": StackedDepthAttention}
        for suffix, form in forms.items():
            def step(model=model, optimizer=optimizer, form=form):
                attnres._DepthAttention = form
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                sync()

            steps[name + suffix] = step
    tokens = (args.img // args.patch) ** 2 + 1
    print(f"ViT {args.img}x{args.img}/patch {args.patch} ({tokens} tokens), width {args.width}, depth {args.depth}, "
          f"{args.heads} heads, batch {args.batch}, device {args.device}, {args.threads} threads, {args.clock} clock; "
          f"training step (AdamW), median of {args.rounds} interleaved rounds")
    print(f"the two forms' float64 gradients (a depth-3 model, random weights) differ by at most {difference:.1e}")
    medians = medians_on_clock(steps, rounds=args.rounds, clock=args.clock)
    attnres._DepthAttention = current
    base = medians["prenorm"]
    for name, seconds in medians.items():
        before = medians.get(name + " (stacked, before)")
        gain = f"  (before / now x{before / seconds:5.2f})" if before is not None else ""
        print(f"{name:>30s} {seconds * 1e3:9.1f} ms  x{seconds / base:5.2f} vs prenorm{gain}")


if __name__ == "__main__":
    main()
