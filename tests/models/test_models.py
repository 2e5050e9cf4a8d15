import pytest
import torch

from layerscale.models import create_model, list_models

# Exact parameter counts of timm 1.0.31's models (METHODS.md), counted on the meta device.
TIMM_PARAMETER_COUNTS = {
    "cait_xxs24_224": 11_956_264,
    "cait_xxs36_224": 17_299_720,
    "cait_xs24_384": 26_670_088,
    "cait_s24_224": 46_916_200,
    "cait_s36_384": 68_366_632,
    "cait_m36_384": 271_221_352,
    "cait_m48_448": 356_460_520,
    "deit3_small_patch16_224": 22_059_496,
}


def _count(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("name", sorted(TIMM_PARAMETER_COUNTS))
def test_parameter_counts_equal_timms(name):
    with torch.device("meta"):
        model = create_model(name)
    assert _count(model) == TIMM_PARAMETER_COUNTS[name]


@pytest.mark.parametrize("name", ["cait_xxs24_224", "cait_s24_384", "deit3_small_patch16_224",
                                  "deit3_base_patch16_224"])
def test_parameter_counts_and_shapes_equal_installed_timm(name):
    timm = pytest.importorskip("timm")
    with torch.device("meta"):
        ours = create_model(name)
        theirs = timm.create_model(name, pretrained=False)
    assert _count(ours) == _count(theirs)


@pytest.mark.parametrize("name, eps, dpr", [("cait_xxs24_224", 1e-5, 0.05), ("cait_xxs36_224", 1e-5, 0.1),
                                            ("cait_s36_384", 1e-6, 0.2), ("cait_m48_448", 1e-6, 0.4)])
def test_cait_carries_official_epsilon_and_uniform_drop_path(name, eps, dpr):
    with torch.device("meta"):
        model = create_model(name)
    assert model.init_value == eps
    assert {b.drop_path1.drop_prob for b in model.blocks} == {dpr}
    assert {b.drop_path1.drop_prob for b in model.blocks_token_only} == {0.0}


def test_overriding_depth_rederives_epsilon_from_the_depth_rule():
    with torch.device("meta"):
        model = create_model("cait_xxs24_224", depth=12)
    assert model.init_value == 0.1
    with torch.device("meta"):
        model = create_model("cait_xxs24_224", depth=12, init_value=1e-3)
    assert model.init_value == 1e-3


def test_meta_device_init_then_reset_every_module_gives_init_value():
    with torch.device("meta"):
        model = create_model("cait_xxs24_224", img_size=32, depth=3, init_value=1e-5)
    model.to_empty(device="cpu")
    for module in model.modules():
        if hasattr(module, "reset_parameters"):
            module.reset_parameters()
    gammas = [p for n, p in model.named_parameters() if n.endswith("gamma")]
    assert gammas and all(torch.all(g == 1e-5) for g in gammas)
    assert torch.isfinite(model(torch.randn(1, 3, 32, 32))).all()


def test_meta_device_init_equals_cpu_init_for_the_same_seed():
    a = create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3)
    torch.manual_seed(3)
    a.reset_parameters()
    with torch.device("meta"):
        b = create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=2, num_heads=2, num_classes=3)
    b.to_empty(device="cpu")
    torch.manual_seed(3)
    b.reset_parameters()
    for (name, pa), pb in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(pa, pb), name


def test_small_deep_vit_for_28x28_grayscale_on_cpu():
    model = create_model("deit3_small_patch16_224", img_size=28, patch_size=4, in_chans=1, num_classes=10,
                         depth=48, embed_dim=32, num_heads=4)
    assert model(torch.randn(2, 1, 28, 28)).shape == (2, 10)
    assert len(model.blocks) == 48


@pytest.mark.parametrize("name", ["vit", "cait", "gpt"])
def test_every_family_accepts_the_documented_overrides(name):
    overrides = dict(depth=3, embed_dim=24, num_heads=3)
    if name != "gpt":
        overrides.update(img_size=12, patch_size=4, num_classes=5, in_chans=2)
    model = create_model(name, **overrides)
    x = torch.randint(0, 256, (2, 7)) if name == "gpt" else torch.randn(2, 2, 12, 12)
    out = model(x)
    assert out.shape == ((2, 7, 256) if name == "gpt" else (2, 5))
    assert torch.isfinite(out).all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(embed_dim=30, num_heads=4), "embed_dim 30 is not divisible by num_heads 4"),
    (dict(img_size=30, patch_size=4), "img_size 30 is not divisible by patch_size 4"),
    (dict(depth=0), "depth must be a positive int, got 0"),
    (dict(wingspan=3), r"unknown argument\(s\) wingspan for model"),
    (dict(residual="magic"), "unknown residual method 'magic'; known methods:"),
])
def test_impossible_configurations_name_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        create_model("vit", **kwargs)


def test_unknown_model_lists_known_ones():
    with pytest.raises(ValueError, match=r"unknown model 'cait_xxl' \(did you mean cait or .*\?\); "
                                         r"known models: .*cait_m36_384"):
        create_model("cait_xxl")
    assert "cait_m48_448" in list_models() and "deit3_small_patch16_224" in list_models()


def test_wrong_image_shape_is_a_clear_error():
    model = create_model("vit", img_size=8, patch_size=4, embed_dim=16, depth=1, num_heads=2)
    with pytest.raises(ValueError, match=r"expected images of shape \(B, 3, 8, 8\), got \(2, 3, 16, 16\)"):
        model(torch.randn(2, 3, 16, 16))


def test_gpt_is_causal():
    torch.manual_seed(0)
    model = create_model("gpt_nano", depth=2).eval()
    tokens = torch.randint(0, 256, (1, 10))
    changed = tokens.clone()
    changed[0, 6:] = (changed[0, 6:] + 1) % 256
    torch.testing.assert_close(model(tokens)[:, :6], model(changed)[:, :6])
    assert not torch.allclose(model(tokens)[:, 6:], model(changed)[:, 6:])
    with pytest.raises(ValueError, match="sequence length 200 exceeds block_size 128"):
        model(torch.zeros(1, 200, dtype=torch.long))


def test_gpt_generate_extends_the_sequence():
    model = create_model("gpt_nano", depth=1).eval()
    out = model.generate(torch.zeros(1, 3, dtype=torch.long), 5, temperature=0)
    assert out.shape == (1, 8)
