"""The Lightning callback: a real lightning.Trainer on CPU for a few steps writes a run that `layerscale report`
turns into a report, and logs the diagnostics to the Lightning logger."""

from __future__ import annotations

import csv
import json
import warnings

import pytest
import torch
import torch.nn.functional as F

lightning = pytest.importorskip("lightning")

from lightning.pytorch.loggers import CSVLogger  # noqa: E402
from lightning_helpers import random_image_loader, tiny_vit  # noqa: E402

from layerscale.cli import main  # noqa: E402
from layerscale.diagnostics import read_run  # noqa: E402
from layerscale.integrations.lightning import LayerScaleMonitor  # noqa: E402


class TinyClassifier(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = tiny_vit()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self.model(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(-1) == y).float().mean())

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-3)


def _fit(tmp_path, callback, callbacks_extra=(), ckpt_path=None, **trainer_args):
    torch.manual_seed(0)
    trainer_args = {"max_steps": 6, **trainer_args}
    trainer = lightning.Trainer(accelerator="cpu", devices=1, logger=CSVLogger(tmp_path / "logs"),
                                enable_checkpointing=bool(callbacks_extra), enable_progress_bar=False,
                                enable_model_summary=False, log_every_n_steps=1, val_check_interval=3,
                                limit_val_batches=1, num_sanity_val_steps=0, callbacks=[callback, *callbacks_extra],
                                **trainer_args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about worker counts on a 2-core machine
        trainer.fit(TinyClassifier(), random_image_loader(24), random_image_loader(24), ckpt_path=ckpt_path)
    return trainer


def test_lightning_run_produces_a_report(tmp_path):
    run_dir = tmp_path / "run"
    trainer = _fit(tmp_path, LayerScaleMonitor(every=2, dirpath=run_dir))
    run = read_run(run_dir)
    assert run.complete
    assert [r["step"] for r in run.diagnostics] == [1, 2, 4, 6]
    assert run.method == "layerscale" and run.depth == 2
    first = run.diagnostics[0]["blocks"][0]
    assert first["name"] == "model.blocks.0"
    assert first["attn"]["scale_mean"] == pytest.approx(0.1)
    assert first["grad_norm"] > 0 and first["update_ratio"] > 0
    assert [r["step"] for r in run.train] == [1, 2, 3, 4, 5, 6]
    assert [r["step"] for r in run.eval] == [3, 6] and all("accuracy" in r and "loss" in r for r in run.eval)
    # the same statistics reached the Lightning logger
    with open(trainer.logger.log_dir + "/metrics.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    logged = [row for row in rows if row.get("diagnostics_ratio_attn/model.blocks.1")]
    assert [int(row["step"]) for row in logged] == [1, 2, 4, 6]
    # and `layerscale report` reads the run
    assert main(["report", str(run_dir), "--out", str(tmp_path / "report.html")]) == 0
    html = (tmp_path / "report.html").read_text()
    assert "model.blocks.1" in html or "blocks" in html
    assert json.loads((run_dir / "summary.json").read_text())["steps"] == 6


def test_gradient_accumulation_pools_micro_batches(tmp_path):
    run_dir = tmp_path / "run"
    _fit(tmp_path, LayerScaleMonitor(every=1, dirpath=run_dir, track_updates=False), accumulate_grad_batches=2)
    run = read_run(run_dir)
    assert [r["step"] for r in run.diagnostics] == [1, 2, 3, 4, 5, 6]
    assert all(r["blocks"][0]["grad_norm"] > 0 for r in run.diagnostics)


def test_resume_records_each_step_once(tmp_path):
    run_dir = tmp_path / "run"
    checkpoints = lightning.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2,
                                                             save_top_k=-1)
    trainer = _fit(tmp_path, LayerScaleMonitor(every=1, dirpath=run_dir), callbacks_extra=[checkpoints],
                   max_steps=4)
    assert trainer.global_step == 4
    step2 = next((tmp_path / "ckpt").glob("*step=2*.ckpt"))
    _fit(tmp_path, LayerScaleMonitor(every=1, dirpath=run_dir), max_steps=4, ckpt_path=str(step2))
    run = read_run(run_dir)
    assert [r["step"] for r in run.diagnostics] == [1, 2, 3, 4]
    assert [r["step"] for r in run.train] == [1, 2, 3, 4]


def test_resumed_fit_keeps_the_first_fits_scale_reference(tmp_path):
    """The scale_collapse reference is γ when the first fit started (0.1), not γ in the checkpoint resumed from."""
    checkpoints = lightning.pytorch.callbacks.ModelCheckpoint(dirpath=tmp_path / "ckpt", every_n_train_steps=2,
                                                             save_top_k=-1)
    first = LayerScaleMonitor(every=1, dirpath=tmp_path / "run")
    _fit(tmp_path, first, callbacks_extra=[checkpoints], max_steps=2)
    reference = first.monitor.alert_state()["scale_init"]
    assert reference and all(value == pytest.approx(0.1) for _, _, value in reference)
    step2 = next((tmp_path / "ckpt").glob("*step=2*.ckpt"))
    gamma = torch.load(step2, weights_only=False)["state_dict"]["model.blocks.0.ls1.gamma"]
    assert gamma.abs().mean().item() != pytest.approx(0.1, abs=1e-6)  # trained: the checkpoint's γ moved
    resumed = LayerScaleMonitor(every=1, dirpath=tmp_path / "run")
    _fit(tmp_path, resumed, max_steps=4, ckpt_path=str(step2))
    assert resumed.monitor.alert_state()["scale_init"] == reference


def test_bad_arguments():
    with pytest.raises(ValueError, match="every must be a positive int"):
        LayerScaleMonitor(every=0)
