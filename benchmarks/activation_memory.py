"""Exact, deterministic memory measurements for the benchmarks (peak RSS is process-wide and noisy; these are not).

* :func:`saved_tensor_bytes` — bytes autograd saves for the backward during ``fn()``, counted through
  ``torch.autograd.graph.saved_tensors_hooks``: each storage once, parameters excluded.
* :func:`allocation_profile` — from the profiler's allocation events (CPU) or the CUDA allocator: the bytes still
  allocated when ``fn()`` returns (for a forward: every activation kept for the backward, including what a
  checkpoint keeps alive outside autograd's saved tensors) and the peak above the starting point while it ran.

Beside them, the ``--dtype`` and ``--device`` helpers the scripts share: :func:`parse_dtype`, :func:`autocast_context`
and :func:`synchronizer`.
"""

from __future__ import annotations

import contextlib
from typing import Callable, ContextManager, Iterable

import torch
from torch.profiler import ProfilerActivity, profile


def _storage_key(t: torch.Tensor) -> tuple[str, int]:
    return (str(t.device), t.untyped_storage().data_ptr())


def saved_tensor_bytes(fn: Callable[[], object], exclude: Iterable[torch.Tensor] = ()) -> tuple[int, object]:
    """``(bytes, fn())``: the distinct storages autograd saved while ``fn`` ran, minus those of ``exclude``."""
    skip = {_storage_key(t) for t in exclude}
    seen: dict[tuple[str, int], int] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        key = _storage_key(t)
        if key not in skip and t.device.type != "meta":
            seen[key] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        result = fn()
    return sum(seen.values()), result


def allocation_profile(fn: Callable[[], object], device: str = "cpu") -> tuple[int, int, object]:
    """``(retained_bytes, peak_bytes, fn())`` measured from the allocator, relative to the start of the call."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
        start = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
        result = fn()
        torch.cuda.synchronize()
        return torch.cuda.memory_allocated() - start, torch.cuda.max_memory_allocated() - start, result
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        result = fn()
    events = [e for e in prof.profiler.kineto_results.events() if e.name() == "[memory]"]
    events.sort(key=lambda e: e.start_ns())
    current = peak = 0
    for event in events:
        current += event.nbytes()
        peak = max(peak, current)
    return current, peak, result


def parse_dtype(name: str) -> torch.dtype:
    """``--dtype`` values shared by the scripts: fp32, bf16, fp16, fp64."""
    table = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16, "fp64": torch.float64}
    if name not in table:
        raise ValueError(f"--dtype must be one of {sorted(table)}, got {name!r}")
    return table[name]


def autocast_context(device: str, dtype: torch.dtype) -> Callable[[], ContextManager]:
    """A factory of ``torch.autocast`` contexts to ``dtype`` for bf16 and fp16, of no-op contexts otherwise."""
    if dtype in (torch.bfloat16, torch.float16):
        return lambda: torch.autocast(torch.device(device).type, dtype=dtype)
    return contextlib.nullcontext


def synchronizer(device: str) -> Callable[[], None]:
    """A no-op on the CPU; ``torch.cuda.synchronize`` on a GPU, so that timings include the queued kernels."""
    return torch.cuda.synchronize if torch.device(device).type == "cuda" else (lambda: None)
