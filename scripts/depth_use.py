#!/usr/bin/env python
"""Depth use and pruning of the Fashion-MNIST study's final models (docs/results/depth-use/DESIGN.md).

    python scripts/depth_use.py --shard 0/2 & python scripts/depth_use.py --shard 1/2   # train, analyse, prune
    python scripts/depth_use.py --collect        # gather the per-model records into the committed CSVs + report
    python scripts/depth_use.py --report-only    # results.md from the committed CSVs alone

Per model (``runs/<run id>/``, git-ignored, resumable stage by stage): ``train/`` (the study's final run retrained
from its committed config, :mod:`layerscale.study.run.retrain`), ``effective_depth.json`` (``D_δ`` with its bootstrap
interval at each δ of the design), ``pruning.json`` (Pre-LN and LayerScale models: test loss / accuracy after
removing the n lowest-scoring blocks per criterion, blocks scored on the validation split, and after healing).
Committed: ``models.csv``, ``effective_depth.csv``, ``pruning.csv`` and ``results.md``
(:mod:`evidence.depth_use_report`).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, whatever is installed
sys.path.insert(0, str(ROOT))  # the evidence pipelines (evidence/, not part of the installed package)
STUDY = ROOT / "docs" / "results" / "fashion"
OUT = ROOT / "docs" / "results" / "depth-use"
DEPTH = 12
METHODS = ("prenorm", "postnorm", "layerscale", "layerscale_head", "rezero", "deepnorm", "lns", "dyt")
SEEDS = (0, 1, 2)
EXAMPLES = 2000
DELTAS = (0.01, 0.05, 0.2)
PRIMARY_DELTA = 0.05
PRUNED_METHODS = ("prenorm", "layerscale")
CRITERIA = ("angular", "block_influence", "ablation", "gamma")
HEAL_STEPS = 169
HEAL_GRID = (1, 2, 3, 4, 6, 8)


def design_models() -> list[dict]:
    """The 24 models: every method at depth 12 at the rate its tuning chose, seeds 0–2."""
    tuning = json.loads((STUDY / "tuning.json").read_text())
    chosen = {(c["method"], c["depth"]): c["chosen_lr"] for c in tuning["cells"]}
    models = []
    for method in METHODS:
        lr = chosen[(method, DEPTH)]
        for seed in SEEDS:
            models.append({"run_id": f"{method}-d{DEPTH}-lr{lr:g}-s{seed}", "method": method, "lr": lr, "seed": seed})
    return models


def _write_json(path: Path, payload) -> None:
    from layerscale.atomic_io import write_text_atomic

    write_text_atomic(path, json.dumps(payload, indent=1))


def _eval_sets(train_dir: Path):
    from layerscale.analysis.eval_data.evaluation import as_eval_set
    from layerscale.analysis.source import load_run_model
    from layerscale.train.config.schema import TrainConfig
    from layerscale.train.config.config_file import load_config_file
    from layerscale.train.setup.data_setup import load_train_data

    data = load_train_data(TrainConfig.from_dict(load_config_file(train_dir / "config.yaml")))
    run = load_run_model(train_dir, train_data=data)
    return run.model, as_eval_set(data.eval, EXAMPLES), as_eval_set(data.validation, EXAMPLES)


def _effective_depth(model, test) -> list[dict]:
    from layerscale.analysis import analyze_depth

    rows = []
    for delta, spans in [(d, "angular") for d in DELTAS] + [(PRIMARY_DELTA, "exhaustive")]:
        started = time.process_time()
        result = analyze_depth(model, test, max_examples=EXAMPLES, tolerance=delta, spans=spans,
                               probes=(delta == PRIMARY_DELTA and spans == "angular"), seed=0)
        s = result.summary
        rows.append({"delta": delta, "spans": spans, "effective_depth": s.effective_depth,
                     "low": s.effective_depth_interval[0], "high": s.effective_depth_interval[1],
                     "shares": {str(k): v for k, v in s.effective_depth_shares.items()},
                     "removed_span": s.removed_span, "loss": result.clean_loss, "accuracy": result.clean_accuracy,
                     "probe_saturation_depth": s.probe_saturation_depth, "cpu_s": time.process_time() - started})
    return rows


def _pruning(model, method: str, train_dir: Path, test, validation, done: dict) -> dict:
    from layerscale.surgery.model_files import read_source_model
    from layerscale.surgery.pruning.prune import block_scores, blocks_to_remove, prune
    from layerscale.surgery.pruning.prune_eval import evaluate, removal_curve
    from layerscale.surgery.healing.prune_heal import heal_pruned

    source = read_source_model(train_dir)
    path = train_dir.parent / "pruning.json"

    def row(criterion, n, blocks, healed, metric, started):
        return {"criterion": criterion, "removed": n, "blocks": blocks, "healed": healed, "loss": metric.loss,
                "accuracy": metric.accuracy, "cpu_s": time.process_time() - started}

    if "control" not in done:
        started = time.process_time()
        control = copy.deepcopy(model)
        heal_pruned(control, source, HEAL_STEPS, quiet=True)
        done["control"] = [row("none", 0, [], True, evaluate(control, test), started)]
        _write_json(path, done)
    for criterion in CRITERIA:
        if criterion in done or (criterion == "gamma" and method != "layerscale"):
            continue
        started = time.process_time()
        scores = block_scores(model, validation, criterion)
        rows = [row(criterion, n, removed, False, metric, started)
                for n, removed, metric in removal_curve(model, scores, DEPTH - 1, test)]
        for n in HEAL_GRID:
            started = time.process_time()
            removed = blocks_to_remove(scores, n)
            pruned = prune(model, removed)
            heal_pruned(pruned, source, HEAL_STEPS, quiet=True)
            rows.append(row(criterion, n, removed, True, evaluate(pruned, test), started))
        done[criterion] = {"scores": scores, "rows": rows}
        _write_json(path, done)
    return done


def process(model: dict) -> None:
    import torch

    from layerscale.study.run.retrain import retrain_run

    torch.set_num_threads(1)
    folder = OUT / "runs" / model["run_id"]
    train_dir = folder / "train"
    started = time.time()
    retrain_run(STUDY, model["run_id"], train_dir)
    print(f"{model['run_id']}: trained ({time.time() - started:.0f} s)", flush=True)
    net, test, validation = _eval_sets(train_dir)
    if not (folder / "effective_depth.json").is_file():
        _write_json(folder / "effective_depth.json", _effective_depth(net, test))
        print(f"{model['run_id']}: analysed", flush=True)
    if model["method"] in PRUNED_METHODS:
        path = folder / "pruning.json"
        done = json.loads(path.read_text()) if path.is_file() else {}
        _pruning(net, model["method"], train_dir, test, validation, done)
        print(f"{model['run_id']}: pruned", flush=True)


def _write_csv(path: Path, rows: list[dict]) -> None:
    from layerscale.atomic_io import write_text_atomic
    from layerscale.study.run.csv_rows import csv_text

    write_text_atomic(path, csv_text(rows, list(rows[0])))


def collect() -> None:
    """The per-model records (those that are finished) into models.csv, effective_depth.csv and pruning.csv."""
    from layerscale.study.run.retrain import committed_metric, is_finished, retrained_metric, training_seconds

    models, depths, pruning = [], [], []
    for model in design_models():
        folder = OUT / "runs" / model["run_id"]
        if not is_finished(folder / "train"):
            continue
        models.append({**model, "committed_test": committed_metric(STUDY, model["run_id"]),
                       "retrained_test": retrained_metric(folder / "train", classification=True),
                       "train_s": training_seconds(folder / "train")})
        if (folder / "effective_depth.json").is_file():
            for r in json.loads((folder / "effective_depth.json").read_text()):
                depths.append({"run_id": model["run_id"], "method": model["method"], "seed": model["seed"],
                               "delta": r["delta"], "spans": r["spans"], "effective_depth": r["effective_depth"],
                               "low": r["low"], "high": r["high"], "removed_span": json.dumps(r["removed_span"]),
                               "loss": r["loss"], "accuracy": r["accuracy"],
                               "probe_saturation_depth": r["probe_saturation_depth"], "cpu_s": round(r["cpu_s"], 1)})
        if (folder / "pruning.json").is_file():
            done = json.loads((folder / "pruning.json").read_text())
            rows = list(done.get("control", []))
            for criterion in CRITERIA:
                rows += done.get(criterion, {}).get("rows", [])
            for r in rows:
                pruning.append({"run_id": model["run_id"], "method": model["method"], "seed": model["seed"],
                                "criterion": r["criterion"], "removed": r["removed"], "healed": r["healed"],
                                "blocks": " ".join(str(b) for b in r["blocks"]), "loss": r["loss"],
                                "accuracy": r["accuracy"], "cpu_s": round(r["cpu_s"], 1)})
    for name, rows in (("models.csv", models), ("effective_depth.csv", depths), ("pruning.csv", pruning)):
        if rows:
            _write_csv(OUT / name, rows)
    print(f"collected {len(models)} models, {len(depths)} effective-depth rows, {len(pruning)} pruning rows")


def main(argv: list[str] | None = None) -> int:
    from layerscale.study.run.executors.cli_args import shard

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shard", type=shard, default="0/1",
                        help="I/N: process every N-th model from the I-th (default 0/1)")
    parser.add_argument("--collect", action="store_true", help="gather finished models into the CSVs, then report")
    parser.add_argument("--report-only", action="store_true", help="results.md from the committed CSVs")
    args = parser.parse_args(argv)
    from evidence.depth_use_report import write_report

    if args.report_only:
        write_report(OUT)
        return 0
    if args.collect:
        collect()
        write_report(OUT)
        return 0
    index, count = args.shard
    models = design_models()
    # the pruned models carry most of the work: deal them out first so the shards stay even
    models.sort(key=lambda m: (m["method"] not in PRUNED_METHODS, m["seed"], m["method"]))
    for model in models[index::count]:
        process(model)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
