"""Run the real-vocabulary pruning example (docs/results/llama-prune/DESIGN.md), resumably.

    python scripts/llama_prune.py corpus     # the splits, the BPE tokenizer, corpus.json
    python scripts/llama_prune.py train      # the rate grid (extended at an edge), then seeds 1-2 at each chosen rate
    python scripts/llama_prune.py prune      # layerscale prune on every final model: curves, then healing
    python scripts/llama_prune.py collect    # runs.csv, pruning.csv, healing.csv and results.md
    python scripts/llama_prune.py all        # the four in order

Models and prune outputs live under ``runs/llama-prune`` (never committed); a step already recorded there is not
redone, and a final model whose folder is missing is retrained from its seed (one thread: the same weights).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from evidence import llama_prune_plan as plan  # noqa: E402

WORK = REPO / "runs" / "llama-prune"
RESULTS = REPO / "docs" / "results" / "llama-prune"


def corpus() -> None:
    from evidence.llama_prune_data import build_corpus

    record = build_corpus(WORK / "corpus")
    RESULTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(WORK / "corpus" / "corpus.json", RESULTS / "corpus.json")
    print(json.dumps(record["files"]))


def _run_dir(variant: str, lr: float, seed: int) -> Path:
    return WORK / "train" / plan.run_name(variant, lr, seed)


def _record(variant: str, lr: float, seed: int) -> dict | None:
    path = _run_dir(variant, lr, seed) / "run.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def _train_one(variant: str, lr: float, seed: int, need_model: bool) -> dict:
    from evidence.llama_prune_train import train

    record = _record(variant, lr, seed)
    model_there = (_run_dir(variant, lr, seed) / "model" / "config.json").is_file()
    if record is not None and (model_there or not need_model or record["status"] != "finished"):
        return record
    print(f"train {plan.run_name(variant, lr, seed)}", flush=True)
    fresh = train(variant, lr, seed, plan.STEPS, WORK / "corpus", _run_dir(variant, lr, seed))
    if record is not None and fresh["train_loss"] != record["train_loss"]:
        raise SystemExit(f"retraining {plan.run_name(variant, lr, seed)} did not reproduce its recorded losses")
    print(f"  {fresh['status']}: validation loss {fresh['validation_loss']:.4f}, {fresh['wall_time_s']:.0f} s",
          flush=True)
    return fresh


def chosen_rate(variant: str) -> float:
    """Train the grid of ``variant`` (seed 0), extending it at an edge (DESIGN.md), and return the chosen rate."""
    rates = list(plan.GRID)
    while True:
        losses = {lr: _train_one(variant, lr, 0, need_model=False)["validation_loss"] for lr in rates}
        choice = plan.choose(losses)
        extension = plan.extension(rates, choice)
        if extension is None:
            return choice
        rates.append(extension)


def train() -> None:
    for variant in plan.VARIANTS:
        rate = chosen_rate(variant)
        print(f"{variant}: chosen rate {rate:g}", flush=True)
        for seed in plan.SEEDS:
            _train_one(variant, rate, seed, need_model=True)


def _prune(model: Path, dest: Path, arguments: list[str]) -> None:
    if (dest / "config.json").is_file() and (dest / "pruning_report" / "criteria.json").is_file():
        return  # the model folder is renamed into place first, the report written after it: both mean done
    heldout = WORK / "corpus" / "heldout.txt"
    command = [sys.executable, "-m", "layerscale", "prune", str(model), "--out", str(dest), "--data-path", str(heldout),
               "--seq-len", str(plan.PRUNE_SEQ_LEN), "--samples", str(plan.SAMPLES), "--bootstrap",
               str(plan.BOOTSTRAP), "--force", *arguments]
    print(" ".join(command[1:]), flush=True)
    # one intra-op thread, as the training runs: two calls side by side on two cores with a thread pool each
    # oversubscribe the cores and run many times slower (DESIGN.md, addendum of 06:29 UTC)
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env={**os.environ, "OMP_NUM_THREADS": "1"})


def prune(variants: tuple[str, ...] = plan.VARIANTS) -> None:
    """First every final model's unhealed curves (one call each), then the healing calls, so that a stop leaves
    whole curves for every model rather than the healing of one."""
    models = []
    for variant in variants:
        rate = chosen_rate(variant)
        for seed in plan.SEEDS:
            _train_one(variant, rate, seed, need_model=True)
            model = _run_dir(variant, rate, seed) / "model"
            base = WORK / "prune" / plan.run_name(variant, rate, seed)
            _prune(model, base / "curves", ["--by", ",".join(plan.criteria(variant)), "--remove",
                                            str(plan.MAX_REMOVED)])
            models.append((variant, model, base))
    for n in plan.HEALED_N:
        for mode in plan.HEAL_MODES:
            for variant, model, base in models:
                chosen = plan.read_curves(base / "curves")
                seen: set[tuple[int, ...]] = set()
                for criterion in plan.criteria(variant):
                    blocks = tuple(chosen[criterion][n - 1])
                    if blocks in seen:
                        continue
                    seen.add(blocks)
                    _prune(model, base / f"heal-{mode}-n{n}-{criterion}",
                           ["--by", criterion, "--remove", str(n), *plan.heal_arguments(mode)])


def collect() -> None:
    from evidence.llama_prune_report import collect as collect_tables

    collect_tables(WORK, RESULTS)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["corpus", "train", "prune", "collect", "all"])
    parser.add_argument("--variants", default=",".join(plan.VARIANTS),
                        help="prune only these variants (comma-separated; default: both)")
    args = parser.parse_args(argv)
    step, variants = args.step, tuple(args.variants.split(","))
    if not set(variants) <= set(plan.VARIANTS):
        parser.error(f"--variants takes {', '.join(plan.VARIANTS)}; got {args.variants!r}")
    if step in ("corpus", "all") and not (WORK / "corpus" / "corpus.json").is_file():
        corpus()
    if step in ("train", "all"):
        train()
    if step in ("prune", "all"):
        prune(variants)
    if step in ("collect", "all"):
        collect()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
