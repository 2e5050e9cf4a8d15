#!/usr/bin/env python
"""Growing a trained model deeper: the runs of docs/results/grow/DESIGN.md (issue 29).

    python scripts/grow_evidence.py --estimate                                        # the runs, per source and arm
    python scripts/grow_evidence.py --shard 0/2 & python scripts/grow_evidence.py --shard 1/2   # train + analyse
    python scripts/grow_evidence.py --collect        # the per-run records into the committed CSVs + results.md
    python scripts/grow_evidence.py --report-only    # results.csv and results.md from runs.csv, sources.csv and
                                                     # effective_depth.csv alone

Per source (``runs/<source>/``, git-ignored, resumable):

- ``source/``: the committed run retrained from its recorded config (:func:`layerscale.study.run.retrain.retrain_run`);
- ``grown/``: ``layerscale grow source --insert L --where every:1 --init copy --gamma 0`` (a model folder);
- ``source.json``: the committed and retrained test metrics, and the source's and the grown model's loss and
  accuracy on the whole test split before any training (the identity check);
- ``<arm>-lr<rate>-s<seed>/``: one training run of an arm (a: continue the source; b: grown, train all; c: grown,
  ``optim.trainable=new_blocks``; d: the grown shape from scratch for source steps + E), its config the source's
  recorded config with only the design's keys changed (:func:`arm_config`); ``diverged.json`` when it diverged;
- ``depth/<name>.json``: ``D_δ`` with its bootstrap interval (``layerscale.analysis.analyze_run``, its defaults,
  at most 2,000 test examples) of the source and of every final model at its arm's chosen rate.

A finished run (``summary.json``) or a diverged one is kept; an unfinished one (a process ended mid-run) resumes
from its latest checkpoint when its recorded config is the design's, and is removed and trained from its start
otherwise. Every record is written to a temporary file and renamed into place. Shards share the
sources: the first shard that needs one trains and grows it under a file lock, the others wait for it. A run folder
(its lock, :mod:`layerscale.train.state.run_lock`) or an analysis (``depth/<name>.lock``) that another live process
holds is left to it, so any number of processes may work through one shard's list: ``--shard 0/1`` twice is a shared
queue. Running a shard again after every training run has ended completes the effective-depth analyses (they need
every cell's rate chosen). Committed (``--collect``): ``sources.csv``, ``runs.csv`` (the test metric only for the chosen
rates: the design reads the other rates' test splits but never reports them), ``effective_depth.csv``,
``results.csv`` and ``results.md`` (:mod:`evidence.grow_report`).
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import io
import json
import math
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the evidence pipelines (evidence/, not part of the installed package)
OUT = ROOT / "docs" / "results" / "grow"
SOURCES = (
    {"key": "fashion", "study": "docs/results/fashion", "run_id": "layerscale-d12-lr0.001-s0"},
    {"key": "lm", "study": "docs/results/lm", "run_id": "layerscale-d24-lr0.001-s0"},
)
ARMS = ("a", "b", "c", "d")
RATES = (3e-4, 1e-3, 3e-3)
SEEDS = (0, 1, 2)
EXAMPLES = 2000           # at most this many test examples for the effective depth
WARMUP_FRACTION = 0.05    # of each arm's own budget
GROWN_ARMS = ("b", "c")


@dataclass
class Design:
    """What is run: the sources (``key``, ``study`` folder, ``run_id``), the rates and seeds of every arm, the work
    and output folder (``runs/`` inside it), and the effective depth's test examples."""

    out: Path = OUT
    sources: tuple = SOURCES
    rates: tuple = RATES
    seeds: tuple = SEEDS
    examples: int = EXAMPLES
    arms: tuple = field(default=ARMS)

    @classmethod
    def from_file(cls, path: str | Path) -> Design:
        """A design from a JSON file (``out``, ``sources``, ``rates``, ``seeds``, ``examples``): for tests and dry
        runs; relative paths are taken from the file's folder."""
        path = Path(path)
        raw = json.loads(path.read_text(encoding="utf-8"))
        base = path.resolve().parent
        return cls(out=(base / raw["out"]), sources=tuple(raw["sources"]),
                   rates=tuple(float(r) for r in raw.get("rates", RATES)),
                   seeds=tuple(int(s) for s in raw.get("seeds", SEEDS)), examples=int(raw.get("examples", EXAMPLES)))

    def study(self, source: dict) -> Path:
        path = Path(source["study"])
        return path if path.is_absolute() else ROOT / path

    def folder(self, key: str) -> Path:
        return self.out / "runs" / key


