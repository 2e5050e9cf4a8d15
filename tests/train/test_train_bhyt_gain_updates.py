"""``layerscale train`` runs the residual methods' step hook: a BHyT run's variance correction ``c`` follows the
weights (recomputed after every step that is a multiple of ``max(1, min(1000, ⌊S/50⌋))``, the authors'
``UpdateScalerCallback``), is saved with them, and a run paused between two updates and resumed ends bit for bit
where the uninterrupted run ends."""

import torch
from train_helpers import final_weights, tiny_config

from layerscale.residual.normalization.bhyt import BHyTPostNorm
from layerscale.sources.run_model import load_run_model
from layerscale.train import run

GAIN = "norm2.attn_variance_gain"


def _config(**run_keys):
    # 100 planned steps: c is updated after every second step (100 // 50)
    return tiny_config(model={"residual": "bhyt"}, optim={"epochs": 20, "max_steps": 100},
                       run={"checkpoint_every_steps": 7, **run_keys})


def test_the_saved_correction_is_the_one_of_the_last_update(tmp_path):
    run(_config(stop_at_step=12), out=tmp_path / "run")
    loaded = load_run_model(tmp_path / "run").model
    saved = {name: float(m.attn_variance_gain) for name, m in loaded.named_modules() if isinstance(m, BHyTPostNorm)}
    with torch.no_grad():
        loaded(torch.zeros(1, 1, 8, 8))  # records the token count; a loaded c is not recomputed by a forward
    for name, module in loaded.named_modules():
        if isinstance(module, BHyTPostNorm):
            assert float(module.attn_variance_gain) == saved[name]
            module.update_gain()  # c of the weights step 12 left: the one step 12's update wrote
            assert float(module.attn_variance_gain) == saved[name], name


def test_a_run_resumed_between_two_updates_ends_where_the_uninterrupted_run_ends(tmp_path):
    run(_config(stop_at_step=13), out=tmp_path / "straight")
    run(_config(stop_at_step=7), out=tmp_path / "paused")  # its checkpoint holds c of step 6's update
    result = run(resume=tmp_path / "paused", overrides=["run.stop_at_step=13"])
    assert result.step == 13
    expected, got = final_weights(tmp_path / "straight"), final_weights(tmp_path / "paused")
    assert any(name.endswith(GAIN) for name in expected) and expected.keys() == got.keys()
    for name in expected:
        assert torch.equal(expected[name], got[name]), name
    first = load_run_model(tmp_path / "paused" / "checkpoints" / "step_00000007").model
    assert all(not torch.equal(first.state_dict()[name], expected[name]) for name in expected if name.endswith(GAIN))
