"""``LayerScaleMonitor``: per-block, per-branch statistics of any transformer, recorded every ``k`` training steps.

Attach it to a model (ours, timm or Hugging Face; see :mod:`layerscale.diagnostics.discovery`) without changing
the model's code. A training step then reads::

    monitor = LayerScaleMonitor(model, every=50, log_fn=write_jsonl)
    for step, (x, y) in enumerate(loader):
        monitor.begin_step(step)        # monitored step: read the scales, snapshot the weights, install the hooks
        loss = loss_fn(model(x), y)
        loss.backward()
        clip_grad_norm_(model.parameters(), 1.0)
        monitor.after_backward()        # gradient norms (any time before the gradients are zeroed)
        optimizer.step()
        monitor.after_optimizer_step()  # update-to-weight ratios; writes the record, removes the hooks
        optimizer.zero_grad()

On the other steps every call returns at once and no hook is installed, so they cost nothing. Everything in the
record of step ``t`` describes the forward and backward of step ``t`` with the weights *before* its update, except
``update_ratio``, which measures that update. Only training-mode forwards are recorded (an evaluation forward
while a step is open is ignored) unless ``training_only=False``.

Formulas, with ``x`` the residual stream entering a branch and ``s = γ ⊙ F(norm(x))`` the scaled branch output
before stochastic depth, norms over the whole batch tensor:

* ``ratio = ‖s‖ / ‖x‖`` (Frobenius norms; with several forwards in one step, sums of squares are pooled and the
  ratio is computed as ``branch_rms / stream_in_rms``, the same value);
* ``branch_rms = ‖s‖ / √numel(s)``, ``stream_in_rms = ‖x‖ / √numel(x)``;
* ``stream_rms = ‖x_out‖ / √numel(x_out)`` for the block's output stream;
* ``scale_mean = mean|γ|``, ``scale_max = max|γ|`` (and ``scale_per_head = |γ_h|`` for the per-head form);
* ``grad_norm = ‖∇_θ L‖`` over all of the block's parameters θ, as the optimizer will see them;
* ``update_ratio = ‖θ_after − θ_before‖ / ‖θ_before‖`` across the optimizer step (an exact snapshot, not the
  ``lr · ‖g‖`` approximation, which is wrong for Adam-type optimizers).
"""

from __future__ import annotations

import inspect
import math
from typing import Any, Callable, Collection

import torch
from torch import nn

from .alerts import AlertThresholds, AlertTracker
from .discovery import BlockProbe, find_blocks, per_branch_refusal
from .statistics import global_norm, relative_update, scale_statistics, snapshot, sum_of_squares

__all__ = ["LayerScaleMonitor", "RECORD_SPLIT"]

#: The ``split`` of a diagnostics record in ``metrics.jsonl`` (the trainer's records use "train" and "eval").
RECORD_SPLIT = "diagnostics"


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]  # Hugging Face attention returns (output, weights)
    return None


def _stream_locator(probe: BlockProbe) -> tuple[int, str | None]:
    """(positional index, keyword name) of the block's stream argument."""
    try:
        names = list(inspect.signature(probe.module.forward).parameters)
    except (TypeError, ValueError):
        names = []
    if isinstance(probe.stream_arg, str):
        return (names.index(probe.stream_arg) if probe.stream_arg in names else 0), probe.stream_arg
    return probe.stream_arg, (names[probe.stream_arg] if len(names) > probe.stream_arg else None)


class _Sums:
    """Pooled sums of squares and element counts of one monitored step (device tensors; no synchronisation)."""

    def __init__(self, num_blocks: int, num_branches: int = 2) -> None:
        # [block][branch]: the stream entering the branch and the scaled branch output; [block]: the block output
        self.stream = [[None] * num_branches for _ in range(num_blocks)]
        self.stream_n = [[0] * num_branches for _ in range(num_blocks)]
        self.branch = [[None] * num_branches for _ in range(num_blocks)]
        self.branch_n = [[0] * num_branches for _ in range(num_blocks)]
        self.out = [None] * num_blocks
        self.out_n = [0] * num_blocks

    @staticmethod
    def add(table: list, counts: list, key: int, x: torch.Tensor) -> None:
        value = sum_of_squares(x)
        table[key] = value if table[key] is None else table[key] + value
        counts[key] += x.numel()


