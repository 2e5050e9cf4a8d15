"""The training loop: AdamW, per-step warmup + cosine, label smoothing, clipping, optional bf16 autocast,
evaluation, checkpoints, exact resume, a non-finite guard, and callbacks (see :mod:`layerscale.train.callbacks`).

One optimizer step, on every rank::

    loss = CE_smoothed(model(x), y); loss.backward()            # DDP / FSDP reduce the gradients
    g = clip_grad_norm_(params, grad_clip)                      # global pre-clip norm
    all-reduce [loss·n, correct, n, non-finite flag]            # every rank takes the same decision
    non-finite → locate the first bad block, then stop (raise) or skip the update
    optimizer.step(); after_optimizer_step(model, step, total); scheduler.step()   # the residual methods' hook

Step numbers count optimizer steps done (step 1 is the first). Data order is a function of (seed, epoch), the
position in the epoch is part of every checkpoint, and the RNG states of all ranks are saved, so a run resumed from
a checkpoint takes the same steps as one never interrupted (bit for bit on CPU with ``data.num_workers: 0``). What a
checkpoint holds, and taking it back: :mod:`~layerscale.train.state.trainer_checkpoint`.
"""

from __future__ import annotations

import math
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader

from ..callbacks import Callback
from ..config.schema import TrainConfig
from ..distributed import DistContext, all_gather_objects, all_reduce, barrier, unwrap_model
from ..records.metrics_log import MetricsLog
from ..records.test_outcomes import example_correct, window_losses, write_test_outcomes
from ..setup.data_setup import TrainData
from ..state.finite_check import last_good_checkpoint
from ..state.rng import capture_rng_state, restore_rng_state
from ..state.trainer_checkpoint import TrainState, restore_trainer, write_trainer_checkpoint
from .auto_policy import choose_compile, choose_precision, model_width
from .budget import planned_total_steps, steps_per_epoch
from .early_stopping import EarlyStopping
from ..nonfinite import NonFiniteError, locate_nonfinite
from ...residual.step_hook import after_optimizer_step
from .objective import batch_objective, eval_objective
from .optimizer import build_optimizer
from .progress import Progress
from .samplers import EpochShardSampler, EvalShardSampler
from .schedule import WarmupCosineSchedule

__all__ = ["TrainState", "Trainer"]


def _full(t: torch.Tensor) -> torch.Tensor:
    return t.full_tensor() if hasattr(t, "full_tensor") else t