def run_name(arm: str, lr: float, seed: int) -> str:
    return f"{arm}-lr{lr:g}-s{seed}"


def units(design: Design) -> list[dict]:
    """Every training run of the arms, seed by seed, so that every shard's share (every N-th run) mixes sources,
    arms and rates."""
    return [{"source": s["key"], "arm": arm, "lr": lr, "seed": seed}
            for seed in design.seeds for s in design.sources for arm in design.arms for lr in design.rates]


# --- the arms' configs --------------------------------------------------------------------------------------------

def warmup_steps(steps: int) -> int:
    """5 % of a budget, rounded half up, at least one step."""
    return max(1, math.floor(WARMUP_FRACTION * steps + 0.5))


def arm_config(source_raw: dict, arm: str, lr: float, seed: int, *, source_steps: int, source_dir: str | Path,
               grown_dir: str | Path, out: str | Path) -> dict:
    """The config of one run of ``arm``: the source's recorded config with only what the design changes.

    Every arm: ``optim.max_steps`` (E = ``source_steps``; (d): ``source_steps + E``), ``optim.warmup_steps`` (5 %
    of that), ``optim.lr``, ``run.seed`` (the data order of the extra training; (d): also its initial weights),
    ``run.out_dir``, ``run.progress`` and ``run.patience`` (0: no early stopping, so every arm trains exactly its
budget); ``optim.epochs`` grows by the factor (d)'s longer budget needs, so the
    epochs never cap ``max_steps``. (a): ``run.init_from`` the source run. (b): ``run.init_from`` the grown model
    folder and ``model.depth`` twice the source's. (c): (b) and ``optim.trainable: new_blocks``. (d):
    ``model.depth`` twice the source's, random initial weights."""
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; expected one of {ARMS}")
    raw = copy.deepcopy(source_raw)
    steps = source_steps * (2 if arm == "d" else 1)
    factor = math.ceil(steps / source_steps)
    raw["optim"]["epochs"] = int(raw["optim"]["epochs"]) * factor
    raw["optim"]["max_steps"] = steps
    raw["optim"]["warmup_steps"] = warmup_steps(steps)
    raw["optim"]["lr"] = float(lr)
    raw["run"]["seed"] = int(seed)
    raw["run"]["out_dir"] = str(out)
    raw["run"]["progress"] = "none"
    raw["run"]["patience"] = 0  # every arm gets exactly its budget (DESIGN.md addendum of 14:30 UTC)
    depth = int(raw["model"]["depth"])
    if arm == "a":
        raw["run"]["init_from"] = str(source_dir)
    if arm in GROWN_ARMS:
        raw["run"]["init_from"] = str(grown_dir)
        raw["model"]["depth"] = 2 * depth
    if arm == "c":
        raw["optim"]["trainable"] = "new_blocks"
    if arm == "d":
        raw["model"]["depth"] = 2 * depth
    return raw


# --- records --------------------------------------------------------------------------------------------------------

def _write_json(path: Path, payload) -> None:
    from layerscale.atomic_io import write_text_atomic

    write_text_atomic(path, json.dumps(payload, indent=1))


