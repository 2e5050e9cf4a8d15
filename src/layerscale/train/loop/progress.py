"""What the user watches: a tqdm bar (loss, accuracy, throughput, ETA) on a terminal, plain log lines elsewhere.

``mode``: ``"bar"`` (tqdm; needs the train extra), ``"log"`` (a line every ``log_every_steps``), ``"none"``, or
``"auto"``: a bar when tqdm is installed and stderr is a terminal with a known, non-zero width, else log lines (a
terminal of size 0 × 0, as some job consoles report, would show neither bar nor lines). Only rank 0 shows anything.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from typing import Any

from ...terminal import is_terminal

__all__ = ["Progress", "format_metrics"]


def format_metrics(values: dict[str, Any]) -> str:
    parts = []
    for key, value in values.items():
        if isinstance(value, float):
            parts.append(f"{key} {value:.3g}" if key in ("lr", "grad_norm") else f"{key} {value:.4f}")
        else:
            parts.append(f"{key} {value}")
    return "  ".join(parts)


class Progress:
    """Tracks steps ``initial..total``; ``update(step, values)`` after each step, ``message(text)`` for events."""

    def __init__(self, total: int, initial: int, mode: str, active: bool, unit: str = "step") -> None:
        self.total, self.initial = total, initial
        self._start = time.perf_counter()
        self._bar = None
        self.mode = "none" if not active else mode
        if self.mode in ("auto", "bar"):
            try:
                from tqdm.auto import tqdm
            except ImportError:
                if self.mode == "bar":
                    raise ImportError("run.progress: bar needs tqdm: pip install 'torch-layerscale[train]'") from None
                tqdm = None
            if tqdm is not None and (self.mode == "bar" or is_terminal(sys.stderr)):
                self._bar = tqdm(total=total, initial=initial, unit=unit, dynamic_ncols=True)
                self.mode = "bar"
            else:
                self.mode = "log"

    def eta(self, step: int) -> timedelta:
        done = step - self.initial
        elapsed = time.perf_counter() - self._start
        remaining = (self.total - step) * elapsed / done if done > 0 else 0.0
        return timedelta(seconds=round(remaining))

    def update(self, step: int, values: dict[str, Any] | None = None, log_line: bool = False) -> None:
        """Advance to ``step``; with ``values`` refresh the bar's numbers, and in log mode print a line when
        ``log_line``."""
        if self._bar is not None:
            self._bar.update(step - self._bar.n)
            if values:
                self._bar.set_postfix_str(format_metrics(values), refresh=False)
        elif self.mode == "log" and log_line and values is not None:
            print(f"step {step}/{self.total}  {format_metrics(values)}  eta {self.eta(step)}", flush=True)

    def message(self, text: str) -> None:
        if self._bar is not None:
            self._bar.write(text)
        elif self.mode != "none":
            print(text, flush=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
