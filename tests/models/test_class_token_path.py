"""The class-token path (``layerscale.models.class_token_path``) equals the full path: logits, gradients and the
random stream, for every residual method, with and without stochastic depth; CaiT's class-attention stage equals
the class-token row of the same stage computed with every token as a query."""

import pytest
import torch
import torch.nn.functional as F
from torch.utils.flop_counter import FlopCounterMode

from layerscale import create_model
from layerscale.models.class_token_path import FULL_PATH_METHODS, SINGLE_STREAM_METHODS, class_token_path_applies
from layerscale.residual.registry import list_residuals

TOL = dict(rtol=1e-5, atol=1e-6)


def _vit(residual: str, drop_path_rate: float = 0.0, **kwargs):
    torch.manual_seed(0)
    model = create_model("vit", img_size=8, patch_size=4, in_chans=3, num_classes=5, embed_dim=16, depth=3,
                         num_heads=2, residual=residual, drop_path_rate=drop_path_rate,
                         drop_path_schedule="uniform", **kwargs)
    with torch.no_grad():  # move every scale away from its (often zero) start so that each branch matters
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    return model.train()


def _run(model, x, y, full: bool, seed: int = 1):
    model.class_token_path = not full
    model.zero_grad(set_to_none=True)
    torch.manual_seed(seed)
    logits = model(x)
    F.cross_entropy(logits, y).backward()
    after = torch.rand(4)  # the random stream must be left where the full path leaves it
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    return logits.detach(), grads, after


def _assert_same(model, x, y, seed: int = 1):
    full_logits, full_grads, full_after = _run(model, x, y, full=True, seed=seed)
    fast_logits, fast_grads, fast_after = _run(model, x, y, full=False, seed=seed)
    torch.testing.assert_close(fast_logits, full_logits, **TOL)
    assert fast_grads.keys() == full_grads.keys()
    for name, grad in full_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, **TOL, msg=lambda m, n=name: f"{n}: {m}")
    assert torch.equal(fast_after, full_after)


def test_every_registered_method_is_decided():
    """A new method must be declared exact (and tested below) or full-path."""
    assert set(list_residuals()) == SINGLE_STREAM_METHODS | FULL_PATH_METHODS
    assert not SINGLE_STREAM_METHODS & FULL_PATH_METHODS


@pytest.mark.parametrize("residual", sorted(FULL_PATH_METHODS))
def test_multi_stream_methods_take_the_full_path(residual):
    model = _vit(residual).eval()
    assert not class_token_path_applies(model)
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        torch.testing.assert_close(model(x), model.forward_head(model.forward_features(x)), rtol=0, atol=0)


@pytest.mark.parametrize("drop_path_rate", [0.0, 0.5], ids=["no_drop_path", "drop_path"])
@pytest.mark.parametrize("residual", sorted(SINGLE_STREAM_METHODS))
def test_vit_class_token_path_equals_full_path(residual, drop_path_rate):
    model = _vit(residual, drop_path_rate)
    assert class_token_path_applies(model)
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    for seed in (1, 2):  # different drop-path masks
        _assert_same(model, x, y, seed)


def test_drop_path_masks_really_differ_between_samples():
    """Guards the test above: at rate 0.5 some samples of a batch of 8 drop a branch and some keep it."""
    model = _vit("layerscale", 0.5)
    torch.manual_seed(1)
    mask = model.blocks[-1].drop_path1.keep_mask(torch.zeros(8, 5, 16))
    assert 0 < int((mask == 0).sum()) < 8


def test_class_token_path_does_less_work_and_eval_matches():
    model = _vit("layerscale").eval()
    x = torch.randn(4, 3, 8, 8)
    flops = {}
    for fast in (False, True):
        model.class_token_path = fast
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            out = model(x)
        flops[fast] = counter.get_total_flops()
        if not fast:
            reference = out
    torch.testing.assert_close(out, reference, **TOL)
    assert flops[True] < flops[False]


