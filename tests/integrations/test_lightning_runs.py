"""The Lightning callback as a user meets it: gradient accumulation writes one train record per optimizer step
with that step's mean loss; without a logger or dirpath each fit gets its own folder; ``layerscale report`` reads
``lightning_logs/`` and two runs both named ``version_0`` (items 1 and 6 of issue 28)."""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.nn.functional as F

lightning = pytest.importorskip("lightning")

from lightning_helpers import random_image_loader, tiny_vit  # noqa: E402

from layerscale.cli import main  # noqa: E402
from layerscale.integrations.lightning import LayerScaleMonitor  # noqa: E402


class RecordingClassifier(lightning.LightningModule):
    """Keeps every micro-batch loss ``training_step`` returns, with the optimizer step it belongs to."""

    def __init__(self):
        super().__init__()
        self.model = tiny_vit()
        self.losses: list[tuple[int, float]] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.model(x), y)
        self.losses.append((self.trainer.global_step + 1, loss.item()))
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def _fit(module, callback, **trainer_args):
    torch.manual_seed(0)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, enable_checkpointing=False, enable_progress_bar=False,
                                enable_model_summary=False, log_every_n_steps=1, num_sanity_val_steps=0,
                                callbacks=[callback], **trainer_args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about worker counts on a 2-core machine
        trainer.fit(module, random_image_loader(40))
    return trainer


def _train_records(run_dir):
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["split"] == "train"]


@pytest.mark.parametrize("accumulate", [1, 2, 3])
def test_one_train_record_per_optimizer_step_with_the_steps_mean_loss(tmp_path, accumulate):
    module = RecordingClassifier()
    _fit(module, LayerScaleMonitor(every=1, dirpath=tmp_path), max_steps=4, logger=False,
         accumulate_grad_batches=accumulate, default_root_dir=tmp_path / "root")
    records = _train_records(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3, 4]
    for record in records:
        micro = [loss for step, loss in module.losses if step == record["step"]]
        # 10 batches an epoch: with 3 the epoch's last step has one micro-batch (Lightning steps at epoch end)
        assert len(micro) == (1 if accumulate == 3 and record["step"] == 4 else accumulate)
        assert record["loss"] == pytest.approx(sum(micro) / len(micro), rel=1e-6)


def test_without_logger_or_dirpath_each_fit_gets_a_new_folder_not_the_current_one(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for _ in range(2):
        _fit(RecordingClassifier(), LayerScaleMonitor(every=2), max_steps=2, logger=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lightning_logs"]
    runs = sorted((tmp_path / "lightning_logs").iterdir())
    assert [p.name for p in runs] == ["version_0", "version_1"]
    for run in runs:  # each run's records only: nothing appended to the first run
        assert [r["step"] for r in _train_records(run)] == [1, 2]


def test_report_takes_lightning_logs_and_two_runs_named_version_0(tmp_path, monkeypatch):
    for name in ("a", "b"):
        _fit(RecordingClassifier(), LayerScaleMonitor(every=1), max_steps=2, logger=False,
             default_root_dir=tmp_path / name)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "a/lightning_logs/version_0", "b/lightning_logs/version_0", "--out", "two.html"]) == 0
    page = (tmp_path / "two.html").read_text()
    assert "a/lightning_logs/version_0" in page and "b/lightning_logs/version_0" in page
    assert main(["report", "a/lightning_logs", "--out", "folder.html"]) == 0
    assert "version_0" in (tmp_path / "folder.html").read_text()
