"""The batched-matmul talking-heads mixing computes exactly timm's permute-and-Linear form."""

import pytest
import torch

from layerscale.layers import TalkingHeadAttention


def test_talking_heads_equals_timm_forward_and_backward():
    timm_cait = pytest.importorskip("timm.models.cait")
    torch.manual_seed(0)
    ours = TalkingHeadAttention(24, 3)
    theirs = timm_cait.TalkingHeadAttn(24, num_heads=3, qkv_bias=True)
    theirs.load_state_dict(ours.state_dict())
    with torch.no_grad():  # non-trivial mixing biases (CaiT initialises them to zero)
        for mix in ("proj_l", "proj_w"):
            getattr(ours, mix).bias.normal_()
            getattr(theirs, mix).bias.copy_(getattr(ours, mix).bias)
    x = torch.randn(2, 5, 24, requires_grad=True)
    upstream = torch.randn(2, 5, 24)
    out_ours, out_theirs = ours(x), theirs(x)
    torch.testing.assert_close(out_ours, out_theirs)
    names = [n for n, _ in ours.named_parameters()]
    theirs_params = dict(theirs.named_parameters())
    grads_ours = torch.autograd.grad(out_ours, [x] + [p for _, p in ours.named_parameters()], upstream)
    grads_theirs = torch.autograd.grad(out_theirs, [x] + [theirs_params[n] for n in names], upstream)
    for name, a, b in zip(["input"] + names, grads_ours, grads_theirs):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5, msg=name)
