"""On a machine with a CUDA GPU: every residual method, the surgery and the block ranking compute on the GPU what
they compute on the CPU (float32, TF32 off, so the two differ only by summation order). Skipped without CUDA — CI has
none; a session lent a GPU runs the whole suite there (``run.device: auto`` then trains the other tests on it too)."""

import pytest
import torch

from layerscale import create_model, grow, list_residuals, prune
from layerscale.surgery import fold_layerscale

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")

CUDA = torch.device("cuda")


@pytest.fixture(autouse=True)
def full_float32():
    """TF32 would round matrix products to 10 mantissa bits on the GPU; the comparison is of float32 with float32."""
    matmul, cudnn = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    yield
    torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn


def vit(residual: str, depth: int = 4) -> torch.nn.Module:
    torch.manual_seed(0)
    return create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=32, num_heads=4,
                        depth=depth, residual=residual)


def images(n: int = 6) -> torch.Tensor:
    return torch.randn(n, 1, 8, 8, generator=torch.Generator().manual_seed(1))


def forward_and_grads(model: torch.nn.Module, x: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    out = model(x)
    (out.square().mean()).backward()
    return out.detach().cpu(), {n: p.grad.detach().cpu() for n, p in model.named_parameters() if p.grad is not None}


def assert_close(got: torch.Tensor, expected: torch.Tensor, what: str) -> None:
    scale = expected.abs().max().clamp_min(1e-12)
    error = (got - expected).abs().max() / scale
    assert error < 1e-4, f"{what}: CUDA differs from CPU by {error:.2e} of its largest entry"


@pytest.mark.parametrize("residual", list_residuals())
def test_every_residual_method_computes_the_same_output_and_gradients_on_cuda(residual):
    model = vit(residual).train()
    cpu_out, cpu_grads = forward_and_grads(model, images())
    cuda_out, cuda_grads = forward_and_grads(model.to(CUDA), images().to(CUDA))
    assert_close(cuda_out, cpu_out, f"{residual} output")
    assert cuda_grads.keys() == cpu_grads.keys()
    for name, grad in cpu_grads.items():
        assert_close(cuda_grads[name], grad, f"{residual} gradient of {name}")


@pytest.mark.parametrize("residual", ["layerscale", "prenorm"])
def test_grow_at_zero_gamma_and_prune_keep_a_cuda_model_on_cuda_and_its_function(residual):
    model = vit(residual).eval().to(CUDA)
    model.class_token_path = False  # the full path in both models (the shortcut rounds the last block differently)
    x = images().to(CUDA)
    with torch.no_grad():
        before = model(x)
        grown = grow(model, insert=2, gamma=0.0, seed=0)
        assert all(p.device.type == "cuda" for p in grown.parameters())
        torch.testing.assert_close(grown(x), before, rtol=0, atol=0)
        pruned = prune(grown, [grown.depth - 1, grown.depth - 2])
        assert pruned.depth == model.depth and all(p.device.type == "cuda" for p in pruned.parameters())
        assert torch.isfinite(pruned(x)).all()


def test_folding_layerscale_on_cuda_keeps_the_output():
    model = vit("layerscale").eval().to(CUDA)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("gamma"):
                p.uniform_(0.5, 1.5)  # far from the 1e-1 init, so the fold has something to move
        x = images().to(CUDA)
        before = model(x)
        folded = fold_layerscale(model)
        assert not any(name.endswith("gamma") for name, _ in folded.named_parameters())
        assert_close(folded(x).cpu(), before.cpu(), "folded output")


def test_block_ranking_on_cuda_matches_the_cpu():
    from layerscale.analysis.pruning.block_ranking import rank_blocks

    model = vit("layerscale", depth=6).eval()
    x = images(40)
    labels = torch.arange(40) % 10
    on_cpu = rank_blocks(model, (x, labels), "angular", device="cpu")
    on_cuda = rank_blocks(model.to(CUDA), (x, labels), "angular", device="cuda")  # the model must be there
    assert on_cuda == pytest.approx(on_cpu, rel=1e-3, abs=1e-5)
