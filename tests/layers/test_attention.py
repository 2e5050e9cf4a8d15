import pytest
import torch

from layerscale.layers import Attention, ClassAttention, TalkingHeadAttention


def _manual_attention(attn: Attention, x: torch.Tensor) -> torch.Tensor:
    B, N, C = x.shape
    H = attn.num_heads
    q, k, v = attn.qkv(x).reshape(B, N, 3, H, C // H).permute(2, 0, 3, 1, 4)
    w = (q @ k.transpose(-2, -1) / (C // H) ** 0.5)
    if attn.causal:
        w = w.masked_fill(torch.ones(N, N, dtype=torch.bool).triu(1), float("-inf"))
    out = w.softmax(-1) @ v
    return attn.proj(out.transpose(1, 2).reshape(B, N, C))


@pytest.mark.parametrize("causal", [False, True])
def test_sdpa_attention_equals_the_textbook_formula(causal):
    torch.manual_seed(0)
    attn = Attention(16, 4, causal=causal)
    x = torch.randn(2, 5, 16)
    torch.testing.assert_close(attn(x), _manual_attention(attn, x), atol=1e-5, rtol=1e-5)


def test_width_not_divisible_by_heads_names_both():
    with pytest.raises(ValueError, match="embed_dim 10 is not divisible by num_heads 4"):
        Attention(10, 4)


def test_per_head_scale_removes_proj_bias_and_keeps_branch_epsilon_small():
    attn = Attention(32, 4, head_scale_init=1e-6)
    assert attn.proj.bias is None
    x = torch.randn(2, 7, 32)
    assert attn(x).abs().max() < 1e-5


@pytest.mark.parametrize("cls", [Attention, TalkingHeadAttention, ClassAttention])
def test_head_h_scale_changes_only_head_h_contribution(cls):
    torch.manual_seed(0)
    H = 4
    attn = cls(32, H, head_scale_init=1.0).eval()
    x = torch.randn(2, 6, 32)

    def with_gamma(values):
        with torch.no_grad():
            attn.head_scale.gamma.copy_(torch.tensor(values))
            return attn(x)

    base = with_gamma([1.0, 1.0, 1.0, 1.0])
    per_head = [with_gamma([1.0 if i == h else 0.0 for i in range(H)]) for h in range(H)]
    torch.testing.assert_close(base, sum(per_head), atol=1e-5, rtol=1e-5)
    h = 2
    changed = with_gamma([1.0, 1.0, 3.0, 1.0])
    torch.testing.assert_close(changed - base, 2.0 * per_head[h], atol=1e-5, rtol=1e-4)


def test_talking_heads_mixes_logits_across_heads():
    torch.manual_seed(0)
    attn = TalkingHeadAttention(16, 4).eval()
    x = torch.randn(1, 5, 16)
    y_mixed = attn(x)
    with torch.no_grad():
        attn.proj_l.weight.copy_(torch.eye(4))
        attn.proj_l.bias.zero_()
        attn.proj_w.weight.copy_(torch.eye(4))
        attn.proj_w.bias.zero_()
    plain = Attention(16, 4).eval()
    plain.load_state_dict({k: v for k, v in attn.state_dict().items() if k.startswith(("qkv", "proj."))})
    torch.testing.assert_close(attn(x), plain(x), atol=1e-5, rtol=1e-5)
    assert not torch.allclose(y_mixed, attn(x), atol=1e-4)


def test_class_attention_updates_only_the_class_token_and_sees_all_tokens():
    torch.manual_seed(0)
    attn = ClassAttention(16, 2).eval()
    u = torch.randn(2, 9, 16)
    y = attn(u)
    assert y.shape == (2, 1, 16)
    u2 = u.clone()
    u2[:, 5] += 1.0
    assert not torch.allclose(attn(u2), y)
