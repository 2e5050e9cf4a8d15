#!/usr/bin/env python
"""How far BHyT's variance correction moves when it is never updated: for each finished ``bhyt`` run of a
study, ``c`` as it trained (computed once, at the first forward: the library before 2026-12-08) against ``c``
recomputed from the run's final weights (what the authors' ``UpdateScalerCallback`` computes near a run's end),
and what the difference does to the MLP-branch norm's scale ``r₂ = 1/(κ √(σ² + c λ₁²/κ² + ε))`` on a fixed sample
of training images (docs/methods.md, "BHyT").

    python scripts/bhyt_gain_drift.py --study docs/results/depthbench-attnres --out docs/results/bhyt-gain-drift

It reads each run's ``config.yaml`` and last checkpoint under ``STUDY/runs/`` (the folders ``layerscale study``
keeps locally; a packed study's archive holds no checkpoints, so this runs where the runs were trained) and writes
``drift.csv`` (one row per run and block) and ``summary.md`` (the numbers below, generated from the rows). Per run
and block: ``c0`` (saved), ``c_final`` (recomputed by
:func:`~layerscale.residual.normalization.bhyt.attention_variance_gain`), ``λ₁``, the median over tokens of ``σ²``
and of ``c_final λ₁²/κ² / σ²``, and the median and maximum over tokens of ``|r₂(c_final)/r₂(c0) − 1|``.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
from pathlib import Path

import torch

from layerscale.residual.normalization.bhyt import EPS, BHyTPostNorm, attention_variance_gain, mean_square
from layerscale.sources.run_model import load_run_model

FIELDS = ["run", "block", "c0", "c_final", "lam1", "s2_median", "correction_over_s2_median", "r2_change_median",
          "r2_change_max"]


def finished_bhyt_runs(study: Path) -> list[Path]:
    """The run folders of ``study`` whose ``runs.csv`` row is a ``bhyt`` run that is not pending."""
    with open(study / "runs.csv", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["method"] == "bhyt" and r["status"] != "pending"]
    return [study / "runs" / r["run_id"] for r in rows]


def drift_rows(run_dirs: list[Path], images: int = 512, seed: int = 0) -> list[dict]:
    """One row per run and block (see the module docstring), ``images`` training images drawn with ``seed``."""
    out, data = [], None
    for run_dir in run_dirs:
        run = load_run_model(run_dir, train_data=data)
        data, model = run.train_data, run.model
        order = torch.randperm(len(data.train), generator=torch.Generator().manual_seed(seed))[:images]
        x = torch.stack([data.train[int(i)][0] for i in order])
        stats: dict[int, torch.Tensor] = {}
        hooks = [block.norm1.register_forward_hook(
            lambda module, args, output, i=i: stats.__setitem__(i, mean_square(args[0]).squeeze(-1)))
            for i, block in enumerate(model.blocks)]
        try:
            with torch.no_grad():
                model(x)
        finally:
            for hook in hooks:
                hook.remove()
        for i, block in enumerate(model.blocks):
            norm = block.norm2
            if not isinstance(norm, BHyTPostNorm):
                raise ValueError(f"{run_dir}: block {i} has no BHyT norm; not a bhyt run")
            s2 = stats[i].double()
            c0 = float(norm.attn_variance_gain)
            c_final = float(attention_variance_gain(block.attn, s2.shape[-1]))
            lam = float(block.norm1.lam.detach())
            k = lam ** 2 / norm.kappa ** 2
            change = (torch.sqrt((s2 + c0 * k + EPS) / (s2 + c_final * k + EPS)) - 1).abs()
            out.append({"run": run_dir.name, "block": i, "c0": c0, "c_final": c_final, "lam1": lam,
                        "s2_median": float(s2.median()),
                        "correction_over_s2_median": float((c_final * k / s2).median()),
                        "r2_change_median": float(change.median()), "r2_change_max": float(change.max())})
    return out


def summary(rows: list[dict]) -> str:
    """The paragraph docs/methods.md quotes, every number formatted here from ``rows``."""
    growth = [r["c_final"] / r["c0"] for r in rows]
    worst = max(rows, key=lambda r: r["r2_change_max"])
    runs = sorted({r["run"] for r in rows})
    largest_correction = max(r["correction_over_s2_median"] for r in rows)
    return (f"{len(runs)} finished `bhyt` runs, {len(rows)} blocks. `c` recomputed from the final weights is "
            f"{min(growth):.3g}–{max(growth):.3g} times the `c` the run trained with (median "
            f"{statistics.median(growth):.3g}). The correction `c λ₁²/κ²` at the final weights is at most "
            f"{largest_correction:.2%} of the median token's `σ²` in any block. Updating `c` would change the "
            f"MLP-branch norm's scale `r₂` by {max(r['r2_change_median'] for r in rows):.2%} at most for the median "
            f"token of a block, and by up to {worst['r2_change_max']:.1%} for single tokens (block {worst['block']} of "
            f"{worst['run']}: tokens whose `σ²` is small).\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--study", required=True, type=Path, help="a study folder with its runs/ (checkpoints)")
    parser.add_argument("--out", required=True, type=Path, help="folder for drift.csv and summary.md")
    parser.add_argument("--images", type=int, default=512, help="training images the statistics are taken on")
    args = parser.parse_args(argv)
    runs = finished_bhyt_runs(args.study)
    if not runs:
        print(f"{args.study}: no finished bhyt run", file=sys.stderr)
        return 2
    rows = drift_rows(runs, args.images)
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "drift.csv.tmp", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()} for r in rows)
    (args.out / "drift.csv.tmp").replace(args.out / "drift.csv")
    text = summary(rows)
    (args.out / "summary.md.tmp").write_text(text)
    (args.out / "summary.md.tmp").replace(args.out / "summary.md")
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