class LayerScaleMonitor:
    """Records scales, branch-to-stream ratios, stream RMS, gradient norms and update ratios every ``every`` steps.

    ``log_fn(record)`` receives each record (a ``dict``, schema in ``docs/diagnostics.md``) and each warning
    event; without it they are appended to :attr:`records`. ``thresholds`` configures the warnings
    (:class:`~layerscale.diagnostics.alerts.AlertThresholds`, or a mapping of its fields such as
    ``{"ratio_max": 5}``); ``warn=False`` turns them off (e.g. on all but
    one rank). ``track_updates=False`` skips the weight snapshot (it costs one copy of the blocks' weights on
    monitored steps) and with it ``update_ratio``. ``new_blocks``: the blocks a grown model's surgery inserted
    (:func:`layerscale.surgery.growth.new_blocks.new_block_modules`); their entries carry ``"new": true``, which the
    report marks. Raises ``ValueError`` for a model without recognisable blocks or with blocks it does not read
    (:func:`~.discovery.per_branch_refusal`), a bad ``every``, or new blocks that are not among the model's.

    ``scale_collapse`` compares each scale with its value when the monitor is built (the initial or loaded γ), so
    build it after loading the weights training starts from; on resume, :meth:`load_alert_state` restores the first
    run's reference.
    """

    def __init__(self, model: nn.Module, every: int = 50, log_fn: Callable[[dict], None] | None = None,
                 thresholds: AlertThresholds | None = None, track_updates: bool = True, warn: bool = True,
                 training_only: bool = True, new_blocks: Collection[nn.Module] = ()) -> None:
        if isinstance(every, bool) or not isinstance(every, int) or every < 1:
            raise ValueError(f"every must be a positive int (record every k steps), got {every!r}")
        if log_fn is not None and not callable(log_fn):
            raise ValueError(f"log_fn must be callable or None, got {log_fn!r}")
        self.model = model
        self.every = every
        self.log_fn = log_fn
        self.track_updates = track_updates
        self.warn = warn
        self.training_only = training_only
        self.probes = find_blocks(model)
        refusal = next((r for r in map(per_branch_refusal, self.probes) if r is not None), None)
        if refusal is not None:
            raise ValueError(refusal)
        new = {id(block) for block in new_blocks}
        self._new = [id(probe.module) in new for probe in self.probes]
        if len(new) > sum(self._new):
            raise ValueError(f"{len(new) - sum(self._new)} of the {len(new)} new blocks given are not among the "
                             f"model's {len(self.probes)} monitored blocks")
        self.records: list[dict] = []
        self._params = [[p for p in probe.module.parameters() if p.requires_grad] for probe in self.probes]
        self._locators = [_stream_locator(probe) for probe in self.probes]
        self._alerts = AlertTracker(AlertThresholds.of(thresholds), self._initial_scales())
        self._handles: list[torch.utils.hooks.RemovableHandle] = []
        self._step: int | None = None
        self._sums: _Sums | None = None
        self._scales: list[list[torch.Tensor | None]] = []
        self._grad_norms: list[torch.Tensor | None] = []
        self._before: list[list[torch.Tensor]] = []
        self._updates: list[torch.Tensor | None] = []

    @property
    def block_names(self) -> list[str]:
        """Qualified names of the monitored blocks, input to output."""
        return [probe.name for probe in self.probes]

    @property
    def current_step(self) -> int | None:
        """The monitored step in progress, or ``None``."""
        return self._step

    @property
    def active(self) -> bool:
        """Whether a monitored step is in progress (hooks installed)."""
        return self._step is not None

    def is_monitored(self, step: int) -> bool:
        """``step % every == 0`` (so step 0, the initialisation, is always recorded)."""
        return step % self.every == 0

    def _initial_scales(self) -> dict[tuple[str, str], float]:
        """Reference ``mean|γ₀|`` per branch for ``scale_collapse``: its ``mean|γ|`` now, when monitoring starts.

        That is the value the run starts from — the initial γ, or the loaded one when training continues from saved
        weights (``run.init_from``, a grown model, a fine-tuned checkpoint) — not the value the layer was built
        with, which loaded weights replace. A branch starting at exactly 0 (a grown block, ReZero) gets reference 0:
        no collapse check. A resumed run replaces these with the first run's (:meth:`load_alert_state`).
        """
        branches = [(probe.name, branch) for probe in self.probes for branch in probe.branches
                    if branch.scale is not None]
        if not branches:
            return {}
        means = [scale_statistics(branch.scale, branch.scale_kind)[0] for _, branch in branches]
        values = torch.stack([m.to(means[0].device) for m in means]).tolist()  # one host transfer
        return {(name, branch.name): value for (name, branch), value in zip(branches, values)}

    def alert_state(self) -> dict:
        """The warning state (:meth:`AlertTracker.state_dict`), for a checkpoint."""
        return self._alerts.state_dict()

    def load_alert_state(self, state: dict) -> None:
        """Restore :meth:`alert_state` (on resume, before the first monitored step)."""
        self._alerts.load_state_dict(state)

    # ---- the step protocol -------------------------------------------------------------------------------------

    def begin_step(self, step: int, force: bool = False) -> bool:
        """Before the forward of step ``step``: on a monitored step (or with ``force``) read the scales, snapshot
        the weights (with ``track_updates``) and install the hooks. Returns whether the step is monitored.

        A monitored step still open (its end never called) is finished and written first.
        """
        if self.active:
            self.end_step()
        if isinstance(step, bool) or not isinstance(step, int) or step < 0:
            raise ValueError(f"step must be an int >= 0, got {step!r}")
        if not (force or self.is_monitored(step)):
            return False
        self._step = step
        self._sums = _Sums(len(self.probes))
        self._scales = [[None if b.scale is None else scale_statistics(b.scale, b.scale_kind) for b in probe.branches]
                        for probe in self.probes]
        self._grad_norms, self._updates = [], []
        self._before = [snapshot(params) for params in self._params] if self.track_updates else []
        for index, probe in enumerate(self.probes):
            self._install(index, probe)
        return True

    def after_backward(self) -> None:
        """Gradient norms of every block: call after ``backward`` (and after unscaling / clipping, to see what the
        optimizer sees) and before the gradients are zeroed — before or after ``optimizer.step()``, which leaves
        them unchanged. A no-op outside a monitored step."""
        if not self.active:
            return
        self._grad_norms = [global_norm(p.grad for p in params if p.grad is not None) for params in self._params]

    def after_optimizer_step(self) -> dict | None:
        """After ``optimizer.step()``: update-to-weight ratios, then :meth:`end_step` (returns its record)."""
        if not self.active:
            return None
        if self._before:
            self._updates = [relative_update(before, params) for before, params in zip(self._before, self._params)]
            self._before = []
        return self.end_step()

    def end_step(self) -> dict | None:
        """Remove the hooks, build the record of the monitored step, check the warnings and write both.

        Returns the record (``None`` outside a monitored step). Use it directly, without the optimizer calls, to
        record forward statistics only (``grad_norm`` and ``update_ratio`` are then ``None``).
        """
        if not self.active:
            return None
        self._remove_hooks()
        record = self._build_record()
        self._step, self._sums = None, None
        self._emit(record)
        if self.warn:
            for event in self._alerts.check(record):
                self._emit(event)
        return record

    def close(self) -> None:
        """Remove any installed hook without writing a record (for an aborted step)."""
        self._remove_hooks()
        self._step, self._sums, self._before = None, None, []

    def __enter__(self) -> LayerScaleMonitor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ---- hooks --------------------------------------------------------------------------------------------------

    def _install(self, index: int, probe: BlockProbe) -> None:
        position, keyword = self._locators[index]
        sums = self._sums
        stream_from_block = [k for k, b in enumerate(probe.branches) if b.stream_module is None]
        block = probe.module
        training_only = self.training_only

        def block_input(module, args, kwargs):
            if training_only and not block.training:
                return
            x = kwargs[keyword] if keyword is not None and keyword in kwargs else (
                args[position] if len(args) > position else None)
            if isinstance(x, torch.Tensor):
                for k in stream_from_block:
                    sums.add(sums.stream[index], sums.stream_n[index], k, x)

        def block_output(module, args, output):
            if training_only and not block.training:
                return
            y = _first_tensor(output)
            if y is not None:
                sums.add(sums.out, sums.out_n, index, y)

        self._handles.append(probe.module.register_forward_pre_hook(block_input, with_kwargs=True))
        self._handles.append(probe.module.register_forward_hook(block_output))
        for k, branch in enumerate(probe.branches):
            if branch.stream_module is not None:
                def stream_input(module, args, k=k):
                    if training_only and not block.training:
                        return
                    if args and isinstance(args[0], torch.Tensor):
                        sums.add(sums.stream[index], sums.stream_n[index], k, args[0])

                self._handles.append(branch.stream_module.register_forward_pre_hook(stream_input))

            def branch_output(module, args, output, k=k, gain=branch.output_gain):
                if training_only and not block.training:
                    return
                s = _first_tensor(output)
                if s is not None:
                    s = s.detach()
                    sums.add(sums.branch[index], sums.branch_n[index], k, s * gain() if gain is not None else s)

            self._handles.append(branch.output_module.register_forward_hook(branch_output))

    def _remove_hooks(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles = []

    # ---- the record ---------------------------------------------------------------------------------------------

    def _build_record(self) -> dict:
        sums = self._sums
        pending: list[torch.Tensor] = []
        size = [0]

        def later(t: torch.Tensor | None) -> slice | None:
            """Queue ``t`` for the one host transfer (one synchronisation per record); return where it will be."""
            if t is None:
                return None
            pending.append(t.detach().reshape(-1).float())
            size[0] += t.numel()
            return slice(size[0] - t.numel(), size[0])

        layout = []
        for b, probe in enumerate(self.probes):
            branches = []
            for k in range(len(probe.branches)):
                branches.append((later(self._scales[b][k]), later(sums.branch[b][k]), later(sums.stream[b][k])))
            layout.append((branches, later(sums.out[b]),
                           later(self._grad_norms[b] if self._grad_norms else None),
                           later(self._updates[b] if self._updates else None)))
        values = self._to_host(pending)

        def get(where: slice | None) -> list[float] | None:
            return None if where is None else values[where]

        blocks = []
        for b, (probe, (branches, out, grad, update)) in enumerate(zip(self.probes, layout)):
            entry: dict[str, Any] = {"name": probe.name, "index": b + 1,
                                     "stream_rms": _rms(get(out), sums.out_n[b]),
                                     "grad_norm": _scalar(get(grad)), "update_ratio": _scalar(get(update))}
            if self._new[b]:
                entry["new"] = True
            for k, branch in enumerate(probe.branches):
                scale_at, branch_at, stream_at = branches[k]
                scale = get(scale_at)
                s_sq, x_sq = _scalar(get(branch_at)), _scalar(get(stream_at))
                branch_rms = _rms([s_sq] if s_sq is not None else None, sums.branch_n[b][k])
                stream_rms = _rms([x_sq] if x_sq is not None else None, sums.stream_n[b][k])
                stats: dict[str, Any] = {
                    "scale_kind": branch.scale_kind,
                    "scale_mean": None if scale is None else scale[0],
                    "scale_max": None if scale is None else scale[1],
                    "ratio": _ratio(branch_rms, stream_rms),
                    "branch_rms": branch_rms,
                    "stream_in_rms": stream_rms,
                }
                if branch.scale_kind == "head" and scale is not None:
                    stats["scale_per_head"] = scale[2:]
                entry[branch.name] = stats
            blocks.append(entry)
        return {"split": RECORD_SPLIT, "step": self._step, "blocks": blocks}

    @staticmethod
    def _to_host(pending: list[torch.Tensor]) -> list[float]:
        if not pending:
            return []
        device = pending[0].device
        return torch.cat([t.to(device) for t in pending]).tolist()

    def _emit(self, record: dict) -> None:
        if self.log_fn is None:
            self.records.append(record)
        else:
            self.log_fn(record)


def _scalar(values: list[float] | None) -> float | None:
    return None if values is None else values[0]


def _rms(sum_sq: list[float] | None, count: int) -> float | None:
    """``sqrt(Σx² / n)``; ``None`` when nothing was observed. (``sum_sq`` holds the pooled sum of squares.)"""
    if sum_sq is None or count == 0:
        return None
    return math.sqrt(sum_sq[0] / count)


def _ratio(branch_rms: float | None, stream_rms: float | None) -> float | None:
    """``‖s‖ / ‖x‖`` as ``RMS(s) / RMS(x)`` (equal, since ``s`` and ``x`` have the same shape in every forward).

    The RMS form is immune to a forward observed twice: activation checkpointing recomputes a block during the
    backward and may stop part-way, so the hooks of the branch output and of its stream need not fire equally
    often; each RMS is a mean over its own observations, all of identical values. ``None`` when either was not
    observed, ``inf`` for a zero stream.
    """
    if branch_rms is None or stream_rms is None:
        return None
    if stream_rms == 0.0:
        return math.inf if branch_rms > 0 else math.nan
    return branch_rms / stream_rms
