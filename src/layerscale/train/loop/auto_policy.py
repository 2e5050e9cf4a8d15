"""What ``run.precision: auto`` and ``run.compile: auto`` choose: fixed rules from measurements, not guesses.

Both rules are functions of the device and the model configuration only, so a run (and its resumption) always
makes the same choice on the same machine.

**Precision** (``benchmarks/bench_precision.py``, ``docs/performance.md``). bf16 autocast pays where the step is
dominated by matrix products large enough to use the hardware's bf16 units; narrow models are dominated by per-operator
costs that autocast's casts add to. Measured on a CPU with AVX-512 BF16 (2026-11-30, ViT training step, depth 4,
batch 64): fp32 / bf16 time 0.67, 0.75, 0.86, 1.08, 1.25, 1.44 at widths 64, 96, 128, 192, 256, 384 with 17
tokens, and 1.02, 1.21, 1.35, 1.53, 1.90, 1.98 with 65 tokens. bf16 wins at both token counts from width
:data:`CPU_BF16_MIN_WIDTH` = 192 on, so on a CPU with native bf16 (AVX-512 BF16 or AMX) ``auto`` picks bf16 from
that width and fp32 below it; on a CPU without native bf16 (emulated, slower) always fp32. Measured on an NVIDIA
H200 (2026-11-30, same benchmark, batch 256): fp32 / bf16 training time 0.87, 0.84, 0.90, 1.04, 0.95, 1.79 at widths
64–384 with 65 tokens and 0.78–0.89 at every width with 17 tokens — models this small are bound by kernel launches,
which autocast's casts add to, not by the tensor cores. So on a CUDA device with bf16 support (compute capability
≥ 8.0) ``auto`` picks bf16 from width :data:`CUDA_BF16_MIN_WIDTH` = 384 on (the one width where it measured
faster; wider models are where bf16 is the established choice) and fp32 below; without bf16 support, fp32.

**Compilation** (``benchmarks/bench_compile_gain.py``). Regional compilation
(:func:`layerscale.models.compile_blocks`, Inductor) measured on the CPU: steady-state training step 0.98× eager at
width 64 / depth 12 (the Fashion-MNIST study) and 0.95× at width 192 / depth 12, for 170–190 s of compilation — it
never wins there, so ``auto`` does not compile on a CPU. On an NVIDIA H200 (2026-11-30, width 192, depth 12,
batch 256) the step ran 1.14× faster for 8.4 s of compilation: break-even after ≈ 1,760 steps. So on CUDA ``auto``
compiles the blocks of a run planned for at least :data:`CUDA_COMPILE_MIN_STEPS` steps (twice that break-even, a
margin for the one measured configuration) and stays eager for shorter runs and on any other device;
``run.compile: regional`` compiles unconditionally.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["CPU_BF16_MIN_WIDTH", "CUDA_BF16_MIN_WIDTH", "CUDA_COMPILE_MIN_STEPS", "choose_compile", "choose_precision",
           "cpu_has_native_bf16", "model_width"]

#: The narrowest model width at which bf16 autocast measured faster than fp32 on a CPU with native bf16.
CPU_BF16_MIN_WIDTH = 192
#: The narrowest model width at which bf16 autocast measured faster than fp32 on a CUDA device (an H200).
CUDA_BF16_MIN_WIDTH = 384
#: Shortest planned run (optimizer steps) that ``compile: auto`` compiles on CUDA: twice the measured break-even.
CUDA_COMPILE_MIN_STEPS = 3500


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 matrix products natively (AVX-512 BF16 or AMX tiles), as oneDNN sees it."""
    cpu = getattr(torch._C, "_cpu", None)
    checks = ("_is_avx512_bf16_supported", "_is_amx_tile_supported")
    return any(bool(getattr(cpu, name, lambda: False)()) for name in checks) if cpu is not None else False


def model_width(model: nn.Module) -> int | None:
    """The model's width (its ``embed_dim`` attribute, as our ViT, CaiT and GPT have); ``None`` if it has none."""
    width = getattr(model, "embed_dim", None)
    return width if isinstance(width, int) and not isinstance(width, bool) else None


def _bf16_from_width(width: int | None, minimum: int, device_words: str, hardware: str) -> tuple[str, str]:
    """bf16 from ``minimum`` on, fp32 below it or when the width is unknown, with the reason in words."""
    if width is None:
        return "fp32", "auto: the model's width is unknown"
    if width >= minimum:
        return "bf16", f"auto: {device_words} and width {width} >= {minimum}"
    return "fp32", f"auto: width {width} < {minimum}, where bf16 measured slower on {hardware}"


def choose_precision(requested: str, device: torch.device, width: int | None) -> tuple[str, str]:
    """``(precision, reason)``: ``requested`` itself unless it is ``"auto"``, then the rule of the module docstring."""
    if requested != "auto":
        return requested, "as configured"
    if device.type == "cuda":
        if not torch.cuda.is_bf16_supported():
            return "fp32", "auto: this CUDA device has no bf16 support"
        return _bf16_from_width(width, CUDA_BF16_MIN_WIDTH, "CUDA device with bf16", "a GPU")
    if device.type != "cpu":
        return "fp32", f"auto: no measured rule for device type {device.type!r}"
    if not cpu_has_native_bf16():
        return "fp32", "auto: this CPU has no native bf16 (AVX-512 BF16 / AMX)"
    return _bf16_from_width(width, CPU_BF16_MIN_WIDTH, "CPU with native bf16", "a CPU")


def choose_compile(requested: str, device: torch.device, total_steps: int | None = None) -> tuple[bool, str]:
    """``(compile the blocks?, reason)``: ``"regional"`` always, ``"off"`` never, ``"auto"`` by the measured rule of the
    module docstring (CUDA and a run of at least :data:`CUDA_COMPILE_MIN_STEPS` planned steps)."""
    if requested == "regional":
        return True, "as configured"
    if requested == "off":
        return False, "as configured"
    if device.type == "cpu":
        return False, "auto: regional compilation measured slower than eager on a CPU (0.95-0.98x)"
    if device.type != "cuda":
        return False, f"auto: regional compilation not measured on {device.type}"
    if total_steps is None or total_steps < CUDA_COMPILE_MIN_STEPS:
        return False, (f"auto: a run of {total_steps} steps on CUDA is shorter than {CUDA_COMPILE_MIN_STEPS}, "
                       "twice the measured break-even of compiling")
    return True, f"auto: CUDA and {total_steps} >= {CUDA_COMPILE_MIN_STEPS} steps (measured 1.14x after compiling)"
