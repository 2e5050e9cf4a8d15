"""The monitor's step protocol: hooks only on monitored steps, training forwards only, pooled micro-batches,
the optimizer calls, and clear errors."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from layerscale import create_model
from layerscale.diagnostics import LayerScaleMonitor


def tiny_vit(**overrides):
    torch.manual_seed(0)
    args = dict(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=32, depth=2, num_heads=2)
    return create_model("vit", **{**args, **overrides})


def hook_count(model) -> int:
    return sum(len(m._forward_hooks) + len(m._forward_pre_hooks) for m in model.modules())


def test_hooks_exist_only_during_monitored_steps():
    model = tiny_vit()
    monitor = LayerScaleMonitor(model, every=3)
    assert hook_count(model) == 0
    assert monitor.begin_step(1) is False and hook_count(model) == 0
    model(torch.randn(2, 1, 8, 8))
    assert monitor.end_step() is None and monitor.records == []
    assert monitor.begin_step(3) is True and hook_count(model) > 0
    model(torch.randn(2, 1, 8, 8))
    record = monitor.end_step()
    assert hook_count(model) == 0
    assert record["step"] == 3 and monitor.records == [record]
    assert monitor.begin_step(4, force=True) is True
    monitor.close()
    assert hook_count(model) == 0 and not monitor.active


def test_micro_batches_pool_into_one_record():
    """Two forwards in one step give the statistics of the concatenated batch (sums of squares are pooled)."""
    model = tiny_vit()
    x = torch.randn(6, 1, 8, 8)
    monitor = LayerScaleMonitor(model, every=1)
    monitor.begin_step(0)
    model(x[:2])
    model(x[2:])
    pooled = monitor.end_step()
    monitor.begin_step(1)
    model(x)
    whole = monitor.end_step()
    for a, b in zip(pooled["blocks"], whole["blocks"]):
        assert a["attn"]["ratio"] == pytest.approx(b["attn"]["ratio"], rel=1e-5)
        assert a["mlp"]["branch_rms"] == pytest.approx(b["mlp"]["branch_rms"], rel=1e-5)
        assert a["stream_rms"] == pytest.approx(b["stream_rms"], rel=1e-5)


def test_evaluation_forwards_are_ignored_unless_asked():
    model = tiny_vit()
    monitor = LayerScaleMonitor(model, every=1)
    monitor.begin_step(0)
    with torch.no_grad():
        model.eval()(torch.randn(2, 1, 8, 8))
    record = monitor.end_step()
    assert record["blocks"][0]["attn"]["ratio"] is None and record["blocks"][0]["stream_rms"] is None
    everything = LayerScaleMonitor(model, every=1, training_only=False)
    everything.begin_step(0)
    with torch.no_grad():
        model(torch.randn(2, 1, 8, 8))
    assert everything.end_step()["blocks"][0]["attn"]["ratio"] > 0


def test_gradient_and_update_statistics_follow_the_optimizer_calls():
    model = tiny_vit()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 0])
    monitor = LayerScaleMonitor(model, every=1)
    monitor.begin_step(0)
    F.cross_entropy(model(x), y).backward()
    monitor.after_backward()
    grads = [torch.cat([p.grad.flatten() for p in block.parameters()]) for block in model.blocks]
    before = [torch.cat([p.detach().flatten() for p in block.parameters()]).clone() for block in model.blocks]
    optimizer.step()
    record = monitor.after_optimizer_step()
    for got, g, w0, block in zip(record["blocks"], grads, before, model.blocks):
        w1 = torch.cat([p.detach().flatten() for p in block.parameters()])
        assert got["grad_norm"] == pytest.approx(g.norm().item(), rel=1e-5)
        assert got["update_ratio"] == pytest.approx(((w1 - w0).norm() / w0.norm()).item(), rel=1e-5)
        # SGD: ‖ΔW‖ = lr · ‖g‖ exactly, a second check of the pairing of gradients and updates
        assert got["update_ratio"] * w0.norm().item() == pytest.approx(0.1 * got["grad_norm"], rel=1e-4)

    monitor.begin_step(1)  # forward-only use: no gradient or update statistics
    model(x)
    record = monitor.end_step()
    assert record["blocks"][0]["grad_norm"] is None and record["blocks"][0]["update_ratio"] is None
    no_snapshot = LayerScaleMonitor(model, every=1, track_updates=False)
    no_snapshot.begin_step(0)
    model(x)
    assert no_snapshot.after_optimizer_step()["blocks"][0]["update_ratio"] is None


def test_an_unfinished_step_is_written_when_the_next_one_opens():
    model = tiny_vit()
    seen = []
    monitor = LayerScaleMonitor(model, every=1, log_fn=seen.append)
    monitor.begin_step(0)
    model(torch.randn(2, 1, 8, 8))
    monitor.begin_step(1)
    assert [r["step"] for r in seen] == [0] and monitor.records == []
    monitor.close()


@pytest.mark.parametrize("every", [0, -1, 1.5, True, "5"])
def test_bad_interval_is_a_clear_error(every):
    with pytest.raises(ValueError, match="every must be a positive int"):
        LayerScaleMonitor(tiny_vit(), every=every)


def test_bad_step_and_log_fn_are_clear_errors():
    monitor = LayerScaleMonitor(tiny_vit(), every=1)
    with pytest.raises(ValueError, match="step must be an int >= 0, got -1"):
        monitor.begin_step(-1)
    with pytest.raises(ValueError, match="log_fn must be callable"):
        LayerScaleMonitor(tiny_vit(), log_fn="metrics.jsonl")


def test_activation_checkpointing_recomputation_leaves_the_record_unchanged():
    """A checkpointed block runs its forward again inside the backward, with the hooks still installed."""
    from torch.utils.checkpoint import checkpoint

    model = tiny_vit(drop_path_rate=0.0)
    x, y = torch.randn(4, 1, 8, 8), torch.tensor([0, 1, 2, 0])

    def step(checkpointed: bool) -> dict:
        monitor = LayerScaleMonitor(model, every=1, track_updates=False)
        monitor.begin_step(0)
        h = model.patch_embed(x)
        h = torch.cat((model.cls_token.expand(4, -1, -1), h + model.pos_embed), dim=1)
        for block in model.blocks:
            h = checkpoint(block, h, use_reentrant=False) if checkpointed else block(h)
        F.cross_entropy(model.head(model.norm(h)[:, 0]), y).backward()
        monitor.after_backward()
        model.zero_grad()
        return monitor.end_step()

    plain, recomputed = step(False), step(True)
    for a, b in zip(plain["blocks"], recomputed["blocks"]):
        for key in ("stream_rms", "grad_norm"):
            assert a[key] == pytest.approx(b[key], rel=1e-5)
        for branch in ("attn", "mlp"):
            for key in ("ratio", "branch_rms", "stream_in_rms"):
                assert a[branch][key] == pytest.approx(b[branch][key], rel=1e-5)