# --- sources ----------------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def _locked(path: Path, wait: bool = True):
    """Hold ``path``'s ``flock`` for the block, yielding ``True``; without ``wait``, yield ``False`` at once (and
    hold nothing) while another live process holds it. The kernel releases it when its holder dies."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _grow(source_dir: Path, grown_dir: Path, depth: int) -> None:
    """``layerscale grow SOURCE --insert L --where every:1 --init copy --gamma 0 --out GROWN`` (written into a
    temporary folder, renamed into place)."""
    from layerscale.surgery.growth import grow_cli

    tmp = grown_dir.with_name(grown_dir.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    parser = argparse.ArgumentParser()
    grow_cli.add_arguments(parser)
    args = parser.parse_args([str(source_dir), "--insert", str(depth), "--where", "every:1", "--init", "copy",
                              "--gamma", "0", "--out", str(tmp)])
    with contextlib.redirect_stdout(io.StringIO()):
        grow_cli.run(args)
    tmp.replace(grown_dir)


def _identity_check(source_dir: Path, grown_dir: Path) -> dict:
    """The source's and the grown model's mean loss and accuracy on the whole test split, before any training."""
    from layerscale.analysis.eval_data.evaluation import as_eval_set
    from layerscale.analysis.source import load_run_model
    from layerscale.surgery.model_files import read_source_model
    from layerscale.surgery.pruning.prune_eval import evaluate
    from layerscale.train.config.schema import TrainConfig
    from layerscale.train.config.config_file import load_config_file
    from layerscale.train.setup.data_setup import load_train_data

    data = load_train_data(TrainConfig.from_dict(load_config_file(source_dir / "config.yaml")))
    test = as_eval_set(data.eval)
    source = evaluate(load_run_model(source_dir, train_data=data).model, test)
    grown = evaluate(read_source_model(grown_dir).model, test)
    return with_identity({"examples": len(test.targets), "source_loss": source.loss,
                          "source_accuracy": source.accuracy, "grown_loss": grown.loss,
                          "grown_accuracy": grown.accuracy})


#: the grown model counts as the source's function when its test accuracy is the same and its mean test loss within
#: this relative rounding: the same blocks see bitwise the same inputs, but a CPU's kernels can round a last bit
#: differently in a different allocation pattern (measured 2026-12-01 on the Fashion source: at most 9.5e-7 on
#: one batch's logits, 7e-10 nats on the test loss; with a forward hook on every block, bitwise equal)
IDENTITY_RTOL = 1e-6


def with_identity(record: dict) -> dict:
    """``record`` with ``loss_difference`` (grown − source, nats) and ``identical`` (see :data:`IDENTITY_RTOL`)."""
    source_loss, grown_loss = float(record["source_loss"]), float(record["grown_loss"])
    difference = grown_loss - source_loss
    same = (float(record["source_accuracy"]) == float(record["grown_accuracy"])
            and abs(difference) <= IDENTITY_RTOL * abs(source_loss))
    return {**record, "loss_difference": difference, "identical": same}


def ensure_source(design: Design, source: dict) -> dict:
    """Train (retrain), grow and check one source once, under a lock shared by the shards; returns its record."""
    from layerscale.study.run.retrain import committed_metric, retrain_run, retrained_metric, run_outcome

    folder = design.folder(source["key"])
    record_path = folder / "source.json"
    with _locked(folder.parent / f"{source['key']}.lock"):
        if record_path.is_file():
            return json.loads(record_path.read_text(encoding="utf-8"))
        study = design.study(source)
        source_dir = folder / "source"
        started = time.time()
        retrain_run(study, source["run_id"], source_dir)
        print(f"{source['key']}: source trained ({time.time() - started:.0f} s)", flush=True)
        raw = _load_config(source_dir)
        classification = raw["model"]["name"] != "gpt"
        grown_dir = folder / "grown"
        if not (grown_dir / "config.json").is_file():
            _grow(source_dir, grown_dir, int(raw["model"]["depth"]))
        check = _identity_check(source_dir, grown_dir)
        outcome = run_outcome(source_dir, classification)
        record = {"source": source["key"], "study": source["study"], "run_id": source["run_id"],
                  "classification": classification, "depth": int(raw["model"]["depth"]),
                  "lr": float(raw["optim"]["lr"]), "seed": int(raw["run"]["seed"]),
                  "steps": outcome["steps"], "train_s": outcome["train_s"], "val": outcome["val"],
                  "committed_test": committed_metric(study, source["run_id"]),
                  "retrained_test": retrained_metric(source_dir, classification), **check}
        _write_json(record_path, record)
        print(f"{source['key']}: grown; identical before training: {check['identical']}", flush=True)
        return record


def _load_config(run_dir: Path) -> dict:
    from layerscale.train.config.config_file import load_config_file

    return load_config_file(run_dir / "config.yaml")


# --- training runs ---------------------------------------------------------------------------------------------------

def train_unit(design: Design, unit: dict) -> None:
    """One run of an arm (:func:`layerscale.study.run.retrain.train_or_resume`): a finished or diverged run is kept, an
    unfinished one resumes from its latest checkpoint when it has one for the same config, and is trained again from
    its start otherwise."""
    from layerscale.study.run.retrain import committed_config, has_ended, outcome_text, train_or_resume
    from layerscale.train.state.run_lock import RunDirectoryInUse

    source = next(s for s in design.sources if s["key"] == unit["source"])
    folder = design.folder(source["key"])
    run_dir = folder / run_name(unit["arm"], unit["lr"], unit["seed"])
    if has_ended(run_dir):
        return  # before ensure_source: a kept run needs no source
    record = ensure_source(design, source)
    raw = arm_config(committed_config(design.study(source), source["run_id"]), unit["arm"], unit["lr"],
                     unit["seed"], source_steps=int(record["steps"]), source_dir=folder / "source",
                     grown_dir=folder / "grown", out=run_dir)
    started = time.time()
    try:
        outcome = train_or_resume(run_dir, raw)
    except RunDirectoryInUse:
        return  # another live process trains it
    said = outcome_text(outcome, time.time() - started)
    if said is not None:
        print(f"{source['key']}/{run_dir.name}: {said}", flush=True)


# --- rate choice and effective depth -----------------------------------------------------------------------------------

def arm_rows(design: Design, source: dict, classification: bool) -> list[dict]:
    """One row per run of the source's arms (pending runs included)."""
    from layerscale.study.run.retrain import run_outcome

    folder = design.folder(source["key"])
    rows = []
    for arm in design.arms:
        for lr in design.rates:
            for seed in design.seeds:
                outcome = run_outcome(folder / run_name(arm, lr, seed), classification)
                rows.append({"source": source["key"], "arm": arm, "lr": lr, "seed": seed, **outcome})
    return rows


