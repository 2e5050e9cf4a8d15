"""Our ``hc`` / ``hc_static`` / ``mhc`` beside the ``hyper-connections`` package (PyPI, the version printed), and
``attnres`` / ``attnres_block`` beside ``prenorm``: training-step time and activation memory as ratios measured in
one run, at several widths.

Every candidate is the same ViT (our patch embedding, attention, MLP, norms and head, the same weights): only the
residual connection differs. The package's models wrap each branch ``F(LN(·))`` in its ``HyperConnections`` /
``ManifoldConstrainedHyperConnections`` (``layer_index`` = the sub-layer index, as ours), expand the embedding with
its stream function and sum the streams before our final norm. One step = forward, cross-entropy, backward, AdamW
step on random images. Memory: the bytes autograd saves for the backward of one forward (distinct storages,
parameters excluded; :mod:`activation_memory`), the activation memory a step holds at its peak, deterministic on a
busy machine.

Equal outputs: with the dynamic projections at zero, the package's ``HyperConnections(tanh=True)`` and our ``hc``
are the same static hyper-connection (same ``[A_m | A_r]`` and ``B`` layout, HC Eq. 14 initialisation), so the
script copies random static weights into both and checks the logits agree. With non-zero dynamic projections they
differ by design: the package normalises each stream with an RMSNorm carrying a learnable gain, ours with a
LayerNorm without affine (the paper's Algorithm 2); the script prints that difference too. The package's mHC
computes its coefficients from each stream separately and starts ``H^post`` at ``2σ(1) ≈ 1.46`` (ours follows the
paper: the flattened ``n·C`` stream, ``H^post = 1`` at the start), so only its time and memory are compared.

Needs the optional package: ``pip install hyper-connections==0.4.11`` (not a test requirement). Every candidate of
a width is alive at once (the rounds interleave them): at width 768 the eight candidates with their AdamW states
do not fit in 23 GB; run them in groups there (``--methods prenorm,hc,pkg_hc,hc_static`` etc.).

Run: cd benchmarks && OMP_NUM_THREADS=1 python bench_hyper_connections_package.py [--widths 192,384,768]
     [--depth 12] [--batch 32] [--img 32] [--patch 4] [--rate 4] [--rounds 5] [--threads 1] [--device cpu]
     [--methods prenorm,hc,pkg_hc,hc_static,mhc,pkg_mhc,attnres,attnres_block]
"""

from __future__ import annotations

import argparse
import copy
from importlib.metadata import version

import torch
import torch.nn.functional as F
from torch import nn

from activation_memory import saved_tensor_bytes, synchronizer
from cpu_timing import add_timing_arguments, apply_timing_arguments, medians_on_clock

from layerscale import create_model
from layerscale.residual.multi_stream.hyper_connections import HyperConnections, StaticHyperConnections
from layerscale.residual.multi_stream.mhc import ManifoldConstrainedHyperConnections

OURS = {"hc": HyperConnections, "hc_static": StaticHyperConnections, "mhc": ManifoldConstrainedHyperConnections}


class _Branch(nn.Module):
    """``F(LN(x))`` of one of our blocks: the branch the package's connection wraps."""

    def __init__(self, norm: nn.Module, fn: nn.Module) -> None:
        super().__init__()
        self.norm, self.fn = norm, fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(self.norm(x))