class Trainer:
    """Trains ``model`` (already wrapped by :func:`~layerscale.train.distributed.wrap_model`) on ``data``.

    Public attributes are the callback contract documented in :mod:`layerscale.train.callbacks`.
    """

    def __init__(self, config: TrainConfig, model: nn.Module, data: TrainData, ctx: DistContext, run_dir: Path,
                 callbacks: list[Callback] | tuple[Callback, ...] = (), metrics: MetricsLog | None = None,
                 model_args: dict[str, Any] | None = None) -> None:
        self.config, self.ctx, self.run_dir, self.kind = config, ctx, run_dir, data.kind
        self.loss_fn = data.loss_fn  # None: cross-entropy (layerscale.train.loop.objective)
        self.model_args = dict(model_args or {})  # create_model(config.model.name, **model_args) rebuilds it
        self.callbacks = list(callbacks)
        self.wrapped = model
        self.model = unwrap_model(model)
        self.metrics = metrics or MetricsLog(run_dir, active=False, tensorboard=False)
        self.state = TrainState()
        self.batch: tuple[torch.Tensor, torch.Tensor] | None = None
        self.progress: Progress | None = None
        self._fsdp = ctx.distributed and config.run.strategy == "fsdp"
        self.precision, precision_reason = choose_precision(config.run.precision, ctx.device, model_width(self.model))
        self._autocast = self.precision == "bf16"
        d, o, r = config.data, config.optim, config.run
        self.per_rank_batch = d.batch_size // ctx.world_size
        self.train_sampler = EpochShardSampler(len(data.train), seed=r.seed, rank=ctx.rank,
                                               world_size=ctx.world_size, shuffle=True)
        self.steps_per_epoch = steps_per_epoch(len(data.train), d.batch_size, ctx.world_size)
        if self.steps_per_epoch == 0:
            raise ValueError(f"config key data.batch_size: {d.batch_size} is larger than the training split "
                             f"({len(data.train)} samples); allowed: at most {len(data.train)}")
        self.total_steps = planned_total_steps(o, self.steps_per_epoch)
        if "auto" in (config.run.precision, config.run.compile):
            compiled, compile_reason = choose_compile(config.run.compile, ctx.device, self.total_steps)
            self._emit(f"precision: {self.precision} ({precision_reason}); compile: "
                       f"{'regional' if compiled else 'off'} ({compile_reason})")

        pin = ctx.device.type == "cuda"
        self.train_loader = DataLoader(data.train, batch_size=self.per_rank_batch, sampler=self.train_sampler,
                                       drop_last=True, num_workers=d.num_workers, pin_memory=pin,
                                       collate_fn=data.collate_fn, generator=torch.Generator())
        # Periodic evaluation reads the validation split when there is one, else the test split; with a validation
        # split the test split is read once, when the run ends (run.evaluate_test).
        self.eval_on = "validation" if data.validation is not None else "test"
        evaluated = data.validation if data.validation is not None else data.eval
        self.eval_loader, self.eval_sampler = self._eval_loader(evaluated, data)
        self.test_loader, self.test_sampler = (
            self._eval_loader(data.eval, data) if data.validation is not None and r.evaluate_test else (None, None))
        self.stop_step = min(self.total_steps, r.stop_at_step) if r.stop_at_step else self.total_steps
        self.early_stopping = EarlyStopping(r.patience, r.min_delta,
                                            "max" if data.kind in ("image", "classification") else "min")
        self.optimizer = build_optimizer(self.model, o)
        self.scheduler = WarmupCosineSchedule(self.optimizer, o.warmup_steps, self.total_steps, o.min_lr)
        self._last_checkpoint_step, self._evaluated_part = -1, False  # _evaluated_part: the last eval was cut
        self._window = torch.zeros(3, dtype=torch.float64, device=ctx.device)  # loss·n, correct, n since last log
        self._grad_norm, self._lr = float("nan"), o.lr
        self._start = self._window_start = time.perf_counter()

    # ----------------------------------------------------------------------------------------------- utilities
    def _eval_loader(self, dataset, data: TrainData):
        """``(loader, sampler)`` over ``dataset`` sharded across ranks, or ``(None, None)`` when it is empty."""
        if dataset is None or len(dataset) == 0:
            return None, None
        ctx, d = self.ctx, self.config.data
        sampler = EvalShardSampler(len(dataset), ctx.rank, ctx.world_size)
        batch = -(-(d.eval_batch_size or d.batch_size) // ctx.world_size)
        # Its own generator: iterating a DataLoader draws a seed, which must not come from the global RNG.
        loader = DataLoader(dataset, batch_size=batch, sampler=sampler, num_workers=d.num_workers,
                            pin_memory=ctx.device.type == "cuda", collate_fn=data.collate_fn,
                            generator=torch.Generator())
        return loader, sampler

    def log(self, record: dict[str, Any]) -> None:
        """Write ``record`` to ``metrics.jsonl`` / TensorBoard (rank 0 only); ``step``, ``epoch`` and ``time`` are
        filled in when absent (``epoch`` that of the record's own ``step`` when it has one: a callback writing at
        its optimizer step's post-hook does so before the trainer counts the step)."""
        step = record.get("step", self.state.step)
        full = {"step": step, "epoch": self._epoch_progress(step if isinstance(step, int) else self.state.step),
                "time": round(self._elapsed(), 3)}
        full.update(record)
        self.metrics.write(full)

    def _elapsed(self) -> float:
        return self.state.elapsed + time.perf_counter() - self._start

    def _epoch_progress(self, step: int) -> float:
        """Epochs done after ``step`` optimizer steps (fractional), counted from the trainer's position."""
        batches = self.state.batch_in_epoch + step - self.state.step
        return round(self.state.epoch + batches / self.steps_per_epoch, 4)

    def _amp(self):
        if not self._autocast:
            return nullcontext()
        return torch.autocast(device_type=self.ctx.device.type, dtype=torch.bfloat16)

    def _emit(self, text: str) -> None:
        if not self.ctx.is_main:
            return
        if self.progress is not None:
            self.progress.message(text)
        elif self.config.run.progress != "none":
            print(text, flush=True)

    # ------------------------------------------------------------------------------------------------- resume
    def restore(self, weights: dict[str, torch.Tensor], train_state: dict[str, Any]) -> None:
        """Continue from a checkpoint read by :func:`~layerscale.train.state.checkpoint.load_checkpoint`.

        Restores weights, optimizer, scheduler, position and this rank's RNG state (the RNG is only restored when
        the world size is the one that wrote the checkpoint; otherwise it is reseeded and the run continues
        without the bit-exactness guarantee; :func:`~layerscale.train.state.trainer_checkpoint.restore_trainer`).
        Call it last, right before :meth:`fit`.
        """
        warning = restore_trainer(self, weights, train_state, self._fsdp)
        self._last_checkpoint_step = self.state.step
        if warning:
            self._emit(warning)

    # ------------------------------------------------------------------------------------------------ training
    def fit(self) -> dict[str, Any]:
        """Train to ``total_steps`` (or to ``run.stop_at_step``, or until early stopping); returns the last
        evaluation record (empty without an eval split)."""
        run = self.config.run
        self.progress = Progress(self.stop_step, self.state.step, run.progress, self.ctx.is_main,
                                 unit="step")
        self._start = time.perf_counter()
        self._window_start = self._start
        for cb in self.callbacks:
            cb.on_train_start(self)
        try:
            while self.state.step < self.stop_step and not self.early_stopping.stopped:
                self._run_epoch()
            if self._last_checkpoint_step != self.state.step:
                self.checkpoint()
        finally:
            self.progress.close()
        for cb in self.callbacks:
            cb.on_train_end(self)
        barrier(self.ctx)
        return dict(self.state.last_eval)

    def _run_epoch(self) -> None:
        run, state = self.config.run, self.state
        self.train_sampler.set_epoch(state.epoch, start=state.batch_in_epoch * self.per_rank_batch)
        self.train_loader.generator.manual_seed(run.seed + state.epoch)  # worker seeds, when there are workers
        if self._should_stop():
            return
        for x, y in self.train_loader:
            x = x.to(self.ctx.device, non_blocking=True)
            y = y.to(self.ctx.device, non_blocking=True)
            self.batch = (x, y)
            applied = self._train_step(x, y)
            state.step += 1
            state.batch_in_epoch += 1
            if state.batch_in_epoch == self.steps_per_epoch:
                state.epoch, state.batch_in_epoch = state.epoch + 1, 0
                end_of_epoch = True
            else:
                end_of_epoch = False
            if applied:
                for cb in self.callbacks:
                    cb.on_step_end(self, state.step)
            last = state.step == self.stop_step
            self.progress.update(state.step)
            if state.step % run.log_every_steps == 0 or last:
                self._log_train()
            if end_of_epoch or last or (run.eval_every_steps and state.step % run.eval_every_steps == 0):
                self.evaluate(whole=state.step == self.total_steps)  # the run's result reads the whole split
                if self.early_stopping.stopped and self._evaluated_part:  # stopped on part of the split
                    self.evaluate(whole=True)
            finished = state.step == self.total_steps or self.early_stopping.stopped
            if finished and self.test_loader is not None and not state.test_eval:
                self.evaluate(test=True)
            if run.checkpoint_every_steps and state.step % run.checkpoint_every_steps == 0:
                self.checkpoint()
            if self._should_stop():  # before the loader draws the next batch: its augmentation takes random numbers
                return                # the pause's checkpoint must not have spent

    def _should_stop(self) -> bool:
        return self.state.step >= self.stop_step or self.early_stopping.stopped

    def _train_step(self, x: torch.Tensor, y: torch.Tensor) -> bool:
        """One optimizer step; ``False`` when it was skipped as non-finite (``on_nonfinite: skip``)."""
        o = self.config.optim
        self.wrapped.train()
        rng_before = capture_rng_state(self.ctx.device)
        with self._amp():
            logits = self.wrapped(x)
        loss, correct, n = batch_objective(logits, y, self.kind, self.loss_fn, o.label_smoothing)
        loss.backward()
        max_norm = o.grad_clip if o.grad_clip > 0 else math.inf
        grad_norm = _full(torch.nn.utils.clip_grad_norm_(self.model.parameters(), max_norm))
        with torch.no_grad():
            bad = (~torch.isfinite(loss.detach())) | (~torch.isfinite(grad_norm.detach()))
            stats = torch.stack([loss.detach().double() * n, correct.double(),
                                 torch.as_tensor(n, device=loss.device).double(), bad.double()])
        all_reduce(stats, self.ctx)
        if stats[3].item() > 0:
            self._handle_nonfinite(x, rng_before, loss.detach(), grad_norm.detach())
            self.optimizer.zero_grad(set_to_none=True)
            self.scheduler.step()
            return False
        self._lr = self.optimizer.param_groups[0]["lr"]
        self._grad_norm = float(grad_norm)
        self.optimizer.step()
        after_optimizer_step(self.model, self.state.step + 1, self.total_steps)  # e.g. BHyT's c, from the new weights
        self.optimizer.zero_grad(set_to_none=True)
        self.scheduler.step()
        self._window += stats[:3]
        return True

    def _handle_nonfinite(self, x: torch.Tensor, rng_before: dict[str, Any], loss: torch.Tensor,
                          grad_norm: torch.Tensor) -> None:
        step = self.state.step + 1
        what = "loss" if not bool(torch.isfinite(loss)) else "gradient norm"
        devices = [self.ctx.device] if self.ctx.device.type == "cuda" else []

        def replay() -> None:  # the same forward: same weights, same dropout / drop-path draws
            with torch.random.fork_rng(devices=devices):
                restore_rng_state(rng_before, self.ctx.device)
                with self._amp():
                    (self.wrapped if self._fsdp else self.model)(x)

        report = locate_nonfinite(self.model, replay)
        reports = all_gather_objects((report.block_index, report.text), self.ctx)
        located = [r for r in reports if r[0] is not None]
        text = min(located)[1] if located else reports[0][1]
        ranks = "" if not self.ctx.distributed else f" on {sum(1 for r in reports if r[0] is not None)} rank(s)"
        message = f"non-finite {what} at step {step} (epoch {self.state.epoch + 1}){ranks}: {text}"
        self.log({"step": step, "split": "train", "event": "nonfinite", "loss": float(loss),
                  "grad_norm": float(grad_norm), "action": self.config.run.on_nonfinite, "detail": text})
        if self.config.run.on_nonfinite == "skip":
            self._emit(f"{message}; step skipped")
            return
        last = last_good_checkpoint(self.run_dir, trainer=self)
        raise NonFiniteError(f"{message}; run stopped (run.on_nonfinite: stop); last good checkpoint: "
                             f"{last if last is not None else 'none written yet'}", step=step)

    def _log_train(self) -> None:
        window = self._window.clone()
        self._window.zero_()
        now = time.perf_counter()
        seconds, self._window_start = now - self._window_start, now
        if window[2] == 0:
            return
        loss, count = (window[0] / window[2]).item(), window[2].item()
        record = {"split": "train", "loss": loss, "accuracy": (window[1] / window[2]).item(), "lr": self._lr,
                  "grad_norm": self._grad_norm, "throughput": count / max(seconds, 1e-9)}
        if math.isnan(record["accuracy"]):  # a user loss_fn whose outputs are not class logits
            del record["accuracy"]
        self.log(record)
        shown = {"loss": loss, **({"acc": record["accuracy"]} if "accuracy" in record else {}), "lr": self._lr,
                 ("tok/s" if self.kind == "text" else "img/s"): round(record["throughput"])}
        if self.progress.mode == "bar":
            self.progress.update(self.state.step, shown)
        else:
            self.progress.update(self.state.step, shown, log_line=True)

    # --------------------------------------------------------------------------------------------- evaluation
    @torch.no_grad()
    def evaluate(self, test: bool = False, whole: bool = False) -> dict[str, Any]:
        """Loss (no smoothing), accuracy and, for text, perplexity over the eval split (the validation split
        when there is one: ``"on"`` in the record says which), reduced over ranks (each sample counted once);
        logged as a ``split: eval`` record, fed to early stopping (until it stopped the run), and returned. It reads
        the first ``run.eval_batches`` batches per process (0: all), or with ``whole=True`` the whole split: the
        evaluation the run ends on (its last step; once more at an early stop decided on part of the split), the
        result. ``test=True``: the one evaluation of the test split of a run with a validation split (whole split, a
        ``split: test`` record)."""
        loader, sampler = (self.test_loader, self.test_sampler) if test else (self.eval_loader, self.eval_sampler)
        if loader is None:
            return {}
        model = self.wrapped if self._fsdp else self.model  # DDP's forward would sync buffers: use the module
        model.eval()
        sums = torch.zeros(3, dtype=torch.float64, device=self.ctx.device)
        seen, limit = 0, 0 if test or whole else self.config.run.eval_batches
        self._evaluated_part = bool(limit) and len(loader) > limit
        per_example = [] if test and self.loss_fn is None and not self.ctx.distributed else None
        for i, (x, y) in enumerate(loader):
            if limit and i >= limit:
                break
            x, y = x.to(self.ctx.device, non_blocking=True), y.to(self.ctx.device, non_blocking=True)
            # The forward alone under inference mode (no autograd bookkeeping); FSDP's unsharding keeps no_grad.
            with torch.inference_mode(not self._fsdp), self._amp():
                logits = model(x)
            valid = max(0, min(len(y), sampler.num_valid - seen))  # padding (equal batch counts) last
            seen += len(y)
            if valid == 0:
                continue
            loss_sum, correct, n = eval_objective(logits[:valid], y[:valid], self.kind, self.loss_fn)
            if per_example is not None:
                per_example.append(window_losses(logits[:valid], y[:valid]) if self.kind == "text"
                                   else example_correct(logits[:valid], y[:valid]))
            sums[0] += loss_sum.double()
            sums[1] += correct.double()
            sums[2] += n
        model.train()
        all_reduce(sums, self.ctx)
        loss = (sums[0] / sums[2]).item() if sums[2] > 0 else float("nan")
        record: dict[str, Any] = {"split": "test" if test else "eval", "on": "test" if test else self.eval_on,
                                  "loss": loss,
                                  "accuracy": (sums[1] / sums[2]).item() if sums[2] > 0 else float("nan")}
        if self.loss_fn is not None and math.isnan(record["accuracy"]):  # outputs that are not class logits
            del record["accuracy"]
        if self.kind == "text":
            record["perplexity"] = math.exp(min(loss, 700.0))
        record["samples"] = int(sums[2].item())
        self.log(record)
        shown = {k: v for k, v in record.items() if k in ("loss", "accuracy", "perplexity")}
        epoch = self._epoch_progress(self.state.step)
        self._emit(f"{'test' if test else 'eval'}  step {self.state.step}  epoch {epoch:g}  "
                   + "  ".join(f"{k} {v:.4f}" for k, v in shown.items()))
        if test:
            if per_example and self.ctx.is_main:
                write_test_outcomes(self.run_dir, "loss" if self.kind == "text" else "correct",
                                    torch.cat(per_example))
            self.state.test_eval = {"step": self.state.step, **record}
            return record
        self.state.last_eval = {"step": self.state.step, **record}
        if not self.early_stopping.stopped:  # the whole-split evaluation after a stop decides nothing
            self._update_early_stopping(record)
        for cb in self.callbacks:
            cb.on_eval_end(self, self.state.step, record)
        return record

    def _update_early_stopping(self, record: dict[str, Any]) -> None:
        stopping = self.early_stopping
        metric = "accuracy" if stopping.mode == "max" else "loss"
        if metric not in record or not stopping.update(record[metric], self.state.step):
            return
        self.log({"split": "event", "event": "early_stop", "metric": metric, "best": stopping.best,
                  "best_step": stopping.best_step, "patience": stopping.patience})
        self._emit(f"early stop at step {self.state.step}: eval {metric} did not improve by more than "
                   f"{stopping.min_delta:g} in {stopping.patience} evaluations (best {stopping.best:.4f} at step "
                   f"{stopping.best_step})")

    # -------------------------------------------------------------------------------------------- checkpoints
    def checkpoint(self) -> Path | None:
        """Write a checkpoint of the current step (rank 0 writes; a collective under FSDP). Raises
        :class:`NonFiniteError` instead if a weight, or the forward on a fixed batch
        (:mod:`~layerscale.train.state.finite_check`), is not finite, leaving earlier checkpoints untouched
        (:func:`~layerscale.train.state.trainer_checkpoint.write_trainer_checkpoint`)."""
        path = write_trainer_checkpoint(self, self._fsdp, self._elapsed)
        self._last_checkpoint_step = self.state.step
        for cb in self.callbacks:
            cb.on_checkpoint(self, self.state.step, path)
        return path
