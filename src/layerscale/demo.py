"""``layerscale demo``: train a small LayerScale ViT on scikit-learn's bundled digits (offline) and report accuracy."""

from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--epochs", type=int, default=15, help="training epochs (default 15)")
    parser.add_argument("--depth", type=int, default=12, help="number of transformer blocks (default 12)")
    parser.add_argument("--residual", default="layerscale", help="residual method (default layerscale)")
    parser.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace) -> int:
    import torch
    import torch.nn.functional as F

    from .models import create_model
    from .train.param_groups import param_groups

    try:
        from sklearn.datasets import load_digits
    except ImportError as exc:
        raise ImportError("the demo needs scikit-learn: pip install 'torch-layerscale[data]'") from exc
    if args.epochs < 1:
        raise ValueError(f"--epochs must be >= 1, got {args.epochs}")
    torch.manual_seed(args.seed)
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    split = int(0.8 * len(order))
    train_idx, test_idx = order[:split], order[split:]
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=64,
                         depth=args.depth, num_heads=4, residual=args.residual)
    optimizer = torch.optim.AdamW(param_groups(model, 0.05), lr=1e-3)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        model.train()
        perm = train_idx[torch.randperm(len(train_idx))]
        for batch in perm.split(64):
            loss = F.cross_entropy(model(images[batch]), labels[batch])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            acc = (model(images[test_idx]).argmax(-1) == labels[test_idx]).float().mean().item()
        print(f"epoch {epoch + 1:3d}/{args.epochs}  loss {loss.item():.4f}  test accuracy {acc:.3f}", flush=True)
    print(f"{args.residual} ViT, depth {args.depth}, on digits: test accuracy {acc:.3f} "
          f"({time.perf_counter() - start:.0f} s)")
    return 0
