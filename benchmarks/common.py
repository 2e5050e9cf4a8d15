"""Shared helpers for the benchmark scripts: interleaved timing of several candidates, medians and ratios.

Every benchmark measures the thing and its baseline in the same process, interleaving the candidates round by
round so that a noisy, shared machine slows them alike; it reports medians and ratios, never absolute claims.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable


def model_timing_parser(description: str, *, threads: int, depth: int, width: int, batch: int,
                        rounds: int) -> argparse.ArgumentParser:
    """The options every model-timing benchmark takes (``--threads --depth --width --batch --rounds``), with that
    benchmark's defaults; a benchmark adds its own options to the parser it gets back."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--threads", type=int, default=threads,
                        help=f"intra-op threads (default {threads}; on a shared machine more threads add noise)")
    parser.add_argument("--depth", type=int, default=depth)
    parser.add_argument("--width", type=int, default=width)
    parser.add_argument("--batch", type=int, default=batch)
    parser.add_argument("--rounds", type=int, default=rounds)
    return parser


def interleaved_medians(candidates: dict[str, Callable[[], object]], rounds: int, warmup: int = 2,
                        inner: int = 1) -> dict[str, float]:
    """Median seconds per call of each candidate, timing them in alternating order for ``rounds`` rounds."""
    for fn in candidates.values():
        for _ in range(warmup):
            fn()
    samples: dict[str, list[float]] = {name: [] for name in candidates}
    names = list(candidates)
    for r in range(rounds):
        order = names if r % 2 == 0 else names[::-1]
        for name in order:
            start = time.perf_counter()
            for _ in range(inner):
                candidates[name]()
            samples[name].append((time.perf_counter() - start) / inner)
    return {name: statistics.median(values) for name, values in samples.items()}


def print_table(medians: dict[str, float], baseline: str, unit_scale: float = 1e3, unit: str = "ms") -> None:
    """One line per candidate: median time and ratio to ``baseline``."""
    base = medians[baseline]
    for name, value in medians.items():
        print(f"  {name:32s} {value * unit_scale:10.3f} {unit}   ratio vs {baseline}: {value / base:6.3f}")
