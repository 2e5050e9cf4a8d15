"""Run the real-vocabulary pruning example (docs/results/llama-prune/DESIGN.md), resumably.

    python scripts/llama_prune.py corpus     # the splits, the BPE tokenizer, corpus.json
    python scripts/llama_prune.py train      # the rate grid (extended at an edge), then seeds 1-2 at each chosen rate
    python scripts/llama_prune.py prune      # layerscale prune on every final model: curves, then healing
    python scripts/llama_prune.py collect    # runs.csv, pruning.csv, healing.csv and results.md
    python scripts/llama_prune.py all        # the four in order

``--variants layerscale`` trains and prunes that variant only; ``--jobs 2`` runs two training runs or two prune
calls at a time, each a process with one intra-op thread; ``collect --recorded-variants prenorm`` keeps Pre-LN's rows
as the committed tables hold them (DESIGN.md, addendum of 2026-12-06 12:35 UTC).

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
from concurrent.futures import ThreadPoolExecutor
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


def _needs_training(variant: str, lr: float, seed: int, need_model: bool) -> bool:
    record = _record(variant, lr, seed)
    model_there = (_run_dir(variant, lr, seed) / "model" / "config.json").is_file()
    return not (record is not None and (model_there or not need_model or record["status"] != "finished"))


def _train_one(variant: str, lr: float, seed: int, need_model: bool) -> dict:
    from evidence.llama_prune_train import train

    record = _record(variant, lr, seed)
    if not _needs_training(variant, lr, seed, need_model):
        return record
    print(f"train {plan.run_name(variant, lr, seed)}", flush=True)
    fresh = train(variant, lr, seed, plan.STEPS, WORK / "corpus", _run_dir(variant, lr, seed))
    if record is not None and fresh["train_loss"] != record["train_loss"]:
        raise SystemExit(f"retraining {plan.run_name(variant, lr, seed)} did not reproduce its recorded losses")
    print(f"  {fresh['status']}: validation loss {fresh['validation_loss']:.4f}, {fresh['wall_time_s']:.0f} s",
          flush=True)
    return fresh


def _in_parallel(jobs: int, commands: list[list[str]], env: dict | None = None) -> None:
    """Run ``commands`` (each a process) ``jobs`` at a time; the first failure stops the step once the others end."""
    def run(command: list[str]) -> None:
        print(" ".join(command[1:]), flush=True)
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for future in [pool.submit(run, command) for command in commands]:
            future.result()


def _train_many(runs: list[tuple[str, float, int]], need_model: bool, jobs: int) -> dict[tuple, dict]:
    """Each run's record, training what is missing: in this process with one job, else ``jobs`` processes at a time
    (``train-one``; one intra-op thread each, as in this process)."""
    pending = [run for run in runs if _needs_training(*run, need_model)]
    if jobs > 1 and len(pending) > 1:
        _in_parallel(jobs, [[sys.executable, __file__, "train-one", variant, repr(lr), str(seed)]
                            for variant, lr, seed in pending])
    return {run: _train_one(*run, need_model) for run in runs}


def chosen_rate(variant: str, jobs: int = 1) -> float:
    """Train the grid of ``variant`` (seed 0), extending it at an edge (DESIGN.md), and return the chosen rate."""
    rates = list(plan.GRID)
    while True:
        records = _train_many([(variant, lr, 0) for lr in rates], need_model=False, jobs=jobs)
        choice = plan.choose({lr: records[(variant, lr, 0)]["validation_loss"] for lr in rates})
        extension = plan.extension(rates, choice)
        if extension is None:
            return choice
        rates.append(extension)


def train(variants: tuple[str, ...] = plan.VARIANTS, jobs: int = 1) -> None:
    for variant in variants:
        rate = chosen_rate(variant, jobs)
        print(f"{variant}: chosen rate {rate:g}", flush=True)
        _train_many([(variant, rate, seed) for seed in plan.SEEDS], need_model=True, jobs=jobs)


def _prune_command(model: Path, dest: Path, arguments: list[str]) -> list[str] | None:
    """The ``layerscale prune`` call that writes ``dest``, or None when it is already there."""
    if (dest / "config.json").is_file() and (dest / "pruning_report" / "criteria.json").is_file():
        return None  # the model folder is renamed into place first, the report written after it: both mean done
    heldout = WORK / "corpus" / "heldout.txt"
    return [sys.executable, "-m", "layerscale", "prune", str(model), "--out", str(dest), "--data-path", str(heldout),
            "--seq-len", str(plan.PRUNE_SEQ_LEN), "--samples", str(plan.SAMPLES), "--bootstrap",
            str(plan.BOOTSTRAP), "--force", *arguments]


def _prune_all(calls: list[list[str] | None], jobs: int) -> None:
    # one intra-op thread per call: two calls side by side on two cores with a thread pool each oversubscribe the
    # cores and run many times slower (DESIGN.md, addendum of 06:29 UTC)
    _in_parallel(jobs, [call for call in calls if call is not None], env={**os.environ, "OMP_NUM_THREADS": "1"})


def prune(variants: tuple[str, ...] = plan.VARIANTS, jobs: int = 1) -> None:
    """First every final model's unhealed curves, then the healing calls, so that a stop leaves whole curves for
    every model rather than the healing of one."""
    models = []
    for variant in variants:
        rate = chosen_rate(variant, jobs)
        _train_many([(variant, rate, seed) for seed in plan.SEEDS], need_model=True, jobs=jobs)
        models += [(variant, _run_dir(variant, rate, seed) / "model",
                    WORK / "prune" / plan.run_name(variant, rate, seed)) for seed in plan.SEEDS]
    _prune_all([_prune_command(model, base / "curves", ["--by", ",".join(plan.criteria(variant)), "--remove",
                                                        str(plan.MAX_REMOVED)])
                for variant, model, base in models], jobs)
    healing = []
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
                    healing.append(_prune_command(model, base / f"heal-{mode}-n{n}-{criterion}",
                                                  ["--by", criterion, "--remove", str(n), *plan.heal_arguments(mode)]))
    _prune_all(healing, jobs)


def collect(recorded_variants: tuple[str, ...] = ()) -> None:
    from evidence.llama_prune_report import collect as collect_tables

    collect_tables(WORK, RESULTS, recorded_variants)


def _variants(parser: argparse.ArgumentParser, text: str, flag: str) -> tuple[str, ...]:
    variants = tuple(v for v in text.split(",") if v)
    if not set(variants) <= set(plan.VARIANTS):
        parser.error(f"{flag} takes {', '.join(plan.VARIANTS)}; got {text!r}")
    return variants


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("step", choices=["corpus", "train", "prune", "collect", "all", "train-one"])
    parser.add_argument("run", nargs="*", help="train-one only: VARIANT LR SEED (what --jobs runs in each process)")
    parser.add_argument("--variants", default=",".join(plan.VARIANTS),
                        help="train and prune only these variants (comma-separated; default: both)")
    parser.add_argument("--jobs", type=int, default=1, help="training runs or prune calls at a time (default 1)")
    parser.add_argument("--recorded-variants", default="",
                        help="collect: keep these variants' rows as the committed tables hold them")
    args = parser.parse_args(argv)
    step = args.step
    variants = _variants(parser, args.variants, "--variants")
    recorded = _variants(parser, args.recorded_variants, "--recorded-variants")
    if args.jobs < 1:
        parser.error(f"--jobs takes a positive count; got {args.jobs}")
    if (step == "train-one") != bool(args.run):
        parser.error("VARIANT LR SEED go with train-one, and only with it")
    if step == "train-one":
        if len(args.run) != 3 or args.run[0] not in plan.VARIANTS:
            parser.error(f"train-one takes VARIANT LR SEED with VARIANT in {', '.join(plan.VARIANTS)}; got {args.run}")
        _train_one(args.run[0], float(args.run[1]), int(args.run[2]), need_model=True)
        return 0
    if step in ("corpus", "all") and not (WORK / "corpus" / "corpus.json").is_file():
        corpus()
    if step in ("train", "all"):
        train(variants, args.jobs)
    if step in ("prune", "all"):
        prune(variants, args.jobs)
    if step in ("collect", "all"):
        collect(recorded)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
