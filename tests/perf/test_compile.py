"""torch.compile on every model family, and regional compilation (one graph shared by every block)."""

import copy

import pytest
import torch
from torch import nn

from layerscale.models import compile_blocks, create_model

TINY = {
    "vit": dict(img_size=8, patch_size=4, num_classes=3, embed_dim=16, depth=2, num_heads=2),
    "cait": dict(img_size=8, patch_size=4, num_classes=3, embed_dim=16, depth=2, num_heads=2, depth_token_only=1),
    "gpt": dict(vocab_size=16, block_size=6, embed_dim=16, depth=2, num_heads=2),
}


@pytest.fixture(autouse=True)
def fresh_compiler():
    torch.compiler.reset()
    yield
    torch.compiler.reset()


def _inputs(family):
    g = torch.Generator().manual_seed(0)
    if family == "gpt":
        return torch.randint(0, 16, (2, 6), generator=g)
    return torch.randn(2, 3, 8, 8, generator=g)


def _forward_backward(model, inputs, parameters_of=None):
    out = model(inputs)
    out.square().mean().backward()
    return out.detach(), {n: p.grad.clone() for n, p in (parameters_of or model).named_parameters()}


@pytest.mark.parametrize("family", sorted(TINY))
def test_whole_model_compiles_and_matches_eager(family):
    torch.manual_seed(0)
    eager = create_model(family, **dict(TINY[family], depth=1))
    twin = copy.deepcopy(eager)
    compiled = torch.compile(twin, backend="aot_eager", fullgraph=True)
    inputs = _inputs(family)
    out_eager, grads_eager = _forward_backward(eager, inputs)
    out_compiled, grads_compiled = _forward_backward(compiled, inputs, parameters_of=twin)
    torch.testing.assert_close(out_compiled, out_eager)
    for name, grad in grads_eager.items():
        torch.testing.assert_close(grads_compiled[name], grad, rtol=1e-5, atol=1e-6, msg=name)


class _CountingBackend:
    """A torch.compile backend that runs graphs eagerly and counts how many it was given."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def _graphs_compiled(depth):
    """Graphs a regional compilation of a ViT of ``depth`` blocks needs for an eval pass and a training step."""
    torch.compiler.reset()
    torch.manual_seed(0)
    args = dict(TINY["vit"], depth=depth, drop_path_rate=0.2)  # linear schedule: a different rate per block
    eager = create_model("vit", **args).eval()
    backend = _CountingBackend()
    regional = compile_blocks(copy.deepcopy(eager), backend=backend)
    inputs = _inputs("vit")
    with torch.no_grad():
        torch.testing.assert_close(regional(inputs), eager(inputs))
    regional.train()
    regional(inputs).sum().backward()
    assert all(p.grad is not None for p in regional.blocks.parameters())
    return backend.graphs


def test_regional_compilation_graph_count_does_not_grow_with_depth_or_drop_path_rates():
    shallow, deep = _graphs_compiled(2), _graphs_compiled(5)
    assert deep == shallow <= 4  # rate 0 vs rate > 0, eval vs training: never one graph per block


def test_regional_compilation_matches_eager_gradients_on_cait():
    torch.manual_seed(0)
    eager = create_model("cait", **TINY["cait"])
    regional = compile_blocks(copy.deepcopy(eager), backend="eager")
    inputs = _inputs("cait")
    out_eager, grads_eager = _forward_backward(eager, inputs)
    out_regional, grads_regional = _forward_backward(regional, inputs)
    torch.testing.assert_close(out_regional, out_eager)
    for name, grad in grads_eager.items():
        torch.testing.assert_close(grads_regional[name], grad, rtol=1e-5, atol=1e-6, msg=name)


def test_compile_blocks_rejects_a_model_without_blocks():
    with pytest.raises(ValueError, match=r"Sequential has no submodule of type Block, ClassAttentionBlock"):
        compile_blocks(nn.Sequential(nn.Linear(2, 2)))
    with pytest.raises(ValueError, match=r"expects an nn.Module, got str"):
        compile_blocks("vit")
