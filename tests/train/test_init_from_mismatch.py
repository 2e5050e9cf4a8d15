"""run.init_from with a model folder of ours: its config.json must build a model computing the same function with
these weights as the configured one. Settings no key or shape shows (head count, residual method, norm ε) were
loaded across silently; now each difference is one line naming it. Training-only settings may differ."""

from __future__ import annotations

import pytest

pytest.importorskip("safetensors")

from layerscale import VisionTransformer  # noqa: E402
from layerscale.train.setup.initial_weights import load_initial_weights  # noqa: E402

TINY = dict(img_size=8, patch_size=4, in_chans=1, num_classes=3, embed_dim=16, depth=2, num_heads=2,
            residual="prenorm")


@pytest.mark.parametrize("override, named", [({"num_heads": 4}, "num_heads (the folder 2, configured model 4)"),
                                             ({"residual": "mixln"}, "block (the folder 'prenorm', configured "
                                                                     "model 'mixln')"),
                                             ({"norm_eps": 1e-5}, "norm_eps")])
def test_a_folder_of_another_function_is_refused(tmp_path, override, named):
    VisionTransformer(**TINY).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="run.init_from") as info:
        load_initial_weights(VisionTransformer(**{**TINY, **override}), tmp_path)
    assert named in str(info.value) and "\n" not in str(info.value)


def test_training_only_settings_may_differ(tmp_path):
    saved = VisionTransformer(**TINY)
    saved.save_pretrained(tmp_path)
    model = VisionTransformer(**TINY, drop_path_rate=0.1, drop_rate=0.1)
    assert load_initial_weights(model, tmp_path) is None
    assert all((a == b).all() for a, b in zip(saved.state_dict().values(), model.state_dict().values()))


def _trained_run(tmp_path, heads: int = 2):
    from train_helpers import tiny_config

    from layerscale.train import run

    config = tiny_config(model={"num_heads": heads}, optim={"max_steps": 2, "warmup_steps": 1})
    run(config, out=tmp_path / "source")
    return config


@pytest.mark.parametrize("where", ["run", "checkpoint"])
def test_a_run_of_another_head_count_is_refused(tmp_path, where):
    """A run or checkpoint directory has no config.json: the model its training state records is compared."""
    from layerscale import create_model

    config = _trained_run(tmp_path)
    source = tmp_path / "source"
    if where == "checkpoint":
        source = sorted((source / "checkpoints").glob("step_*"))[-1]
    args = {k: v for k, v in config["model"].items() if k != "name"}
    args.update(img_size=8, in_chans=1, num_classes=10)  # what the digits data gives the model
    model = create_model("vit", **{**args, "num_heads": 4})
    with pytest.raises(ValueError, match=r"run\.init_from: .*num_heads \(the trained model 2, configured model 4\)"):
        load_initial_weights(model, source)
    same = create_model("vit", **args)
    assert load_initial_weights(same, source) is None


def test_weights_that_are_not_finite_are_refused(tmp_path):
    import torch

    model = VisionTransformer(**TINY)
    with torch.no_grad():
        model.head.weight[0, 0] = float("nan")
    model.save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="head.weight"):
        load_initial_weights(VisionTransformer(**TINY), tmp_path)
