"""Model FLOPs utilisation (MFU): a step's FLOPs, the FLOP rate it achieves, and the machine's GEMM peak.

* :func:`count_flops` — FLOPs of one call of ``fn`` (e.g. a training step: forward and backward) by PyTorch's
  ``torch.utils.flop_counter.FlopCounterMode``, which counts matrix products, convolutions and attention (``2·m·n·k``
  per ``(m×k)·(k×n)`` product) and nothing element-wise: the work the model does, not the optimizer's.
* :func:`gemm_peak` — the best FLOP rate of a square ``n × n`` matrix product in ``dtype`` on the benchmark's own
  clock, device and thread count, measured in the same process: the practical ceiling a GEMM-bound step can reach
  here (a machine's data-sheet peak is higher and does not account for a shared machine's load).
* :func:`mfu` — achieved / peak, the fraction of that ceiling a step reaches.
"""

from __future__ import annotations

from typing import Callable

import torch
from torch.utils.flop_counter import FlopCounterMode

from cpu_timing import clock_function


def count_flops(fn: Callable[[], object]) -> int:
    """FLOPs that ``fn()`` executes (forward and, if it calls ``backward``, backward), by ``FlopCounterMode``."""
    with FlopCounterMode(display=False) as counter:
        fn()
    return int(counter.get_total_flops())


def gemm_peak(device: str = "cpu", dtype: torch.dtype = torch.float32, size: int = 1024, rounds: int = 5,
              clock: str = "wall", sync: Callable[[], None] = lambda: None) -> float:
    """FLOP/s of the fastest of ``rounds`` timed ``(size × size) @ (size × size)`` products (2·size³ FLOPs each).

    Each round times enough back-to-back products to last about 0.2 s at the first round's rate, after one untimed
    warm-up (so that oneDNN / cuBLAS pick and cache their kernels). ``clock`` is ``"wall"`` or ``"cpu"`` (process
    CPU time, see ``cpu_timing.py``), the one the benchmark times its steps with.
    """
    if size < 1 or rounds < 1:
        raise ValueError(f"size and rounds must be >= 1, got size={size}, rounds={rounds}")
    generator = torch.Generator().manual_seed(0)
    a = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    b = torch.randn(size, size, generator=generator).to(device=device, dtype=dtype)
    now, flops = clock_function(clock), 2.0 * size**3
    a @ b
    sync()
    start = now()
    a @ b
    sync()
    repeats = max(1, min(1000, int(0.2 / max(now() - start, 1e-6))))
    best = 0.0
    for _ in range(rounds):
        start = now()
        for _ in range(repeats):
            a @ b
        sync()
        best = max(best, repeats * flops / max(now() - start, 1e-9))
    return best


def mfu(flops: float, seconds: float, peak: float) -> float:
    """``(flops / seconds) / peak``: the fraction of the measured GEMM peak a step of ``flops`` in ``seconds`` uses."""
    if seconds <= 0 or peak <= 0:
        raise ValueError(f"seconds and peak must be > 0, got seconds={seconds}, peak={peak}")
    return flops / seconds / peak


def describe_peaks(peaks: dict[str, float]) -> str:
    """One line: ``GEMM peak (same process): fp32 115.2 GFLOP/s, bf16 310.4 GFLOP/s``."""
    return "GEMM peak (same process): " + ", ".join(f"{name} {value / 1e9:.1f} GFLOP/s"
                                                    for name, value in peaks.items())


def measure_peaks(device: str, clock: str, sync: Callable[[], None], size: int | None = None,
                  rounds: int = 5) -> dict[str, float]:
    """:func:`gemm_peak` in fp32 and bf16 (the two precisions the benchmarks run).

    ``size`` defaults to 1024 on a CPU and 8192 on a GPU, where a 1024³ product lasts microseconds and measures
    launch latency rather than the tensor cores' rate.
    """
    if size is None:
        size = 1024 if torch.device(device).type == "cpu" else 8192
    return {name: gemm_peak(device, dtype, size=size, rounds=rounds, clock=clock, sync=sync)
            for name, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16))}
