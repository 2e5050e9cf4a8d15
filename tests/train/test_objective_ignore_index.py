"""Targets of -100 (PyTorch's ignore index, Hugging Face's padding label) are left out of the loss, the accuracy and
the count: a padded batch scores as its real targets alone. Before, the count included the padding, so every pad
was a free perfect token (a padded evaluation's perplexity read 60.6 where its real tokens gave 159.5; audit
2026-12-07)."""

import math

import torch
import torch.nn.functional as F

from layerscale.train.loop.objective import IGNORE_INDEX, batch_objective, eval_objective
from layerscale.train.records.test_outcomes import window_losses


def _batch():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(3, 6, 11, generator=generator)
    targets = torch.randint(0, 11, (3, 6), generator=generator)
    padded = targets.clone()
    padded[0, 4:] = IGNORE_INDEX  # three windows of 4, 2 and 6 real targets
    padded[1, 2:] = IGNORE_INDEX
    return logits, targets, padded


def _real(logits, padded):
    kept = padded != IGNORE_INDEX
    return logits[kept], padded[kept]


def test_evaluation_scores_the_real_targets_alone():
    logits, _, padded = _batch()
    loss_sum, correct, n = eval_objective(logits, padded, "text", None)
    real_logits, real_targets = _real(logits, padded)
    assert int(n) == len(real_targets) == 12
    torch.testing.assert_close(loss_sum / n, F.cross_entropy(real_logits, real_targets), rtol=1e-6, atol=0)
    assert int(correct) == int((real_logits.argmax(-1) == real_targets).sum())
    assert math.exp(float(loss_sum / n)) > math.exp(float(loss_sum / padded.numel()))  # what counting pads gave


def test_training_counts_the_real_targets_alone():
    logits, _, padded = _batch()
    loss, correct, n = batch_objective(logits, padded, "text", None, label_smoothing=0.1)
    real_logits, real_targets = _real(logits, padded)
    assert int(n) == 12
    torch.testing.assert_close(loss, F.cross_entropy(real_logits, real_targets, label_smoothing=0.1),
                               rtol=1e-6, atol=0)
    assert int(correct) == int((real_logits.argmax(-1) == real_targets).sum())


def test_an_unpadded_batch_is_scored_as_before():
    logits, targets, _ = _batch()
    loss_sum, correct, n = eval_objective(logits, targets, "text", None)
    flat_logits, flat_targets = logits.reshape(-1, 11), targets.reshape(-1)
    assert int(n) == targets.numel()
    assert torch.equal(loss_sum, F.cross_entropy(flat_logits, flat_targets, reduction="sum"))
    assert int(correct) == int((flat_logits.argmax(-1) == flat_targets).sum())
    assert torch.equal(window_losses(logits, targets), F.cross_entropy(
        flat_logits, flat_targets, reduction="none").reshape(3, 6).mean(-1))


def test_each_window_is_the_mean_over_its_real_targets():
    logits, _, padded = _batch()
    per_window = window_losses(logits, padded)
    for i, length in enumerate((4, 2, 6)):
        expected = F.cross_entropy(logits[i, :length], padded[i, :length])
        torch.testing.assert_close(per_window[i], expected, rtol=1e-6, atol=0)


def test_image_labels_are_counted_as_before():
    logits = torch.randn(5, 3, generator=torch.Generator().manual_seed(2))
    labels = torch.tensor([0, 1, 2, 1, 0])
    loss_sum, correct, n = eval_objective(logits, labels, "image", None)
    assert int(n) == 5 and torch.equal(loss_sum, F.cross_entropy(logits, labels, reduction="sum"))
