"""``ResidualStepHook``: a Lightning fit runs the residual methods' step hook once per optimizer step (not per
micro-batch), with the steps the fit plans, so a BHyT model's correction c ends as the one of its trained weights."""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F

lightning = pytest.importorskip("lightning")

from lightning_helpers import random_image_loader  # noqa: E402

from layerscale import VisionTransformer  # noqa: E402
from layerscale.integrations import lightning_step_hook  # noqa: E402
from layerscale.integrations.lightning_step_hook import ResidualStepHook  # noqa: E402
from layerscale.residual.normalization.bhyt import attention_variance_gain  # noqa: E402


class BHyTClassifier(lightning.LightningModule):
    def __init__(self):
        super().__init__()
        self.model = VisionTransformer(img_size=16, patch_size=8, embed_dim=16, depth=2, num_heads=2, num_classes=3,
                                       residual="bhyt")

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.model(x), y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=1e-2)


def _fit(module, **trainer_args):
    torch.manual_seed(0)
    trainer = lightning.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False,
                                enable_progress_bar=False, enable_model_summary=False, callbacks=[ResidualStepHook()],
                                **trainer_args)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's advice about worker counts on a 2-core machine
        trainer.fit(module, random_image_loader(48))
    return trainer


def test_once_per_optimizer_step_and_the_correction_of_the_trained_weights(monkeypatch):
    calls = []
    real = lightning_step_hook.after_optimizer_step
    monkeypatch.setattr(lightning_step_hook, "after_optimizer_step",
                        lambda m, s, t: (calls.append((s, t)), real(m, s, t)))
    module = BHyTClassifier()
    _fit(module, max_steps=5, accumulate_grad_batches=2)
    assert calls == [(step, 5) for step in range(1, 6)]  # 10 micro-batches, 5 optimizer steps
    for block in module.model.blocks:  # 5 planned steps: c updated after each, the last from the trained weights
        assert torch.equal(block.norm2.attn_variance_gain, attention_variance_gain(block.attn, 5))


def test_a_fit_without_a_planned_length_is_refused():
    with pytest.raises(ValueError, match="needs the number of steps the fit plans"):
        _fit(BHyTClassifier(), max_steps=-1, max_epochs=-1)
