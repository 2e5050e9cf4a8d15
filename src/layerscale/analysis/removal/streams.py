"""The residual stream at every block input, cached, and forward passes that reuse it.

The blocks are those :func:`layerscale.diagnostics.find_blocks` discovers (ours, timm, Hugging Face): the
**main stack** is every block whose stream is its first argument; CaiT's class-attention blocks (which take a
separate class-token stream) belong to the head stage and are always run. One capture pass records, per batch, the
stream ``x_l`` entering each block ``l`` (``x_L`` leaving the last) and each block's raw output. A later pass then
replaces blocks' ``forward`` temporarily (an instance attribute, restored afterwards) so that:

* a block **before** the one of interest returns its cached output at no cost,
* an **ablated** block returns its input (``x_{l+1} = x_l``), its output structure otherwise unchanged,
* the blocks **after** it run normally, then the model's own final norm and head.

Ablating block ``l`` of ``L`` thus costs ``L − l`` block evaluations (about ``L²/2`` for all blocks) instead of ``L``
(``L²``); truncating the stack after block ``k`` (every later block an identity: early exit through the model's
own final norm and head, the logit lens for a language model) costs none. The cache holds
``(L + 1) · batch · tokens · width`` stream values plus the ``L`` block outputs, which alias the next inputs.
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

import torch
from torch import nn

from ...diagnostics.discovery import BlockProbe, find_blocks, per_branch_refusal

__all__ = ["BlockStack", "CapturedBatch", "find_block_stack", "MODULE_POINTS"]

#: Module-level observation points inside each block (besides the block output).
MODULE_POINTS = ("attn_out", "mlp_out", "norm2_in")
_MISSING = object()


def _first_tensor(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, (tuple, list)) and value and isinstance(value[0], torch.Tensor):
        return value[0]
    return None


def _copy(value: torch.Tensor | None) -> torch.Tensor | None:
    return None if value is None else value.clone()


def _with_stream(template: Any, stream: torch.Tensor) -> Any:
    """``template`` (a block's output: a tensor, or a tuple whose first element is the stream) with its stream
    replaced by ``stream``."""
    if isinstance(template, tuple):
        return (stream, *template[1:])
    if isinstance(template, list):
        return [stream, *template[1:]]
    return stream


def _stream_argument(args: tuple, kwargs: dict) -> Any:
    if args:
        return args[0]
    for key in ("hidden_states", "x"):
        if key in kwargs:
            return kwargs[key]
    return next(iter(kwargs.values()), None)


@dataclass
class CapturedBatch:
    """One batch's clean pass: ``streams[l]`` enters block ``l`` (0-based), ``streams[L]`` leaves the last block;
    ``outputs[l]`` is block ``l``'s raw output; ``points[name][l]`` the module point's tensor (when captured)."""

    streams: list[torch.Tensor]
    outputs: list[Any]
    output: Any
    points: dict[str, list[torch.Tensor | None]] = field(default_factory=dict)


@dataclass
class BlockStack:
    """A model and its main stack of blocks; ``call(inputs)`` is the model's forward on one batch; ``head_blocks``
    are the discovered blocks outside the main stack (CaiT's class attention), which always run."""

    model: nn.Module
    blocks: list[BlockProbe]
    call: Callable[[torch.Tensor], Any]
    head_blocks: list[BlockProbe] = field(default_factory=list)

    @property
    def model_name(self) -> str:
        return type(self.model).__name__

    @property
    def depth(self) -> int:
        return len(self.blocks)

    @contextmanager
    def _replaced(self, replacements: dict[int, Callable[..., Any]]) -> Iterator[None]:
        saved = []
        try:
            for index, fn in replacements.items():
                module = self.blocks[index].module
                saved.append((module, module.__dict__.get("forward", _MISSING)))
                module.forward = fn
            yield
        finally:
            for module, previous in reversed(saved):
                if previous is _MISSING:
                    del module.forward
                else:
                    module.forward = previous

    def capture_evaluation(self, inputs: torch.Tensor, module_points: bool = False) -> CapturedBatch:
        """:meth:`capture` of an evaluation batch; a model that cannot take it (a shape or dtype it does not
        accept) is one ``ValueError`` naming the batch and the model's first error line."""
        try:
            return self.capture(inputs, module_points=module_points)
        except (RuntimeError, IndexError) as exc:
            raise ValueError(f"{self.model_name} cannot take evaluation inputs of shape {tuple(inputs.shape)} "
                             f"{inputs.dtype} on {inputs.device}: {str(exc).splitlines()[0]}") from None

    def capture(self, inputs: torch.Tensor, module_points: bool = False) -> CapturedBatch:
        """The clean forward of ``inputs``, recording every block's input stream and output (and, with
        ``module_points``, the attention-branch output, MLP-branch output and second-norm input of each block).

        Raises a one-line ``ValueError`` when a block's stream is not one ``(batch, tokens, width)`` tensor, or when
        the blocks are not chained (a block's input is not the previous block's output).
        """
        depth = self.depth
        inputs_seen: list[Any] = [None] * depth
        outputs_seen: list[Any] = [None] * depth
        points: dict[str, list[torch.Tensor | None]] = {p: [None] * depth for p in MODULE_POINTS} if module_points \
            else {}
        handles = []

        batch = inputs.shape[0]

        def record(store: list, index: int, value: Any) -> None:
            store[index] = value

        def record_input(index: int, args: tuple, kwargs: dict) -> None:
            x = _stream_argument(args, kwargs)
            self._check_stream(index, x, batch)  # before the block runs on a stream it was not built for
            inputs_seen[index] = x

        try:
            for index, probe in enumerate(self.blocks):
                handles.append(probe.module.register_forward_pre_hook(
                    lambda m, a, k, i=index: record_input(i, a, k), with_kwargs=True))
                handles.append(probe.module.register_forward_hook(
                    lambda m, a, out, i=index: record(outputs_seen, i, out)))
                if not module_points or per_branch_refusal(probe) is not None:  # its branch points stay None
                    continue
                attn, mlp = probe.branches[0], probe.branches[1]
                # copies: a layer may add into a branch's output in place after the hook (Falcon's
                # ``mlp_output += attention_output``)
                handles.append(attn.output_module.register_forward_hook(
                    lambda m, a, out, i=index: record(points["attn_out"], i, _copy(_first_tensor(out)))))
                handles.append(mlp.output_module.register_forward_hook(
                    lambda m, a, out, i=index: record(points["mlp_out"], i, _copy(_first_tensor(out)))))
                if mlp.stream_module is not None:
                    handles.append(mlp.stream_module.register_forward_pre_hook(
                        lambda m, a, i=index: record(points["norm2_in"], i, a[0] if a else None)))
            output = self.call(inputs)
        finally:
            for handle in handles:
                handle.remove()
        streams = self._check_streams(inputs.shape[0], inputs_seen, outputs_seen)
        return CapturedBatch(streams, outputs_seen, output, points)

    def _describe(self) -> str:
        residual = getattr(self.model, "residual", None)
        return self.model_name + (f" (residual {residual!r})" if isinstance(residual, str) else "")

    def _check_stream(self, index: int, x: Any, batch: int, y: torch.Tensor | None = None) -> None:
        if not isinstance(x, torch.Tensor) or x.dim() != 3 or x.shape[0] != batch or (y is not None
                                                                                       and y.shape != x.shape):
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            raise ValueError(f"{self._describe()}: the stream entering block {self.blocks[index].name!r} is {shape}, "
                             f"not one (batch={batch}, tokens, width) tensor kept by the block; depth analysis needs "
                             "a single residual stream (multi-stream methods are not supported)")

    def _check_streams(self, batch: int, inputs_seen: list, outputs_seen: list) -> list[torch.Tensor]:
        name, method = self.model_name, self._describe()[len(self.model_name):]
        streams: list[torch.Tensor] = []
        previous: torch.Tensor | None = None
        for index, (probe, x) in enumerate(zip(self.blocks, inputs_seen)):
            if x is None and outputs_seen[index] is None:
                raise ValueError(f"{name}: block {probe.name!r} did not run in the forward pass; only models that "
                                 "run every discovered block in order can be analysed")
            y = _first_tensor(outputs_seen[index])
            self._check_stream(index, x, batch, y if y is not None else torch.empty(0))
            if y.data_ptr() == x.data_ptr():  # updated in place: the cached input would hold the output
                raise ValueError(f"{name}{method}: block {probe.name!r} returns its input tensor (an in-place "
                                 "update); depth analysis needs blocks that return a new stream")
            if index and not (x is previous or torch.equal(x, previous)):
                raise ValueError(f"{name}{method}: the input of block {probe.name!r} is not the output of the block "
                                 "before it; depth analysis needs the blocks chained one after another")
            streams.append(x)
            previous = y
        streams.append(previous)
        return [s.detach() for s in streams]

    def run_ablated(self, inputs: torch.Tensor, captured: CapturedBatch, index: int) -> Any:
        """The model's output with block ``index`` (0-based) replaced by the identity; the blocks before it
        replay their cached outputs, the blocks after it run."""
        return self.run_removed(inputs, captured, index, index + 1)

    def run_removed(self, inputs: torch.Tensor, captured: CapturedBatch, start: int, stop: int) -> Any:
        """The model's output with the contiguous blocks ``start … stop − 1`` (0-based) replaced by identities
        (``x_stop = x_start``): the blocks before ``start`` replay their cached outputs, the blocks from ``stop``
        on run, ``L − stop`` block evaluations in all."""
        if not 0 <= start < stop <= self.depth:
            raise ValueError(f"blocks {start}..{stop - 1} are not a span of the {self.depth} blocks")
        replacements: dict[int, Callable[..., Any]] = {
            i: (lambda *a, _out=captured.outputs[i], **k: _out) for i in range(start)}
        for i in range(start, stop):
            replacements[i] = lambda *a, _t=captured.outputs[i], **k: _with_stream(_t, _stream_argument(a, k))
        with self._replaced(replacements):
            return self.call(inputs)

    def run_without(self, inputs: torch.Tensor, captured: CapturedBatch, removed: Iterable[int]) -> Any:
        """The model's output with the blocks ``removed`` (0-based, any set, contiguous or not) replaced by
        identities: the blocks before the first removed one replay their cached outputs, every later block that is
        kept runs — ``#{kept blocks after min(removed)}`` block evaluations."""
        removed = sorted(set(removed))
        if not removed or removed[0] < 0 or removed[-1] >= self.depth:
            raise ValueError(f"blocks {removed} are not a non-empty set of the {self.depth} blocks "
                             f"(0..{self.depth - 1})")
        first = removed[0]
        replacements: dict[int, Callable[..., Any]] = {
            i: (lambda *a, _out=captured.outputs[i], **k: _out) for i in range(first)}
        for i in removed:
            replacements[i] = lambda *a, _t=captured.outputs[i], **k: _with_stream(_t, _stream_argument(a, k))
        with self._replaced(replacements):
            return self.call(inputs)

    def run_truncated(self, inputs: torch.Tensor, captured: CapturedBatch, keep: int) -> Any:
        """The model's output with only the first ``keep`` blocks (cached) and every later block an identity:
        early exit through the model's own final norm and head."""
        replacements: dict[int, Callable[..., Any]] = {
            i: (lambda *a, _out=captured.outputs[i], **k: _out) for i in range(keep)}
        for i in range(keep, self.depth):
            replacements[i] = lambda *a, _t=captured.outputs[i], **k: _with_stream(_t, _stream_argument(a, k))
        with self._replaced(replacements):
            return self.call(inputs)


def find_block_stack(model: nn.Module, call: Callable[[torch.Tensor], Any] | None = None) -> BlockStack:
    """The main stack of ``model``'s blocks (see the module docstring). ``call`` defaults to ``model(inputs)``.

    Raises a one-line ``ValueError`` naming the model when it has no discoverable blocks.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"expected a torch.nn.Module to analyse, got {type(model).__name__}")
    model = getattr(model, "_orig_mod", model)  # torch.compile's wrapper: analyse the eager module it holds
    try:
        probes = find_blocks(model)
    except ValueError as exc:
        raise ValueError(f"cannot analyse {type(model).__name__}: {exc}") from None
    main = [p for p in probes if p.stream_arg == 0 and len(p.branches) in (1, 2)]
    if not main:
        raise ValueError(f"cannot analyse {type(model).__name__}: none of its blocks takes the residual stream as "
                         "its first argument")
    head = [p for p in probes if all(p is not q for q in main)]
    return BlockStack(model, main, call if call is not None else model, head)
