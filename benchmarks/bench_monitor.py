"""Training-step cost of the diagnostics monitor (``LayerScaleMonitor``) against the same step without it.

Run: python benchmarks/bench_monitor.py [--threads 1] [--depth 12] [--width 192] [--rounds 20] [--every 50]

Three candidates, interleaved round by round, each one full training step (forward, backward, clipping, AdamW,
zero_grad) of the same ViT from the same weights:

* ``plain``: no monitor;
* ``unmonitored``: a monitor attached, on a step it does not record (every non-multiple of ``every``);
* ``monitored``: a step it records (hooks, scale reads, weight snapshot, gradient norms, update ratios, record).

Each candidate cycles through the same 8 random batches; subnormal floats are flushed to zero (see ``main``).

The cost at interval ``k`` is ``(monitored + (k − 1) · unmonitored) / (k · plain)`` (target ≤ 1.05 at the default
interval), printed for ``k = every`` and a few others.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from common import interleaved_medians, model_timing_parser, print_table

from layerscale import create_model, param_groups
from layerscale.diagnostics import LayerScaleMonitor


def make_step(args, monitor_mode: str | None):
    torch.manual_seed(0)
    model = create_model("vit", img_size=32, patch_size=4, in_chans=3, num_classes=10, embed_dim=args.width,
                         depth=args.depth, num_heads=max(1, args.width // 64))
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-4)
    generator = torch.Generator().manual_seed(1)
    batches = [(torch.randn(args.batch, 3, 32, 32, generator=generator),
                torch.randint(0, 10, (args.batch,), generator=generator)) for _ in range(8)]
    count = [0]
    monitor = LayerScaleMonitor(model, every=2, log_fn=lambda record: None) if monitor_mode else None
    step_number = 0 if monitor_mode == "monitored" else 1  # every=2: even steps are recorded, odd ones not

    def step():
        x, y = batches[count[0] % len(batches)]
        count[0] += 1
        if monitor is not None:
            monitor.begin_step(step_number)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if monitor is not None:
            monitor.after_backward()
        opt.step()
        if monitor is not None:
            monitor.after_optimizer_step()
        opt.zero_grad(set_to_none=True)

    return step


def main() -> None:
    parser = model_timing_parser(__doc__.splitlines()[0], threads=1, depth=12, width=192, batch=64, rounds=20)
    parser.add_argument("--every", type=int, default=50, help="the interval to report (default: 50, the default)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    # A model that memorises its few batches drives gradients into subnormal floats, which are 10-100x slower on
    # CPU and made the candidates' timings diverge for reasons unrelated to the monitor.
    torch.set_flush_denormal(True)
    medians = interleaved_medians({"plain": make_step(args, None), "unmonitored": make_step(args, "unmonitored"),
                                   "monitored": make_step(args, "monitored")}, rounds=args.rounds)
    print(f"ViT 32x32/4, width {args.width}, depth {args.depth}, batch {args.batch}, {args.threads} threads, "
          f"train step (fwd+bwd+clip+AdamW), median of {args.rounds} interleaved rounds")
    print_table(medians, "plain")
    plain, quiet, loud = medians["plain"], medians["unmonitored"], medians["monitored"]
    for k in sorted({1, 10, 20, args.every}):
        print(f"  cost with the monitor at every={k:<4d} {(loud + (k - 1) * quiet) / (k * plain):6.3f} x plain")


if __name__ == "__main__":
    main()
