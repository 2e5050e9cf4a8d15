"""Token windows for language-model calibration and evaluation, and their disjoint split.

The token stream is cut into non-overlapping windows of ``seq_len`` tokens from its start (the tail that does not
fill a window is unused). The **calibration** windows (which score blocks and choose what to remove, and on which a
model is healed) are the first half of the windows, ``⌈W / 2⌉``; the **evaluation** windows (which judge) are the
rest, so no token is in both. Each split is then cut to its first ``samples`` windows. A window of ``seq_len``
tokens gives ``seq_len − 1`` next-token predictions, exactly what ``model(input_ids=window, labels=window)``
scores in Hugging Face.
"""

from __future__ import annotations

import torch

__all__ = ["token_windows", "split_windows"]


def token_windows(ids: list[int] | torch.Tensor, seq_len: int) -> torch.Tensor:
    """``(W, seq_len)`` int64: the stream ``ids`` cut into non-overlapping windows."""
    if isinstance(seq_len, bool) or not isinstance(seq_len, int) or seq_len < 2:
        raise ValueError(f"--seq-len must be an integer >= 2 (a window predicts seq_len - 1 tokens), got {seq_len!r}")
    ids = torch.as_tensor(ids, dtype=torch.int64).reshape(-1)
    count = ids.numel() // seq_len
    return ids[:count * seq_len].reshape(count, seq_len)


def split_windows(windows: torch.Tensor, samples: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(calibration, evaluation)`` windows (module docstring); one-line ``ValueError`` with fewer than two."""
    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, int) or samples < 1):
        raise ValueError(f"--samples must be an integer >= 1, got {samples!r}")
    total = windows.shape[0]
    if total < 2:
        raise ValueError(f"the data gives {total} window(s) of {windows.shape[1]} tokens; calibration and evaluation "
                         "need at least 2 (one each): give more text or a smaller --seq-len")
    half = -(-total // 2)
    calibration, evaluation = windows[:half], windows[half:]
    if samples is not None:
        calibration, evaluation = calibration[:samples], evaluation[:samples]
    return calibration, evaluation
