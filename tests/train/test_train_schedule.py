import io
import math

import pytest
import torch

from layerscale.train import WarmupCosineSchedule, warmup_cosine_lr


def test_warmup_is_linear_then_cosine_reaches_min_at_total():
    lrs = [warmup_cosine_lr(s, 1.0, 0.1, 4, 14) for s in range(16)]
    assert lrs[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert lrs[4] == pytest.approx(1.0)
    assert lrs[9] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # half way: the mean
    assert lrs[14] == pytest.approx(0.1) and lrs[15] == pytest.approx(0.1)  # clamped after the end
    assert all(a >= b for a, b in zip(lrs[4:], lrs[5:], strict=False))


def test_scheduler_sets_each_steps_lr_and_round_trips_with_weights_only():
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.AdamW([param], lr=2.0)
    sched = WarmupCosineSchedule(opt, warmup_steps=2, total_steps=6, min_lr=0.5)
    seen = []
    for _ in range(5):
        seen.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    assert seen == pytest.approx([warmup_cosine_lr(s, 2.0, 0.5, 2, 6) for s in range(5)])
    buffer = io.BytesIO()
    torch.save(sched.state_dict(), buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    other = WarmupCosineSchedule(torch.optim.AdamW([torch.nn.Parameter(torch.zeros(1))], lr=2.0), 2, 6, 0.5)
    other.load_state_dict(state)
    assert other.last_epoch == 5 and other.get_lr() == pytest.approx(sched.get_lr())
