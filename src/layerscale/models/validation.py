"""Checks of model hyper-parameters, each a one-line ``ValueError`` naming the value and what is allowed."""

from __future__ import annotations

__all__ = ["check_positive_int", "check_heads", "check_patch", "check_rate"]


def check_positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def check_heads(embed_dim: int, num_heads: int) -> None:
    check_positive_int("embed_dim", embed_dim)
    check_positive_int("num_heads", num_heads)
    if embed_dim % num_heads:
        divisors = [h for h in range(1, min(embed_dim, 64) + 1) if embed_dim % h == 0]
        raise ValueError(
            f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}; allowed num_heads: {divisors}"
        )


def check_patch(img_size: int, patch_size: int) -> None:
    check_positive_int("img_size", img_size)
    check_positive_int("patch_size", patch_size)
    if img_size % patch_size:
        divisors = [p for p in range(1, img_size + 1) if img_size % p == 0]
        raise ValueError(
            f"img_size {img_size} is not divisible by patch_size {patch_size}; allowed patch_size: {divisors}"
        )


def check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)
