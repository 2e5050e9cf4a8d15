import pytest
import torch

from layerscale.layers import Block, ClassAttentionBlock, DropPath, drop_path_rates
from layerscale.models import create_model


def test_default_block_keys_are_timms():
    keys = set(Block(16, 2, residual="layerscale").state_dict())
    assert keys == {
        "norm1.weight", "norm1.bias", "attn.qkv.weight", "attn.qkv.bias", "attn.proj.weight", "attn.proj.bias",
        "ls1.gamma", "norm2.weight", "norm2.bias", "mlp.fc1.weight", "mlp.fc1.bias", "mlp.fc2.weight",
        "mlp.fc2.bias", "ls2.gamma",
    }


@pytest.mark.parametrize("placement, scales", [("both", {"ls1.gamma", "ls2.gamma"}), ("attn", {"ls1.gamma"}),
                                               ("mlp", {"ls2.gamma"}), ("none", set())])
def test_placement_puts_scales_on_the_named_branches(placement, scales):
    keys = set(Block(16, 2, ls_placement=placement).state_dict())
    assert {k for k in keys if k.startswith("ls")} == scales


def test_unknown_placement_is_an_error_listing_choices():
    with pytest.raises(ValueError, match="ls_placement must be one of.*'sideways'"):
        Block(16, 2, ls_placement="sideways")


def test_identity_at_initialisation_in_a_36_block_model():
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=3, embed_dim=32, depth=36,
                         num_heads=4, init_value=1e-6).eval()
    x = model.pos_drop(torch.randn(2, 17, 32) * 3)
    with torch.no_grad():
        for block in model.blocks:
            y = block(x)
            assert (y - x).norm() <= 1e-5 * x.norm()
            x = y


def test_layerscale_branch_is_linear_in_gamma():
    torch.manual_seed(0)
    block = Block(16, 2, init_value=1.0).eval()
    x = torch.randn(2, 5, 16)
    with torch.no_grad():
        block.ls2.gamma.zero_()
        attn_only = block(x) - x
        block.ls1.gamma.mul_(0.5)
        torch.testing.assert_close(block(x) - x, 0.5 * attn_only, atol=1e-6, rtol=1e-5)


def test_gradients_reach_every_gamma():
    torch.manual_seed(0)
    model = create_model("cait", img_size=8, patch_size=4, num_classes=3, embed_dim=16, depth=3, num_heads=2,
                         init_value=1e-5)
    model(torch.randn(2, 3, 8, 8)).square().sum().backward()
    gammas = [(n, p) for n, p in model.named_parameters() if n.endswith("gamma")]
    assert len(gammas) == 2 * (3 + 2)
    for name, p in gammas:
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_class_attention_block_leaves_patches_alone():
    block = ClassAttentionBlock(16, 2, init_value=0.5)
    x, cls = torch.randn(2, 4, 16), torch.randn(2, 1, 16)
    assert block(x, cls).shape == (2, 1, 16)


def test_drop_path_rate_schedules():
    assert drop_path_rates(4, 0.3, "uniform") == [0.3] * 4
    assert drop_path_rates(4, 0.3, "linear") == pytest.approx([0.0, 0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="drop_path_schedule"):
        drop_path_rates(4, 0.3, "cosine")
    with pytest.raises(ValueError, match="1.5"):
        drop_path_rates(4, 1.5)


def test_drop_path_keeps_expectation_and_is_off_in_eval():
    torch.manual_seed(0)
    dp = DropPath(0.25)
    x = torch.ones(20000, 1, 1)
    y = dp(x)
    assert torch.isin(y.unique(), torch.tensor([0.0, 1 / 0.75])).all()
    assert abs(y.mean().item() - 1.0) < 0.03
    assert torch.equal(dp.eval()(x), x)


def test_drop_path_in_a_block_drops_whole_samples():
    torch.manual_seed(0)
    block = Block(8, 2, init_value=1.0, drop_path=0.5).train()
    x = torch.randn(64, 3, 8)
    y = block(x)
    unchanged = [(y[i] - x[i]).abs().max().item() == 0 for i in range(64)]
    assert 0 < sum(unchanged) < 64
