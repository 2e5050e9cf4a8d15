"""Shapes at a fixed parameter budget: for each depth, the width whose model has (about) the budget's parameters.

A DepthBench-style sweep compares shallow-wide with deep-narrow models of the same size. :func:`choose_shapes` picks,
for every depth, the width (a multiple of ``width_multiple``, itself a multiple of the head count, so the heads
always divide the width) whose parameter count is nearest the budget, and refuses in one line when that nearest
count is more than ``tolerance`` (default ±5 %) away. Counts are exact: each candidate is built on the meta device
(no memory, no initialisation) with the method, so a method's own parameters (Hyper-Connections' mixing weights,
Admin's ω, NormFormer's norms) count towards the budget. Pure: nothing is trained, written or seeded.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import torch

from ...models.registry import create_model

__all__ = ["ShapeRow", "choose_shapes", "count_parameters"]

#: The default tolerance on the parameter count: ±5 % of the budget.
DEFAULT_TOLERANCE = 0.05


@dataclass(frozen=True)
class ShapeRow:
    """One cell's shape: ``depth`` blocks of ``width`` channels in ``heads`` heads, ``params`` parameters in all."""

    depth: int
    width: int
    heads: int
    params: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


def count_parameters(model: str, config: Mapping[str, Any]) -> int:
    """The number of parameters of ``create_model(model, **config)``, built on the meta device."""
    with torch.device("meta"):
        built = create_model(model, **dict(config))
    return sum(p.numel() for p in built.parameters())


def _positive_int(name: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _nearest_width(model: str, config: dict[str, Any], depth: int, step: int, budget: int) -> tuple[int, int]:
    """The multiple of ``step`` whose count is nearest ``budget`` (counts grow with the width: bisection)."""
    def params(k: int) -> int:
        return count_parameters(model, {**config, "depth": depth, "embed_dim": k * step})

    low, high = 1, 1
    while params(high) < budget:  # smallest power-of-two multiple at or above the budget
        low, high = high, high * 2
    while high - low > 1:
        mid = (low + high) // 2
        if params(mid) < budget:
            low = mid
        else:
            high = mid
    candidates = [(abs(params(k) - budget), k) for k in {low, high}]
    _, k = min(candidates)
    return k * step, params(k)


def choose_shapes(model: str, base: Mapping[str, Any], depths: Sequence[int], *, budget: int | None = None,
                  reference_depth: int | None = None, reference_width: int | None = None,
                  width_multiple: int | None = None, tolerance: float = DEFAULT_TOLERANCE) -> list[ShapeRow]:
    """For each of ``depths``, the width at which ``model`` (``base`` overrides, e.g. the residual method) has
    ``budget`` parameters within ``±tolerance``; rows in the order of ``depths``.

    The budget is ``budget``, or the count of the reference shape (``reference_depth`` blocks of
    ``reference_width``) — give exactly one of the two. The head count is ``base["num_heads"]`` (else the model's
    default) and stays fixed; widths are multiples of ``width_multiple`` (default ``2 × heads``: an even head
    dimension), which must be a multiple of the head count. Raises ``ValueError`` in one line for a bad argument
    or when some depth's nearest count is off by more than the tolerance (naming the depth, the nearest widths
    and their counts).
    """
    from ...models.registry import model_defaults

    config = dict(base)
    for key in ("depth", "embed_dim"):
        if key in config:
            raise ValueError(f"base must not set {key!r}: the sweep chooses it per cell")
    if not depths or len(set(depths)) != len(depths):
        raise ValueError(f"depths must be distinct positive ints, got {list(depths)}")
    for depth in depths:
        _positive_int("depth", depth)
    if not isinstance(tolerance, (int, float)) or isinstance(tolerance, bool) or not 0 < tolerance < 1:
        raise ValueError(f"tolerance must be a number in (0, 1), got {tolerance!r}")
    heads = _positive_int("num_heads", config.get("num_heads", model_defaults(model)["num_heads"]))
    config["num_heads"] = heads
    step = 2 * heads if width_multiple is None else _positive_int("width_multiple", width_multiple)
    if step % heads:
        raise ValueError(f"width_multiple {step} is not a multiple of num_heads {heads}: the heads must divide "
                         f"every width")
    if (budget is None) == (reference_depth is None and reference_width is None):
        raise ValueError("give either budget= or reference_depth= and reference_width=, not both and not neither")
    if budget is None:
        if reference_depth is None or reference_width is None:
            raise ValueError("a reference shape needs both reference_depth= and reference_width=")
        budget = count_parameters(model, {**config, "depth": _positive_int("reference_depth", reference_depth),
                                          "embed_dim": _positive_int("reference_width", reference_width)})
    budget = _positive_int("budget", budget)
    rows = []
    for depth in depths:
        width, params = _nearest_width(model, config, depth, step, budget)
        if abs(params - budget) > tolerance * budget:
            raise ValueError(f"depth {depth}: no width (multiple of {step}) gives {budget:,} parameters "
                             f"±{tolerance:.0%}; nearest is width {width} with {params:,} ({params / budget - 1:+.1%})")
        rows.append(ShapeRow(depth, width, heads, params))
    return rows
