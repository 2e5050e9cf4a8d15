"""``layerscale models``: list the model names and the residual methods."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", action="store_true", help="also count each model's parameters (meta device)")


def run(args: argparse.Namespace) -> int:
    import torch

    from ..residual import list_residuals
    from .registry import create_model, list_models

    for name in list_models():
        if args.params:
            with torch.device("meta"):
                count = sum(p.numel() for p in create_model(name).parameters())
            print(f"{name:28s} {count:>14,d}")
        else:
            print(name)
    print("residual methods:", ", ".join(list_residuals()))
    return 0
