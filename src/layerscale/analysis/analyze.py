"""``analyze_depth``: does a model use its depth? Every measure of :mod:`layerscale.analysis`, with bootstrap
intervals.

**Pass 1**, per batch of the evaluation set: one clean forward records the stream at each block input (and, for
classifiers, the pooled features of every observation point); each block is ablated on the cached streams, the stack
is cut after each block (early exit / logit lens), and the geometry (Gromov et al.'s angular distance on the token
the head reads, between every two depths; the all-token angular distance; ShortGPT's Block Influence; the relative
update) is read off the cached streams. Every measure is kept **per example**.

**Pass 2** (only when a chosen span is neither one block nor ends at the top): the contiguous n-block removal curve
(:mod:`~layerscale.analysis.removal.span_removal`) for the spans chosen from pass 1's mean distances.

Then the linear probes (over ``probe_splits`` seeded splits, at the embedding ``x^(0)`` and after every block, with
Hewitt & Liang's control-task selectivity) and the CKA matrix from the pooled features, and the **bootstrap**
(:mod:`layerscale.stats.bootstrap`): ``bootstrap``
replicates resample the examples (and, for probes, the splits), every per-block mean and every summary
(:mod:`~layerscale.analysis.summary`) is recomputed per replicate, and the ``level`` percentile interval is stored.
The removal spans are chosen once, on all examples (the intervals are conditional on that choice), except with
``spans="exhaustive"``, where each replicate takes its own best span per length.

Cost per batch: about ``L²/2`` block evaluations for the ablations, none for the early exits, at most ``L²/2`` for
the removal curve (usually far fewer), and one more clean pass for pass 2. Memory: the stream cache holds
``(L + 1) · batch · tokens · width`` values (lower ``batch_size`` for very deep models), the pooled features
``examples · L · (points · poolings) · width`` values, and the per-example measures ``examples · L · ~10``.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import torch
from torch import nn

from ..sources.finite import check_finite_model
from ..stats.bootstrap import bootstrap_means, bootstrap_weights, value_shares
from .chance import chance_note
from .device import analysis_device
from .eval_data.evaluation import CLASSIFICATION, as_eval_set, logits_of, per_example_loss
from .intervals import IntervalTable
from .measures.cka import CKA_KINDS, cka_matrix, debiased_cka_matrix
from .measures.geometry import angular_distance, relative_update_norm
from .measures.probe_curves import ProbeResults, probe_curves
from .pruning.block_ranking import batch_readout, block_influence, has_class_token, readout_tokens, stream_distances
from .pruning.criteria import CRITERIA, SCORE_CRITERIA, parse_criteria
from .pruning.set_depth import resolve_search, search_reusing_removals
from .removal.ablation import LossTotals, ablate_each_block, exit_after_each_block
from .removal.span_removal import (SPAN_SELECTIONS, best_per_length, candidate_spans, remove_spans, span_losses,
                                   spans_to_run)
from .removal.streams import MODULE_POINTS, find_block_stack
from .result import DepthAnalysis
from .summary import DepthSummary, exit_depth, near_identity_count, removal_depth, saturation_depth

__all__ = ["analyze_depth", "check_finite_weights"]


def _check_number(name: str, value: float, low: float = 0.0, high: float = 1.0) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not low <= value <= high:
        raise ValueError(f"{name} must be a number in [{low}, {high}], got {value!r}")
    return float(value)


def _check_int(name: str, value: int, low: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def check_finite_weights(model: nn.Module) -> None:
    """A one-line ``ValueError`` naming the first parameter or floating buffer holding NaN or infinity (the check
    every command applies to its source, :func:`layerscale.sources.finite.check_finite_model`)."""
    check_finite_model(model)


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

    def extend(self, passes: int) -> None:
        if self._bar is not None:
            self._bar.total += passes
            self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()


def _pool(t: torch.Tensor, pooling: str) -> torch.Tensor:
    return (t[:, 0] if pooling == "cls" else t.mean(dim=1)).float().cpu()


def _geometry_means(per_example: dict[str, list[torch.Tensor]]) -> dict[str, torch.Tensor]:
    """Per-block means of the per-example geometry gathered so far (``angular``, ``influence``, ...)."""
    return {key: torch.cat(chunks).mean(dim=0) for key, chunks in per_example.items() if chunks}


def analyze_depth(model: nn.Module, data: Any, *, batch_size: int = 250, max_examples: int | None = 1000,
                  tolerance: float = 0.01, near_identity: float = 0.02, spans: str = "angular",
                  probes: bool = True, probe_alpha: float = 1e-3, probe_train_fraction: float = 0.5,
                  probe_tolerance: float = 0.01, probe_splits: int = 5, control_types: int = 10,
                  cka: str = "linear", cka_tokens: int = 0,
                  bootstrap: int = 1000, level: float = 0.95, seed: int = 0,
                  set_search: str = "auto", set_criterion: str = "ablation", criteria: Any = (),
                  device: str | torch.device | None = None, progress: bool = False,
                  call: Callable[[torch.Tensor], Any] | None = None, source: str | None = None) -> DepthAnalysis:
    """Measure how ``model`` uses each of its blocks on ``data``, with bootstrap intervals (module docstring).

    ``model``: any model whose blocks :func:`layerscale.diagnostics.find_blocks` discovers (ours, timm, Hugging Face
    ViT-style and decoder layers), called as ``model(inputs)`` (or ``call(inputs)``) and returning logits
    (or an object with ``.logits``). ``data``: the evaluation set (see :mod:`layerscale.analysis.eval_data.evaluation`);
    at most ``max_examples`` examples are used, ``batch_size`` at a time. ``tolerance`` (δ, in nats of the loss),
    ``near_identity`` (angular distance) and ``probe_tolerance`` (accuracy) are the summary's thresholds;
    ``spans`` (``"angular"`` or ``"exhaustive"``) chooses the removal curve's spans; probes (classifiers only) are
    ridge classifiers with ``probe_alpha`` trained on ``probe_train_fraction`` of the examples, over
    ``probe_splits`` splits seeded from ``seed``, with a control task of ``control_types`` input clusters per
    class (:mod:`~layerscale.analysis.measures.control_task`); ``cka`` is ``"linear"`` or ``"debiased"``, between the
    mean-pooled block outputs or, with ``cka_tokens > 0``, token-level: every token of the first
    ``⌊cka_tokens / tokens⌋`` examples is one row (at most ``cka_tokens`` rows); ``bootstrap``
    replicates (seeded from ``seed``) give ``level`` intervals. ``set_search`` (``"auto"``, ``"greedy"``,
    ``"exhaustive"``) and ``set_criterion`` (a score criterion: ``ablation``, ``block_influence``, ``angular``,
    ``gamma``) choose how the set-variant effective depth is searched (:mod:`~layerscale.analysis.pruning.set_depth`).
    ``criteria`` (comma-separated or a sequence of :data:`~layerscale.analysis.pruning.criteria.CRITERIA`): also remove
    ``n = 1 … L − 1`` blocks by each and compare them
    (:func:`~layerscale.analysis.pruning.criterion_comparison.compare_criteria`, scored on the evaluation set itself),
    stored in ``result.criteria``. ``device`` is where the batches go (default: the device of the model's first
    parameter; the model itself is not moved). ``progress`` shows a tqdm bar. The
    model is put in eval mode for the analysis and restored afterwards.

    Raises a one-line ``ValueError`` for a model without discoverable blocks, with a multi-stream residual or
    with non-finite weights, an empty evaluation set, inputs the model cannot take, targets that do not fit its
    output, a device this machine does not have, or a non-finite loss.
    """
    stack = find_block_stack(model, call)
    model = stack.model
    _check_int("batch_size", batch_size, 1)
    tolerance = _check_number("tolerance", tolerance, 0.0, math.inf)
    near_identity = _check_number("near_identity", near_identity)
    probe_tolerance = _check_number("probe_tolerance", probe_tolerance)
    level = _check_number("level", level)
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be strictly between 0 and 1, got {level!r}")
    if not 0.0 < _check_number("probe_train_fraction", probe_train_fraction) < 1.0:
        raise ValueError(f"probe_train_fraction must be strictly between 0 and 1, got {probe_train_fraction!r}")
    if isinstance(probe_alpha, bool) or not isinstance(probe_alpha, (int, float)) or not probe_alpha > 0:
        raise ValueError(f"probe_alpha must be a number > 0, got {probe_alpha!r}")
    _check_int("probe_splits", probe_splits, 1)
    _check_int("control_types", control_types, 1)
    _check_int("bootstrap", bootstrap, 2)
    if spans not in SPAN_SELECTIONS:
        raise ValueError(f"spans must be one of {SPAN_SELECTIONS}, got {spans!r}")
    if cka not in CKA_KINDS:
        raise ValueError(f"cka must be one of {CKA_KINDS}, got {cka!r}")
    _check_int("cka_tokens", cka_tokens, 0)
    resolve_search(set_search, stack.depth)
    if set_criterion not in SCORE_CRITERIA:
        raise ValueError(f"set_criterion must be one of {', '.join(SCORE_CRITERIA)}, got {set_criterion!r}")
    criteria = parse_criteria(criteria, CRITERIA, "criteria") if criteria else []
    if set_criterion == "gamma" or "gamma" in criteria:
        from .pruning.gamma_score import check_gamma_criterion

        check_gamma_criterion(model)
    if device is None:
        first = next(iter(model.parameters()), None)
        device = first.device if first is not None else torch.device("cpu")
    device = analysis_device(device)
    check_finite_weights(model)
    evalset = as_eval_set(data, max_examples)
    name, depth, n = stack.model_name, stack.depth, len(evalset)
    class_token = has_class_token(model, stack)
    poolings = ("cls", "mean") if class_token else ("mean",)
    was_training = model.training
    model.eval()
    batches = -(-n // batch_size)
    bar = _Progress(batches * 2 * depth, progress, f"analysing {depth} blocks")
    ablation, early_exit = LossTotals(depth), LossTotals(depth + 1)
    clean = LossTotals(1)
    per_example: dict[str, list[torch.Tensor]] = {"angular": [], "angular_all": [], "influence": [], "update": []}
    distance_sum = torch.zeros(depth + 1, depth + 1, dtype=torch.float64)
    features: dict[str, list[torch.Tensor]] = {}
    task = readout = None
    try:
        with torch.inference_mode():
            for inputs, targets in evalset.batches(batch_size):
                inputs, targets = inputs.to(device), targets.to(device)
                captured = stack.capture_evaluation(inputs, module_points=probes)
                logits = logits_of(captured.output, name)
                task, readout = batch_readout(model, stack, logits, targets, (task, readout))
                outputs = logits.shape[-1]
                clean.add(0, *per_example_loss(logits, targets))
                streams = captured.streams
                distances = stream_distances(torch.stack([readout_tokens(s, readout) for s in streams], dim=1))
                distance_sum += distances.sum(dim=0).cpu()
                steps = torch.arange(depth)
                per_example["angular"].append(distances[:, steps, steps + 1].cpu())
                per_example["angular_all"].append(torch.stack(
                    [angular_distance(streams[i], streams[i + 1]).mean(dim=1) for i in range(depth)], dim=1).cpu())
                per_example["influence"].append(torch.stack(
                    [block_influence(streams[i], streams[i + 1]) for i in range(depth)], dim=1).cpu())
                per_example["update"].append(torch.stack(
                    [relative_update_norm(streams[i], streams[i + 1]) for i in range(depth)], dim=1).cpu())
                if task == CLASSIFICATION and probes:
                    for pooling in poolings:
                        features.setdefault(f"embedding/{pooling}", []).append(_pool(streams[0], pooling)[:, None])
                        for point in MODULE_POINTS:
                            values = captured.points.get(point, [])
                            if values and all(isinstance(v, torch.Tensor) and v.dim() == 3 for v in values):
                                features.setdefault(f"{point}/{pooling}", []).append(
                                    torch.stack([_pool(v, pooling) for v in values], dim=1))
                token_rows = sum(t.shape[0] for t in features.get("tokens", []))
                if token_rows < cka_tokens:
                    take = max(0, (cka_tokens - token_rows) // streams[1].shape[1])
                    if take:
                        chunk = torch.stack([s[:take] for s in streams[1:]], dim=2)  # (b, T, L, D)
                        features.setdefault("tokens", []).append(
                            chunk.reshape(-1, depth, chunk.shape[-1]).float().cpu())
                for pooling in (poolings if task == CLASSIFICATION else ("mean",)):
                    features.setdefault(f"block_out/{pooling}", []).append(
                        torch.stack([_pool(s, pooling) for s in streams[1:]], dim=1))
                captured.points.clear()
                ablate_each_block(stack, inputs, targets, captured, ablation, bar.step)
                exit_after_each_block(stack, inputs, targets, captured, logits, early_exit, bar.step)
                del captured, streams
            clean_loss_e, clean_acc_e = (t[:, 0] for t in clean.per_example())
            bad = int((~torch.isfinite(clean_loss_e)).sum())
            if bad:
                raise ValueError(f"{name}: the evaluation loss is not finite on {bad} example(s); depth analysis "
                                 "needs a finite loss")
            mean_distance = distance_sum / n
            spans_all = candidate_spans(mean_distance, spans)
            to_run = spans_to_run(spans_all, depth)
            removed = LossTotals(len(to_run))
            if to_run:
                bar.extend(batches * len(to_run))
                for inputs, targets in evalset.batches(batch_size):
                    inputs, targets = inputs.to(device), targets.to(device)
                    captured = stack.capture_evaluation(inputs, module_points=False)
                    remove_spans(stack, inputs, targets, captured, to_run, removed, bar.step)
                    del captured
            comparison = None
            if criteria:
                from .pruning.criterion_comparison import compare_criteria

                comparison = compare_criteria(model, evalset, criteria, depth - 1, device=device,
                                              batch_size=batch_size, max_examples=None, bootstrap=bootstrap,
                                              level=level, seed=seed, call=call).to_dict()
    finally:
        bar.close()
        model.train(was_training)

    ab_loss, ab_acc = ablation.per_example()
    ex_loss, ex_acc = early_exit.per_example()
    ran_loss, ran_acc = removed.per_example() if to_run else (torch.zeros(n, 0), torch.zeros(n, 0))
    span_loss = span_losses(spans_all, depth, to_run, ran_loss, ab_loss, ex_loss)
    span_acc = span_losses(spans_all, depth, to_run, ran_acc, ab_acc, ex_acc)
    measures = {name_: torch.cat(chunks) for name_, chunks in per_example.items()}

    weights = bootstrap_weights(n, bootstrap, seed)
    intervals = IntervalTable(level)

    def boot(values: torch.Tensor) -> torch.Tensor:
        return bootstrap_means(values, weights)

    intervals.add("clean_loss", boot(clean_loss_e))
    intervals.add("clean_accuracy", boot(clean_acc_e))
    boot_ab_delta = boot(ab_loss - clean_loss_e[:, None])
    intervals.add("ablation_delta_loss", boot_ab_delta)
    intervals.add("ablation_delta_accuracy", boot(ab_acc - clean_acc_e[:, None]))
    boot_exit_delta = boot(ex_loss - clean_loss_e[:, None])
    intervals.add("early_exit_loss", boot(ex_loss))
    intervals.add("early_exit_accuracy", boot(ex_acc))
    boot_angular = boot(measures["angular"])
    intervals.add("angular_distance", boot_angular)
    intervals.add("angular_distance_all_tokens", boot(measures["angular_all"]))
    intervals.add("block_influence", boot(measures["influence"]))
    intervals.add("relative_update", boot(measures["update"]))

    # the removal curve: the chosen span per length on all examples, and (exhaustive) per replicate
    delta_loss = span_loss - clean_loss_e[:, None]
    delta_acc = span_acc - clean_acc_e[:, None]
    curve, choice = best_per_length(delta_loss.mean(dim=0), spans_all, depth)
    chosen = [spans_all[int(i)] for i in choice]
    columns = choice.long()
    if spans == "exhaustive":
        boot_curve, _ = best_per_length(boot(delta_loss), spans_all, depth)
    else:
        boot_curve = boot(delta_loss[:, columns])
    intervals.add("removal_delta_loss", boot_curve)
    intervals.add("removal_delta_accuracy", boot(delta_acc[:, columns]))
    # the set variant: the largest set found, by its own search or as the contiguous span (a span is a set)
    span_removable = depth - int(removal_depth(curve, tolerance))
    model.eval()
    try:
        set_found = search_reusing_removals(stack, evalset, clean_loss_e, tolerance, set_search, set_criterion,
                                            ablation, early_exit, (to_run, removed), _geometry_means(per_example),
                                            device, batch_size, span_removable)
    finally:
        model.train(was_training)
    set_replicates = torch.minimum(depth - set_found.replicate_removable(boot, tolerance),
                                   removal_depth(boot_curve, tolerance))

    # probes and CKA
    token_features = torch.cat(features.pop("tokens")) if "tokens" in features else None
    pooled = {point: torch.cat(chunks) for point, chunks in features.items()}
    n_train = int(round(n * probe_train_fraction))
    probes = probes and task == CLASSIFICATION and n_train >= 2 and n - n_train >= 1  # else too few to split
    found = ProbeResults({}, {}, {}, {})
    if probes:
        found = probe_curves(pooled, evalset.targets, probe_train_fraction, seed, probe_splits, probe_alpha, bootstrap,
                        control_types, intervals)
    probe_accuracy, probe_replicates = found.accuracy, found.replicated
    cka_point, cka_features = "block_out/mean", pooled["block_out/mean"]
    if token_features is not None and token_features.shape[0] >= 4:
        cka_point, cka_features = f"block_out/tokens ({token_features.shape[0]} token rows)", token_features
    cka_values = (cka_matrix if cka == "linear" else debiased_cka_matrix)(cka_features).tolist()

    # the summary and its intervals
    clean_loss, clean_accuracy = float(clean_loss_e.mean()), float(clean_acc_e.mean())
    ablation_delta = ab_loss.mean(dim=0) - clean_loss
    exit_delta = ex_loss.mean(dim=0) - clean_loss
    angular = measures["angular"].mean(dim=0)
    effective = int(removal_depth(curve, tolerance))
    boot_effective = removal_depth(boot_curve, tolerance).double()
    removable = depth - effective
    removed_span = None
    if removable:
        start, length = chosen[removable - 1]
        removed_span = [start + 1, start + length]
    best_point = best_accuracy = probe_depth = probe_interval = None
    for point, values in probe_accuracy.items():
        if point.startswith("block_out/") and (best_accuracy is None or max(values) > best_accuracy):
            best_point, best_accuracy = point, max(values)
    if best_point is not None:
        probe_depth = int(saturation_depth(torch.tensor(probe_accuracy[best_point]), probe_tolerance))
        probe_interval = intervals.add("summary/probe_saturation_depth",
                                       saturation_depth(probe_replicates[best_point], probe_tolerance).double())
    summary = DepthSummary(
        depth=depth, tolerance=tolerance, level=level, effective_depth=effective,
        effective_depth_interval=intervals.add("summary/effective_depth", boot_effective),
        effective_depth_shares=value_shares(boot_effective), removed_span=removed_span,
        exit_depth=int(exit_depth(exit_delta, tolerance)),
        exit_depth_interval=intervals.add("summary/exit_depth", exit_depth(boot_exit_delta, tolerance).double()),
        probe_saturation_depth=probe_depth, probe_saturation_interval=probe_interval, probe_best_point=best_point,
        probe_best_accuracy=best_accuracy,
        near_identity_blocks=[i + 1 for i, d in enumerate(angular.tolist()) if d < near_identity],
        near_identity_interval=intervals.add("summary/near_identity_count",
                                             near_identity_count(boot_angular, near_identity).double()),
        needed_alone_blocks=[i + 1 for i, d in enumerate(ablation_delta.tolist()) if d > tolerance],
        needed_alone_interval=intervals.add("summary/needed_alone_count",
                                            (boot_ab_delta > tolerance).sum(dim=-1).double()),
        near_identity=near_identity, probe_tolerance=probe_tolerance, span_selection=spans,
        set_depth=min(depth - set_found.removable, effective),
        set_depth_interval=intervals.add("summary/set_depth", set_replicates.double()),
        set_removed_blocks=([b + 1 for b in set_found.removed] if depth - set_found.removable <= effective else
                            list(range(removed_span[0], removed_span[1] + 1))), set_search=set_found.search,
        set_criterion=set_criterion, outputs=outputs, chance_warning=chance_note(clean_loss, outputs, task))
    summary.write_lines(clean_loss, task)
    residual = getattr(model, "residual", None)
    settings = {"batch_size": batch_size, "max_examples": max_examples, "tolerance": tolerance,
                "near_identity": near_identity, "spans": spans, "probes": "ridge" if probes else "none",
                "probe_alpha": probe_alpha, "probe_train_fraction": probe_train_fraction,
                "probe_tolerance": probe_tolerance, "probe_splits": probe_splits,
                "control_types": control_types, "cka": cka, "cka_tokens": cka_tokens,
                "bootstrap": bootstrap, "level": level, "seed": seed, "class_token": class_token,
                "set_search": set_search, "set_criterion": set_criterion}
    return DepthAnalysis(
        model=name, residual=residual if isinstance(residual, str) else None, task=task, num_examples=n,
        block_names=[p.name for p in stack.blocks], readout=readout, clean_loss=clean_loss,
        clean_accuracy=clean_accuracy, ablation_loss=ab_loss.mean(dim=0).tolist(),
        ablation_accuracy=ab_acc.mean(dim=0).tolist(), early_exit_loss=ex_loss.mean(dim=0).tolist(),
        early_exit_accuracy=ex_acc.mean(dim=0).tolist(), angular_distance=angular.tolist(),
        angular_distance_all_tokens=measures["angular_all"].mean(dim=0).tolist(),
        block_influence=measures["influence"].mean(dim=0).tolist(),
        relative_update=measures["update"].mean(dim=0).tolist(),
        removal_spans=[[s + 1, s + length] for s, length in chosen],
        removal_distance=[float(mean_distance[s, s + length]) for s, length in chosen],
        removal_delta_loss=curve.tolist(), removal_delta_accuracy=delta_acc[:, columns].mean(dim=0).tolist(),
        probe_accuracy=probe_accuracy, probe_embedding=found.embedding, probe_selectivity=found.selectivity,
        cka=cka_values,
        cka_representation=cka_point, cka_kind=cka, intervals=intervals.values, summary=summary,
        settings=settings, source=source, head_distance=mean_distance.tolist(), criteria=comparison)