def depth_units(design: Design) -> list[tuple[str, str, Path]]:
    """``(source, name, run directory)`` of every model whose effective depth the design reports and that exists
    now: each source, and every finished run at its arm's chosen rate (once all of the arm's runs have ended)."""
    from evidence.grow_analysis import chosen_rates

    found = []
    for source in design.sources:
        folder = design.folder(source["key"])
        record_path = folder / "source.json"
        if not record_path.is_file():
            continue
        record = json.loads(record_path.read_text(encoding="utf-8"))
        found.append((source["key"], "source", folder / "source"))
        rows = arm_rows(design, source, record["classification"])
        for (key, arm), choice in sorted(chosen_rates(rows, record["classification"]).items()):
            for row in rows:
                if row["arm"] == arm and row["lr"] == choice.lr and row["status"] == "finished":
                    found.append((key, run_name(arm, row["lr"], row["seed"]), folder / run_name(arm, row["lr"],
                                                                                             row["seed"])))
    return found


def analyse(design: Design, key: str, name: str, run_dir: Path) -> None:
    """``D_δ`` of one model (the analysis defaults, at most ``design.examples`` test examples), kept once written."""
    import torch

    from layerscale.analysis import analyze_run, effective_depth_interval

    path = design.folder(key) / "depth" / f"{name}.json"
    if path.is_file():
        return
    with _locked(path.with_suffix(".lock"), wait=False) as mine:
        if not mine or path.is_file():
            return  # another live process analyses it, or did while this one looked
        torch.set_num_threads(1)
        started = time.process_time()
        result = analyze_run(run_dir, max_examples=design.examples)
        depth, low, high = effective_depth_interval(result)
        s = result.summary
        _write_json(path, {"source": key, "model": name, "depth": s.depth, "effective_depth": depth, "low": low,
                           "high": high, "tolerance": s.tolerance, "level": s.level,
                           "examples": result.num_examples, "clean_loss": result.clean_loss,
                           "cpu_s": time.process_time() - started})
    print(f"{key}/{name}: effective depth {depth} [{low:g}, {high:g}]", flush=True)


