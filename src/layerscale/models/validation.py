"""Checks of model hyper-parameters, each a one-line ``ValueError`` naming the value and what is allowed.

The depth and the width have an upper limit, checked before any module is built: every block is a few dozen Python
module objects even on the ``meta`` device, so ``depth: 100000`` exhausted the memory (5 GB, minutes) before the
check of the training memory could run. The limits are far above any trained model (DeepNet's 1,000 layers, a
16,384-wide LLM) and far below where building the module objects alone becomes a problem; the number of parameters
is bounded separately, by this machine's memory (:mod:`layerscale.train.setup.model_build`).
"""

from __future__ import annotations

__all__ = ["MAX_DEPTH", "MAX_IMG_SIZE", "MAX_WIDTH", "check_positive_int", "check_heads", "check_patch", "check_rate"]

#: The most blocks one stack of a model may have (``depth``, CaiT's ``depth_token_only``).
MAX_DEPTH = 1024
#: The widest residual stream a model may have (``embed_dim``).
MAX_WIDTH = 65536
#: The largest image side a vision model may take (``img_size``): checked before the allowed patch sizes are listed
#: (one step per pixel) and before the position embedding is built, so ``img_size: 1000000000000`` in a hostile
#: ``config.json`` is one line, not an endless loop or torch's multi-kB overflow message.
MAX_IMG_SIZE = 65536


def check_positive_int(name: str, value, high: int | None = None) -> int:
    """``value`` when it is an int in ``[1, high]`` (no upper limit without ``high``), else a one-line
    ``ValueError``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    if high is not None and value > high:
        raise ValueError(f"{name} must be at most {high} (this library's limit), got {value}")
    return value


def check_heads(embed_dim: int, num_heads: int) -> None:
    check_positive_int("embed_dim", embed_dim, MAX_WIDTH)
    check_positive_int("num_heads", num_heads)
    if embed_dim % num_heads:
        divisors = [h for h in range(1, min(embed_dim, 64) + 1) if embed_dim % h == 0]
        raise ValueError(
            f"embed_dim {embed_dim} is not divisible by num_heads {num_heads}; allowed num_heads: {divisors}"
        )


def check_patch(img_size: int, patch_size: int) -> None:
    check_positive_int("img_size", img_size, MAX_IMG_SIZE)
    check_positive_int("patch_size", patch_size, MAX_IMG_SIZE)
    if img_size % patch_size:
        divisors = [p for p in range(1, img_size + 1) if img_size % p == 0]
        raise ValueError(
            f"img_size {img_size} is not divisible by patch_size {patch_size}; allowed patch_size: {divisors}"
        )


def check_rate(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value < 1.0:
        raise ValueError(f"{name} must be a number in [0, 1), got {value!r}")
    return float(value)
