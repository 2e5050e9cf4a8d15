"""``analyze_depth``: does a model use its depth? Every measure of :mod:`layerscale.analysis` in one pass.

Per batch of the evaluation set: one clean forward records the stream at each block input (and, for classifiers,
the pooled features of every observation point); then each block is ablated on the cached streams, the stack is
cut after each block (early exit / logit lens), and the angular distance and relative update of each block are
read off the cached streams. After the last batch the linear probes and the CKA matrix are computed from the
pooled features. Cost per batch: about ``L²/2`` block evaluations for the ablations, none for the early exits.
Memory: the stream cache holds ``(L + 1) · batch · tokens · width`` values (so lower ``batch_size`` for very deep
models), and the pooled features ``examples · L · (points · poolings) · width`` values for the probes and CKA.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
from torch import nn

from .block_ranking import has_class_token
from .ablation import LossTotals, ablate_each_block, exit_after_each_block
from .cka import cka_matrix
from .evaluation import CLASSIFICATION, as_eval_set, logits_of, per_example_loss, task_of
from .geometry import angular_distance, relative_update_norm
from .probes import probe_split, ridge_probe_accuracy
from .result import DepthAnalysis
from .streams import MODULE_POINTS, BlockStack, find_block_stack
from .summary import summarize

__all__ = ["analyze_depth"]


def _check_fraction(name: str, value: float, low: float = 0.0, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)


class _Progress:
    def __init__(self, total: int, enabled: bool, description: str) -> None:
        self._bar = None
        if enabled:
            try:
                from tqdm.auto import tqdm
            except ImportError:
                return
            self._bar = tqdm(total=total, desc=description, unit="pass", leave=False)

    def step(self) -> None:
        if self._bar is not None:
            self._bar.update(1)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _pool(t: torch.Tensor, pooling: str) -> torch.Tensor:
    return (t[:, 0] if pooling == "cls" else t.mean(dim=1)).float().cpu()


def analyze_depth(model: nn.Module, data: Any, *, batch_size: int = 250, max_examples: int | None = 1000,
                  loss_threshold: float = 0.01, near_identity: float = 0.02, probes: bool = True,
                  probe_alpha: float = 1e-3, probe_train_fraction: float = 0.5, probe_tolerance: float = 0.01,
                  seed: int = 0, device: str | torch.device | None = None, progress: bool = False,
                  call: Callable[[torch.Tensor], Any] | None = None, source: str | None = None) -> DepthAnalysis:
    """Measure how ``model`` uses each of its blocks on ``data`` (see :mod:`layerscale.analysis` for the measures).

    ``model``: any model whose blocks :func:`layerscale.diagnostics.find_blocks` discovers (ours, timm, Hugging Face
    ViT-style, GPT-2 and Llama-family), called as ``model(inputs)`` (or ``call(inputs)``) and returning logits
    (or an object with ``.logits``). ``data``: the evaluation set (see :mod:`layerscale.analysis.evaluation`); at
    most ``max_examples`` examples are used, ``batch_size`` at a time. ``loss_threshold`` (fraction of the loss),
    ``near_identity`` (angular distance) and ``probe_tolerance`` (accuracy) are the summary's thresholds; probes
    (classifiers only) are ridge classifiers with ``probe_alpha`` trained on ``probe_train_fraction`` of the
    examples (split by ``seed``). ``device`` is where the batches go (default: the device of the model's first
    parameter; the model itself is not moved). ``progress`` shows a tqdm bar (when tqdm is installed) over the
    passes. The model is put in eval mode for the analysis and restored afterwards.

    Raises a one-line ``ValueError`` for a model without discoverable blocks or with a multi-stream residual, an
    empty evaluation set, inputs the model cannot take, or targets that do not fit its output.
    """
    stack = find_block_stack(model, call)
    model = stack.model
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"batch_size must be a positive int, got {batch_size!r}")
    loss_threshold = _check_fraction("loss_threshold", loss_threshold, 0.0, float("inf"))
    near_identity = _check_fraction("near_identity", near_identity)
    probe_tolerance = _check_fraction("probe_tolerance", probe_tolerance)
    if not 0.0 < _check_fraction("probe_train_fraction", probe_train_fraction) < 1.0:
        raise ValueError(f"probe_train_fraction must be strictly between 0 and 1, got {probe_train_fraction!r}")
    if isinstance(probe_alpha, bool) or not isinstance(probe_alpha, (int, float)) or not probe_alpha > 0:
        raise ValueError(f"probe_alpha must be a number > 0, got {probe_alpha!r}")
    evalset = as_eval_set(data, max_examples)
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else torch.device("cpu")
    name, depth, n = stack.model_name, stack.depth, len(evalset)
    class_token = has_class_token(model, stack)
    poolings = ("cls", "mean") if class_token else ("mean",)
    batches = -(-n // batch_size)
    was_training = model.training
    model.eval()
    bar = _Progress(batches * 2 * depth, progress, f"analysing {depth} blocks")
    ablation, early_exit = LossTotals(depth), LossTotals(depth + 1)
    angle_sum = torch.zeros(depth, dtype=torch.float64)
    update_sum = torch.zeros(depth, dtype=torch.float64)
    clean_loss = clean_accuracy = 0.0
    tokens = 0
    features: dict[str, list[torch.Tensor]] = {}
    task = None
    try:
        with torch.inference_mode():
            for inputs, targets in evalset.batches(batch_size):
                inputs, targets = inputs.to(device), targets.to(device)
                try:
                    captured = stack.capture(inputs, module_points=probes)
                except (RuntimeError, IndexError) as exc:
                    raise ValueError(f"{name} cannot take evaluation inputs of shape {tuple(inputs.shape)} "
                                     f"{inputs.dtype}: {str(exc).splitlines()[0]}") from None
                logits = logits_of(captured.output, name)
                task = task or task_of(logits, targets, name)
                if task_of(logits, targets, name) != task:
                    raise ValueError(f"{name}: evaluation batches of different tasks")
                loss, accuracy = per_example_loss(logits, targets)
                clean_loss += float(loss.sum())
                clean_accuracy += float(accuracy.sum())
                streams = captured.streams
                for index in range(depth):
                    angles = angular_distance(streams[index], streams[index + 1])
                    angle_sum[index] += angles.sum().cpu()
                    update_sum[index] += relative_update_norm(streams[index], streams[index + 1]).sum().cpu()
                tokens += streams[0].shape[0] * streams[0].shape[1]
                batch_pools = poolings if task == CLASSIFICATION else ("mean",)
                for pooling in batch_pools:
                    features.setdefault(f"block_out/{pooling}", []).append(
                        torch.stack([_pool(s, pooling) for s in streams[1:]], dim=1))
                    if task == CLASSIFICATION and probes:
                        for point in MODULE_POINTS:
                            values = captured.points.get(point, [])
                            if values and all(isinstance(v, torch.Tensor) and v.dim() == 3 for v in values):
                                features.setdefault(f"{point}/{pooling}", []).append(
                                    torch.stack([_pool(v, pooling) for v in values], dim=1))
                captured.points.clear()
                ablate_each_block(stack, inputs, targets, captured, ablation, bar.step)
                exit_after_each_block(stack, inputs, targets, captured, logits, early_exit, bar.step)
                del captured, streams
    finally:
        bar.close()
        model.train(was_training)

    pooled = {point: torch.cat(chunks) for point, chunks in features.items()}
    probe_accuracy: dict[str, list[float]] = {}
    n_train = int(round(n * probe_train_fraction))
    probes = probes and task == CLASSIFICATION and n_train >= 2 and n - n_train >= 1  # else too few to split
    if probes:
        train, test = probe_split(n, probe_train_fraction, seed)
        num_classes = int(evalset.targets.max()) + 1
        labels = evalset.targets
        for point, values in pooled.items():
            accuracy = ridge_probe_accuracy(values.transpose(0, 1), labels, train, test, num_classes, probe_alpha)
            probe_accuracy[point] = accuracy.tolist()
    cka_point = "block_out/mean"
    cka = cka_matrix(pooled[cka_point]).tolist()
    ablation_loss, ablation_accuracy = ablation.means(n)
    exit_loss, exit_accuracy = early_exit.means(n)
    angles = (angle_sum / tokens).tolist()
    clean_loss, clean_accuracy = clean_loss / n, clean_accuracy / n
    summary = summarize(clean_loss, ablation_loss, exit_loss, angles,
                        {p: v for p, v in probe_accuracy.items() if p.startswith("block_out/")},
                        loss_threshold=loss_threshold, near_identity=near_identity, probe_tolerance=probe_tolerance,
                        task=task)
    residual = getattr(model, "residual", None)
    settings = {"batch_size": batch_size, "max_examples": max_examples, "loss_threshold": loss_threshold,
                "near_identity": near_identity, "probes": "ridge" if probes else "none",
                "probe_alpha": probe_alpha, "probe_train_fraction": probe_train_fraction,
                "probe_tolerance": probe_tolerance, "seed": seed, "class_token": class_token}
    return DepthAnalysis(
        model=name, residual=residual if isinstance(residual, str) else None, task=task, num_examples=n,
        block_names=[p.name for p in stack.blocks], clean_loss=clean_loss, clean_accuracy=clean_accuracy,
        ablation_loss=ablation_loss, ablation_accuracy=ablation_accuracy, early_exit_loss=exit_loss,
        early_exit_accuracy=exit_accuracy, angular_distance=angles, relative_update=(update_sum / n).tolist(),
        probe_accuracy=probe_accuracy, cka=cka, cka_representation=cka_point, summary=summary, settings=settings,
        source=source)