def trained_elsewhere(design: Design) -> bool:
    """Whether another live process holds the folder of a run that has not ended (it is training it)."""
    from layerscale.study.run.retrain import has_ended
    from layerscale.train.state.run_lock import RunDirectoryInUse, hold_run_dir

    for unit in units(design):
        run_dir = design.folder(unit["source"]) / run_name(unit["arm"], unit["lr"], unit["seed"])
        if run_dir.is_dir() and not has_ended(run_dir):
            try:
                with hold_run_dir(run_dir):
                    pass
            except RunDirectoryInUse:
                return True
    return False


def analyse_all(design: Design, wait_s: float = 30.0) -> None:
    """Every effective depth there is to compute, shared with other processes (one lock per analysis): a model
    becomes analysable once all runs of its arm have ended, so while another process still trains one, this one
    waits (``wait_s`` between looks) and takes what that run makes analysable; it returns when nothing is left."""
    looked: set[tuple[str, str]] = set()
    while True:
        fresh = [unit for unit in depth_units(design) if unit[:2] not in looked]
        for key, name, run_dir in fresh:
            looked.add((key, name))
            analyse(design, key, name, run_dir)
        if not fresh:
            if not trained_elsewhere(design):
                return
            time.sleep(wait_s)


# --- collect ------------------------------------------------------------------------------------------------------------

def write_csv(path: Path, rows: list[dict], fields: list[str]) -> None:
    from layerscale.atomic_io import write_text_atomic
    from layerscale.study.run.csv_rows import csv_text

    write_text_atomic(path, csv_text(rows, fields))


SOURCE_FIELDS = ["source", "study", "run_id", "classification", "depth", "lr", "seed", "steps", "train_s", "val",
                 "committed_test", "retrained_test", "examples", "source_loss", "source_accuracy", "grown_loss",
                 "grown_accuracy", "loss_difference", "identical"]
RUN_FIELDS = ["source", "arm", "lr", "seed", "status", "val", "test", "train_s", "steps"]
DEPTH_FIELDS = ["source", "model", "arm", "lr", "seed", "depth", "effective_depth", "low", "high", "tolerance",
                "examples", "clean_loss", "cpu_s"]


def collect(design: Design) -> None:
    """The per-run records into sources.csv, runs.csv and effective_depth.csv (test metrics of the chosen rates
    only)."""
    from evidence.grow_analysis import chosen_rates

    sources, runs, depths = [], [], []
    for source in design.sources:
        folder = design.folder(source["key"])
        if not (folder / "source.json").is_file():
            continue
        record = with_identity(json.loads((folder / "source.json").read_text(encoding="utf-8")))
        sources.append(record)
        rows = arm_rows(design, source, record["classification"])
        chosen = chosen_rates(rows, record["classification"])
        for row in rows:
            choice = chosen.get((row["source"], row["arm"]))
            if choice is None or row["lr"] != choice.lr:
                row["test"] = None  # read by the run, never reported (DESIGN.md: only for the chosen rate)
            row["train_s"] = None if row["train_s"] is None else round(row["train_s"], 1)
        runs += rows
        for path in sorted((folder / "depth").glob("*.json")):
            d = json.loads(path.read_text(encoding="utf-8"))
            arm, lr, seed = _parse_name(d["model"])
            depths.append({"source": source["key"], "model": d["model"], "arm": arm, "lr": lr, "seed": seed,
                           "depth": d["depth"], "effective_depth": d["effective_depth"], "low": d["low"],
                           "high": d["high"], "tolerance": d["tolerance"], "examples": d["examples"],
                           "clean_loss": d["clean_loss"], "cpu_s": round(d["cpu_s"], 1)})
    design.out.mkdir(parents=True, exist_ok=True)
    write_csv(design.out / "sources.csv", sources, SOURCE_FIELDS)
    write_csv(design.out / "runs.csv", runs, RUN_FIELDS)
    write_csv(design.out / "effective_depth.csv", depths, DEPTH_FIELDS)
    finished = sum(r["status"] != "pending" for r in runs)
    print(f"collected {len(sources)} sources, {finished} of {len(runs)} runs ended, {len(depths)} effective depths")


