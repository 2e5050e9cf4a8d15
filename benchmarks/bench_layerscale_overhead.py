"""Training-step cost of LayerScale: the same ViT with ``residual="layerscale"`` against ``residual="prenorm"``.

Run: python benchmarks/bench_layerscale_overhead.py [--threads 2] [--depth 12] [--rounds 30]
Prints the median step time of each and the ratio layerscale / prenorm (target ≤ 1.01).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from common import interleaved_medians, model_timing_parser, print_table

from layerscale import create_model, param_groups


def make_step(residual: str, args):
    torch.manual_seed(0)
    model = create_model("vit", img_size=32, patch_size=4, in_chans=3, num_classes=10, embed_dim=args.width,
                         depth=args.depth, num_heads=args.width // 64, residual=residual)
    opt = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-4)
    x = torch.randn(args.batch, 3, 32, 32)
    y = torch.randint(0, 10, (args.batch,))

    def step():
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step


def main() -> None:
    parser = model_timing_parser(__doc__.splitlines()[0], threads=2, depth=12, width=192, batch=64, rounds=30)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    medians = interleaved_medians({"prenorm": make_step("prenorm", args),
                                   "layerscale": make_step("layerscale", args)}, rounds=args.rounds)
    print(f"ViT 32x32/4, width {args.width}, depth {args.depth}, batch {args.batch}, {args.threads} threads, "
          f"train step (fwd+bwd+AdamW), median of {args.rounds} interleaved rounds")
    print_table(medians, "prenorm")


if __name__ == "__main__":
    main()
