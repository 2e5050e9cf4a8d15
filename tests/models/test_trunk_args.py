"""The hyper-parameters ViT, CaiT and GPT share are checked and resolved by one function, identically."""

import pytest

from layerscale import create_model
from torch.nn import RMSNorm
from layerscale.models.trunk_args import resolve_trunk_args

SMALL = {"vit": dict(img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2),
         "cait": dict(img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, depth_token_only=1),
         "gpt": dict(vocab_size=16, block_size=8, embed_dim=16, depth=2, num_heads=2)}


@pytest.mark.parametrize("family", sorted(SMALL))
@pytest.mark.parametrize("bad, message", [
    (dict(depth=0), "depth must be a positive int, got 0"),
    (dict(embed_dim=18, num_heads=4), "embed_dim 18 is not divisible by num_heads 4"),
    (dict(drop_rate=1.0), r"drop_rate must be a number in \[0, 1\), got 1.0"),
    (dict(residual="magic"), "unknown residual method 'magic'"),
    (dict(norm="batchnorm"), "batchnorm"),
    (dict(init_value=0.1, init_values=0.2), "init_value=0.1 and init_values=0.2 disagree"),
])
def test_every_family_refuses_a_bad_shared_argument_with_the_same_line(family, bad, message):
    with pytest.raises(ValueError, match=message):
        create_model(family, **{**SMALL[family], **bad})


def test_resolved_arguments_are_what_the_models_use():
    args = resolve_trunk_args(depth=4, embed_dim=16, num_heads=2, drop_rate=0.0, residual="rezero", norm="rmsnorm",
                              norm_eps=1e-5, init_value=None, init_values=0.25)
    assert args.init_value == 0.25 and args.method.name == "rezero"
    norm = args.norm_layer(16)
    assert isinstance(norm, RMSNorm) and norm.eps == 1e-5
    model = create_model("gpt", **SMALL["gpt"], residual="prenorm", norm="rmsnorm")
    assert model.residual == "prenorm" and isinstance(model.norm, RMSNorm) and model.norm.eps == 1e-5