def _parse_name(name: str) -> tuple[str, float | None, int | None]:
    if name == "source":
        return "source", None, None
    arm, lr, seed = name.split("-")
    return arm, float(lr[2:]), int(seed[1:])


# --- main ---------------------------------------------------------------------------------------------------------------

def estimate(design: Design) -> str:
    lines = [f"{len(design.sources)} sources (retrained once each, then grown), and per source:"]
    for arm in design.arms:
        lines.append(f"  arm {arm}: {len(design.rates)} rates x {len(design.seeds)} seeds = "
                     f"{len(design.rates) * len(design.seeds)} runs")
    total = len(design.sources) * (1 + len(design.arms) * len(design.rates) * len(design.seeds))
    lines.append(f"{total} runs in all (DESIGN.md planned about 7 CPU-hours; --estimate measures), plus D_δ of "
                 f"{len(design.sources) * (1 + len(design.arms) * len(design.seeds))} models")
    return "\n".join(lines)


def progress(design: Design) -> str:
    """Per source and arm: the runs ended, their mean training seconds, and the CPU time the pending ones will take
    at that mean (an arm with none ended yet: unknown)."""
    lines, remaining, unknown, waiting = [], 0.0, 0, 0
    for source in design.sources:
        record_path = design.folder(source["key"]) / "source.json"
        if not record_path.is_file():
            lines.append(f"{source['key']}: source not trained yet")
            continue
        classification = json.loads(record_path.read_text(encoding="utf-8"))["classification"]
        rows = arm_rows(design, source, classification)
        for arm in design.arms:
            mine = [r for r in rows if r["arm"] == arm]
            ended = [r for r in mine if r["status"] != "pending"]
            seconds = [r["train_s"] for r in ended if r["train_s"] is not None]
            pending = len(mine) - len(ended)
            waiting += pending
            mean = sum(seconds) / len(seconds) if seconds else None
            if pending and mean is None:
                unknown += pending
            elif pending:
                remaining += pending * mean
            lines.append(f"{source['key']} arm {arm}: {len(ended)} of {len(mine)} ended"
                         + (f", {mean:.0f} s each on average" if mean is not None else ""))
    lines.append(f"pending: {waiting} runs, about {remaining / 3600:.1f} CPU-hours at those means"
                 + (f", and {unknown} runs of arms with none ended yet" if unknown else "")
                 + ", plus the effective-depth analyses")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from layerscale.study.run.executors.cli_args import shard

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     epilog=estimate(Design()), formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shard", type=shard, default="0/1",
                        help="I/N: train every N-th run from the I-th (default 0/1), then that share of the "
                             "effective-depth analyses")
    parser.add_argument("--collect", action="store_true", help="gather the records into the CSVs, then report")
    parser.add_argument("--report-only", action="store_true", help="results.csv and results.md from the CSVs")
    parser.add_argument("--estimate", action="store_true", help="list the runs per source and arm")
    parser.add_argument("--design", default=None, help=argparse.SUPPRESS)  # a JSON design (tests)
    args = parser.parse_args(argv)
    design = Design.from_file(args.design) if args.design else Design()
    from evidence.grow_report import write_report

    if args.estimate:
        print(estimate(design))
        print(progress(design))
        return 0
    if args.report_only:
        write_report(design.out)
        return 0
    if args.collect:
        collect(design)
        write_report(design.out)
        return 0
    index, count = args.shard
    for source in design.sources[index::count]:  # the sources first, one shard each where there are enough
        ensure_source(design, source)
    for unit in units(design)[index::count]:
        train_unit(design, unit)
    analyse_all(design)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