def test_checkpointed_class_token_path_matches():
    model = _vit("layerscale", 0.5, grad_checkpointing=True)
    assert class_token_path_applies(model)
    _assert_same(model, torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,)))


def test_full_path_where_not_exact():
    model = _vit("layerscale", drop_rate=0.1)
    assert not class_token_path_applies(model)  # dropout draws a mask per token in training
    assert class_token_path_applies(model.eval())  # no dropout at evaluation
    model = _vit("layerscale")
    handle = model.blocks[-1].mlp.register_forward_hook(lambda *args: None)
    assert not class_token_path_applies(model)  # a hook would see only the class token
    handle.remove()
    assert class_token_path_applies(model)
    model.blocks[-1].compile()
    assert not class_token_path_applies(model)
    model = _vit("layerscale")
    model.global_pool = "avg"
    assert not class_token_path_applies(model)


def test_forward_features_keeps_every_token():
    model = _vit("layerscale").eval()
    x = torch.randn(2, 3, 8, 8)
    with torch.no_grad():
        assert model.forward_features(x).shape == (2, 5, 16)
        torch.testing.assert_close(model(x), model.forward_head(model.forward_features(x)), **TOL)


# ------------------------------------------------------------------------------------------------------------ CaiT
def _full_query_class_block(block, x, cls):
    """The class-attention block with every token of ``[cls; x]`` as a query and updated, then row 0 kept."""
    u = torch.cat((cls, x), dim=1)
    attn = block.attn
    B, N, D = u.shape
    h = block._branch_input(1, u)
    q, k, v = (lin(h).reshape(B, N, attn.num_heads, attn.head_dim).transpose(1, 2)
               for lin in (attn.q, attn.k, attn.v))
    u = block._update(1, u, attn._merge(F.scaled_dot_product_attention(q, k, v)))
    u = block._update(2, u, block.mlp(block._branch_input(2, u)))
    return u[:, :1]


def _cait_full_query_logits(model, images):
    x = model.pos_drop(model.patch_embed(images) + model.pos_embed)
    x = model.blocks(x)
    cls = model.cls_token.expand(x.shape[0], -1, -1)
    for block in model.blocks_token_only:
        cls = _full_query_class_block(block, x, cls)
    x = torch.cat((cls, x), dim=1)
    return model.forward_head(x if model.norm is None else model.norm(x))


@pytest.mark.parametrize("drop_path_rate", [0.0, 0.5], ids=["no_drop_path", "drop_path"])
@pytest.mark.parametrize("residual", ["layerscale", "layerscale_head", "postnorm", "periln"])
def test_cait_class_attention_equals_full_query_stage(residual, drop_path_rate):
    torch.manual_seed(0)
    model = create_model("cait", img_size=8, patch_size=4, num_classes=5, embed_dim=16, depth=2, num_heads=2,
                         depth_token_only=2, residual=residual, drop_path_rate=drop_path_rate).train()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    for block in model.blocks_token_only:  # stochastic depth in the class-attention stage too
        block.drop_path1.drop_prob = block.drop_path2.drop_prob = drop_path_rate
    x, y = torch.randn(8, 3, 8, 8), torch.randint(0, 5, (8,))
    results = []
    for forward in (model, lambda images: _cait_full_query_logits(model, images)):
        model.zero_grad(set_to_none=True)
        torch.manual_seed(3)
        logits = forward(x)
        F.cross_entropy(logits, y).backward()
        results.append((logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()
                                          if p.grad is not None}, torch.rand(4)))
    (fast, fast_grads, fast_after), (full, full_grads, full_after) = results
    torch.testing.assert_close(fast, full, **TOL)
    assert fast_grads.keys() == full_grads.keys()
    for name, grad in full_grads.items():
        torch.testing.assert_close(fast_grads[name], grad, **TOL, msg=lambda m, n=name: f"{n}: {m}")
    assert torch.equal(fast_after, full_after)
