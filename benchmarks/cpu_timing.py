"""Interleaved medians on a chosen clock, for machines shared with other jobs.

:func:`common.interleaved_medians` times wall-clock seconds, which count the time this process waits while other
jobs hold the cores. With one intra-op thread (``--threads 1``), the process's CPU time (``time.process_time``)
counts only the work done for the candidate, so ratios stay stable under load (cache and memory-bandwidth
contention still show). With several threads CPU time also counts threads spinning at barriers: use wall time then.
:func:`add_timing_arguments` and :func:`apply_timing_arguments` give the scripts their shared ``--threads``,
``--device``, ``--dtype`` and ``--clock`` options.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import torch

from common import interleaved_medians

CLOCKS = ("auto", "wall", "cpu")


def add_timing_arguments(parser: argparse.ArgumentParser, dtype: bool = True) -> None:
    """The options the timing scripts share: ``--threads``, ``--device``, ``--dtype`` (unless ``dtype=False``) and
    ``--clock``; :func:`apply_timing_arguments` puts them into effect."""
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", default="cpu")
    if dtype:
        parser.add_argument("--dtype", default="fp32")
    parser.add_argument("--clock", default="auto", choices=CLOCKS,
                        help="cpu: process CPU time (robust on a shared machine); auto: cpu on 1 CPU thread, else wall")


def apply_timing_arguments(args: argparse.Namespace) -> None:
    """Run on ``args.threads`` intra-op threads and replace ``args.clock`` by the clock :func:`resolve_clock` picks."""
    torch.set_num_threads(args.threads)
    args.clock = resolve_clock(args.clock, args.device, args.threads)


def resolve_clock(clock: str, device: str, threads: int) -> str:
    """``auto`` means ``cpu`` for a CPU run on one thread and ``wall`` otherwise (GPU, or several threads)."""
    if clock not in CLOCKS:
        raise ValueError(f"--clock must be one of {CLOCKS}, got {clock!r}")
    if clock == "cpu" and device != "cpu":
        raise ValueError(f"--clock cpu measures host CPU time and cannot time a {device} run; use --clock wall")
    if clock == "auto":
        return "cpu" if device == "cpu" and threads == 1 else "wall"
    return clock


def clock_function(clock: str) -> Callable[[], float]:
    """``time.process_time`` for ``"cpu"``, ``time.perf_counter`` for ``"wall"``."""
    return time.process_time if clock == "cpu" else time.perf_counter


def medians_on_clock(candidates: dict[str, Callable[[], object]], rounds: int, clock: str = "wall",
                     warmup: int = 2) -> dict[str, float]:
    """:func:`common.interleaved_medians` on ``clock`` (``"wall"``: ``perf_counter``; ``"cpu"``: ``process_time``)."""
    if clock not in ("wall", "cpu"):
        raise ValueError(f"clock must be 'wall' or 'cpu' (see resolve_clock), got {clock!r}")
    if clock == "wall":
        return interleaved_medians(candidates, rounds=rounds, warmup=warmup)
    cpu_seconds: dict[str, list[float]] = {name: [] for name in candidates}

    def timed(name: str, fn: Callable[[], object]) -> Callable[[], object]:
        def run():
            start = time.process_time()
            result = fn()
            cpu_seconds[name].append(time.process_time() - start)
            return result
        return run

    # The wall-clock medians are discarded; the same interleaving yields one CPU-time sample per call.
    interleaved_medians({name: timed(name, fn) for name, fn in candidates.items()}, rounds=rounds, warmup=warmup)
    return {name: statistics.median(values[warmup:]) for name, values in cpu_seconds.items()}
