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