class PackageHyperConnectionViT(nn.Module):
    """Our Pre-LN ViT with every residual connection replaced by the package's (``kind`` ``"hc"`` or ``"mhc"``)."""

    def __init__(self, vit: nn.Module, rate: int, kind: str) -> None:
        super().__init__()
        import hyper_connections as pkg

        self.vit = vit
        klass = pkg.HyperConnections if kind == "hc" else pkg.ManifoldConstrainedHyperConnections
        self.expand, self.reduce = klass.get_expand_reduce_stream_functions(rate)
        dim = vit.blocks[0].attn.proj.weight.shape[0]
        self.connections = nn.ModuleList()
        for b, block in enumerate(vit.blocks):
            for i, fn in ((1, block.attn), (2, block.mlp)):
                branch = _Branch(getattr(block, f"norm{i}"), fn)
                self.connections.append(klass(rate, dim=dim, branch=branch, layer_index=2 * b + i - 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        stream = self.expand(self.vit._embed_tokens(x))
        for connection in self.connections:
            stream = connection(stream)
        return self.vit.forward_head(self.vit.norm(self.reduce(stream)))


def _ours(name: str, args, width: int) -> nn.Module:
    residual = OURS[name](expansion_rate=args.rate) if name in OURS else name
    return create_model("vit", img_size=args.img, patch_size=args.patch, num_classes=10, embed_dim=width,
                        depth=args.depth, num_heads=max(1, width // 64), residual=residual)


def _package(kind: str, args, width: int, source: nn.Module) -> nn.Module:
    """The package's connections around a copy of ``source``'s Pre-LN parts (same embedding, branches, head)."""
    prenorm = _ours("prenorm", args, width)
    prenorm.load_state_dict(source.state_dict(), strict=False)  # shared keys: embedding, branches, norms, head
    return PackageHyperConnectionViT(prenorm, args.rate, kind)


def static_outputs_agree(args) -> tuple[float, float]:
    """Max |logit difference| of our ``hc`` and the package's, same random static weights: (dynamic 0, dynamic ≠ 0)."""
    torch.manual_seed(0)
    ours = _ours("hc", args, 64).double().eval()
    theirs = _package("hc", args, 64, ours).double().eval()
    generator = torch.Generator().manual_seed(1)
    mixes = [getattr(b, f"stream_mix{i}") for b in ours.blocks for i in (1, 2)]
    with torch.no_grad():
        for mix, conn in zip(mixes, theirs.connections):
            mix.alpha.add_(torch.randn(mix.alpha.shape, generator=generator, dtype=torch.float64) * 0.3)
            mix.beta.add_(torch.randn(mix.beta.shape, generator=generator, dtype=torch.float64) * 0.3)
            conn.static_alpha.copy_(mix.alpha)
            conn.static_beta.copy_(mix.beta)
            conn.dynamic_alpha_scale.copy_(mix.alpha_scale.squeeze())
            conn.dynamic_beta_scale.copy_(mix.beta_scale.squeeze())
    x = torch.randn(2, 3, args.img, args.img, dtype=torch.float64)
    with torch.no_grad():
        static = (ours(x) - theirs(x)).abs().max().item()
        for mix, conn in zip(mixes, theirs.connections):
            mix.alpha_proj.normal_(0, 0.5, generator=generator)
            mix.beta_proj.normal_(0, 0.5, generator=generator)
            conn.dynamic_alpha_fn.copy_(mix.alpha_proj)
            conn.dynamic_beta_fn.copy_(mix.beta_proj)
        dynamic = (ours(x) - theirs(x)).abs().max().item()
    return static, dynamic


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--widths", default="192,384,768")
    parser.add_argument("--depth", type=int, default=12)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--img", type=int, default=32)
    parser.add_argument("--patch", type=int, default=4)
    parser.add_argument("--rate", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--methods", default="prenorm,hc,pkg_hc,hc_static,mhc,pkg_mhc,attnres,attnres_block")
    add_timing_arguments(parser, dtype=False)
    args = parser.parse_args()
    apply_timing_arguments(args)
    sync = synchronizer(args.device)
    names = [m for m in args.methods.split(",") if m]
    if "prenorm" not in names:
        names.insert(0, "prenorm")
    print(f"hyper-connections {version('hyper-connections')}, torch {torch.__version__}; ViT {args.img}x{args.img}/"
          f"patch {args.patch}, depth {args.depth}, heads width/64, batch {args.batch}, expansion rate {args.rate}, "
          f"device {args.device}, {args.threads} threads, {args.clock} clock, median of {args.rounds} interleaved "
          f"rounds")
    static, dynamic = static_outputs_agree(args)
    print(f"hc vs package HyperConnections, float64 logits: static weights max |diff| {static:.2e}; "
          f"with dynamic projections {dynamic:.2e} (LayerNorm vs the package's RMSNorm in the coefficients)")
    x = torch.randn(args.batch, 3, args.img, args.img, device=args.device)
    y = torch.randint(0, 10, (args.batch,), device=args.device)
    for width in (int(w) for w in args.widths.split(",")):
        steps, saved, models = {}, {}, {}
        for name in names:
            torch.manual_seed(0)
            if name.startswith("pkg_"):
                source = models.get(name[4:]) or _ours(name[4:], args, width)
                model = _package(name[4:], args, width, copy.deepcopy(source))
            else:
                model = _ours(name, args, width)
            models[name] = model
            model = model.to(args.device).train()
            optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
            saved[name] = saved_tensor_bytes(lambda model=model: model(x), exclude=list(model.parameters()))[0]

            def step(model=model, optimizer=optimizer):
                loss = F.cross_entropy(model(x), y)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                sync()

            steps[name] = step
        medians = medians_on_clock(steps, rounds=args.rounds, clock=args.clock)
        print(f"width {width}:")
        for name in names:
            line = (f"  {name:>14s} {medians[name] * 1e3:9.1f} ms  x{medians[name] / medians['prenorm']:5.2f} vs "
                    f"prenorm   saved for backward {saved[name] / 2**20:7.1f} MiB  "
                    f"x{saved[name] / saved['prenorm']:5.2f}")
            package = f"pkg_{name}"
            if package in medians:
                line += (f"   ours / package: time x{medians[name] / medians[package]:5.2f}, "
                         f"memory x{saved[name] / saved[package]:5.2f}")
            print(line)


if __name__ == "__main__":
    main()
