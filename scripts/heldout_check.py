#!/usr/bin/env python
"""The held-out check of a redone study's primary verdict (issue 26, item 5; each redo's DESIGN.md addendum of
2026-12-01 11:45 UTC, "Held-out check"): LayerScale against Pre-LN at the study's deepest depth, trained again on
data the study did not use, seeds 0–2, each method at the rate the redo chose for that cell, reported beside the
study's own primary comparison.

    python scripts/heldout_check.py --study depthbench-grid --estimate     # the runs and their time (any time)
    python scripts/heldout_check.py --study depthbench-grid --shard 0/2 & \\
        python scripts/heldout_check.py --study depthbench-grid --shard 1/2   # train (resumable)
    python scripts/heldout_check.py --study depthbench-grid --collect      # runs.csv, then results.csv + results.md
    python scripts/heldout_check.py --study depthbench-grid --report-only  # results.* from check.json + runs.csv

Studies (``--study``): ``depthbench-grid`` (32 blocks, scikit-learn's digits, patch 2), ``fashion-grid`` (depth 48,
digits, patch 2) and ``lm-grid`` (depth 96, the Perl documentation ``/usr/share/perl/5.36/pod/*.pod`` of Debian's
``perl-doc``, which must be installed: ``dpkg-query`` is asked first). What is read from the study folder (never
written):

- ``results.csv`` (:func:`layerscale.study.report.results_table.read_results`): the rate the tuned table chose for the
  compared method and for the reference at the depth (a cell without one is refused: the study has not finished
  it), and the study's comparison row of that cell (difference, interval, Holm p, verdict);
- the recorded ``config.yaml`` of the study's final run of each method at its chosen rate, seed by seed
  (``runs/<run id>/`` or, in a packed study, the member of ``runs.tar.xz``, read without unpacking), and its
  planned step count (``summary.json`` / ``study_status.json``: ``total_steps``).

Each held-out run's config is the study's recorded config of the same method, depth, chosen rate and seed with
only the design's keys changed — the data keys and ``run.patience: 0`` (:func:`heldout_config`) —, its
``run.out_dir`` set to its held-out folder, and under the default budget rule (``steps``) the study's planned step
count kept: ``optim.max_steps`` = the study run's ``total_steps`` and ``optim.epochs`` raised where the held-out
training split is smaller, so that the epochs never cap the steps (the warmup and the cosine schedule then run over
the same steps as the study's). Every other key — model shape, schedule, batch size, the validation and test split
rules — is the study's. The changed keys are printed and recorded in ``check.json``.

Written under ``docs/results/<study>/heldout/``: ``runs/<run id>/`` (git-ignored; a finished run has
``summary.json`` and is kept, a diverged one ``diverged.json``; an unfinished one resumes from its latest checkpoint
when its recorded config is the design's, and is removed and trained from its start otherwise; one that another live
process trains is left to it), and, committed,
``check.json`` (the study's choice and row, the changed keys, the budget, the held-out data; a text corpus also by
its file count, bytes and SHA-256), ``runs.csv`` (``--collect``), ``results.csv`` and ``results.md`` (generated
from ``check.json`` and ``runs.csv`` alone, byte-identically, by :mod:`evidence.heldout_report`, which also
writes the check's block of docs/RESULTS.md). The held-out comparison is one pre-registered comparison: its verdict
uses its raw p-value, with no multiplicity adjustment.

**Equal rates** (issue 60; each redo's DESIGN.md addendum of 2026-12-06, before any of these runs): the
pre-registered comparison runs each method at its own chosen rate, so a difference may be partly the rate's. The
named designs also run both methods at the reference's chosen rate and both at the compared method's
(``check.json``: ``equal_rates``), each from the study's recorded config of that method at that rate (a grid study
holds every rate's runs). Only the runs the pre-registered comparison does not already have are new; where both
methods chose the same rate there are none. A run whose folder is absent (run folders are not committed) but whose
row in the committed ``runs.csv`` has ended is kept as that record and not trained again. The report puts the
equal-rate comparisons beside the pre-registered one (:func:`evidence.heldout_report.equal_rate_comparisons`).
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import sys
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))  # this checkout's code, whatever is installed
sys.path.insert(0, str(ROOT))  # the evidence pipelines (evidence/, not part of the installed package)

from layerscale.study.run.executors.cli_args import shard  # noqa: E402
from evidence.heldout_report import CHECK_FILE, RUN_FIELDS, read_runs, write_report  # noqa: E402
from layerscale.train.config.config_file import dotted_items  # noqa: E402

SEEDS = (0, 1, 2)
BUDGET_RULES = ("steps", "epochs")
# Every held-out run trains the study's planned steps without early stopping (the DESIGN.md addenda of 2026-12-01
# 17:10 UTC): on digits the trainer evaluates at each epoch's end (every 20 steps), where patience 3 would end
# runs on the noise of 143 validation images.
NO_EARLY_STOP = {"run.patience": 0}
DIGITS = {"data.name": "digits", "data.path": None, "model.patch_size": 2,  # 8x8 at patch 2: 16 tokens, as 28/7
          **NO_EARLY_STOP}
DESIGNS = {
    "depthbench-grid": {"study": "docs/results/depthbench-grid", "depth": 32, "data": DIGITS, "equal_rates": True,
                        "addendum": "docs/results/depthbench/DESIGN.md, addenda of 2026-12-01 11:45 and 17:10 UTC"},
    "fashion-grid": {"study": "docs/results/fashion-grid", "depth": 48, "data": DIGITS, "equal_rates": True,
                     "addendum": "docs/results/fashion/DESIGN.md, addenda of 2026-12-01 11:45 and 17:10 UTC"},
    # perl-doc must be installed: without it the pattern can still match a lone perldiag.pod (it does here: one
    # file of 300,178 bytes), which would silently become the held-out corpus
    "lm-grid": {"study": "docs/results/lm-grid", "depth": 96,
                "data": {"data.path": "/usr/share/perl/5.36/pod/*.pod", **NO_EARLY_STOP},
                "package": "perl-doc", "equal_rates": True,
                "addendum": "docs/results/lm/DESIGN.md, addenda of 2026-12-01 11:45 and 17:10 UTC"},
}
#: the study's comparison columns copied into check.json (results.csv of ``layerscale study``)
STUDY_ROW_FIELDS = ("lr", "params", "runs", "diverged", "metric", "test_mean", "test_ci_low", "test_ci_high", "test_n",
                    "test_truncated", "test_per_seed", "diff_mean", "diff_ci_low", "diff_ci_high", "diff_n",
                    "diff_truncated", "diff_per_seed", "family", "p_raw", "p_adj", "adjustment", "verdict",
                    "verdict_unadjusted", "bootstrap_low", "bootstrap_high")


class Refusal(ValueError):
    """A check that cannot run (yet): one line for the user, exit status 2."""


@dataclass
class Design:
    """What is run: the study folder, the compared method and the reference at ``depth``, the data keys the design
    changes (dotted ``section.key`` → value), the seeds, the budget rule (``steps``: the study's planned optimizer
    steps; ``epochs``: the study's ``optim`` keys unchanged) and the output folder (``runs/`` inside it)."""

    name: str
    study: Path
    depth: int
    data: dict
    addendum: str = ""
    method: str = "layerscale"
    reference: str = "prenorm"
    seeds: tuple = SEEDS
    budget: str = "steps"
    out: Path | None = None
    package: str | None = None  # the Debian package the held-out data comes from (must be installed)
    equal_rates: bool = False  # also both methods at each one's chosen rate (issue 60)

    def __post_init__(self):
        self.study = Path(self.study)
        if not self.study.is_absolute():
            self.study = ROOT / self.study
        self.out = self.study / "heldout" if self.out is None else Path(self.out)
        if self.budget not in BUDGET_RULES:
            raise Refusal(f"budget {self.budget!r}: expected one of {', '.join(BUDGET_RULES)}")
        if not self.data or any(key.count(".") != 1 for key in self.data):
            raise Refusal(f"data changes {self.data!r}: expected section.key names (data.name, model.patch_size)")
        if self.method == self.reference:
            raise Refusal(f"method and reference are both {self.method!r}")

    @classmethod
    def named(cls, name: str) -> Design:
        return cls(name=name, **DESIGNS[name])

    @classmethod
    def from_file(cls, path: str | Path) -> Design:
        """A design from a JSON file (``study``, ``depth``, ``data``, and optionally ``name``, ``addendum``,
        ``method``, ``reference``, ``seeds``, ``budget``, ``out``): for tests and dry runs; relative paths are taken
        from the file's folder."""
        path = Path(path)
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise Refusal(f"--design {path}: not a readable JSON design ({exc})") from None
        base = path.resolve().parent
        unknown = sorted(set(raw) - {"name", "study", "depth", "data", "addendum", "method", "reference", "seeds",
                                     "budget", "out", "package", "equal_rates"})
        if unknown:
            raise Refusal(f"--design {path}: unknown key {unknown[0]!r}")
        return cls(name=raw.get("name", path.stem), study=base / raw["study"], depth=int(raw["depth"]),
                   data=dict(raw["data"]), addendum=raw.get("addendum", ""),
                   method=raw.get("method", "layerscale"), reference=raw.get("reference", "prenorm"),
                   seeds=tuple(int(s) for s in raw.get("seeds", SEEDS)), budget=raw.get("budget", "steps"),
                   out=(base / raw["out"]) if "out" in raw else None, package=raw.get("package"),
                   equal_rates=bool(raw.get("equal_rates", False)))

    @property
    def methods(self) -> tuple[str, str]:
        """The reference first, then the compared method."""
        return (self.reference, self.method)

    def run_dir(self, method: str, lr: float, seed: int) -> Path:
        return self.out / "runs" / run_name(method, self.depth, lr, seed)


def run_name(method: str, depth: int, lr: float, seed: int) -> str:
    """The study's run id (:attr:`layerscale.study.design.grid.RunSpec.run_id`), also the held-out run's folder name."""
    from layerscale.study.design.grid import format_lr

    return f"{method}-d{depth}-lr{format_lr(lr)}-s{seed}"


def shown_path(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (what committed files record)."""
    try:
        return Path(path).resolve().relative_to(ROOT).as_posix()
    except ValueError:
        return str(path)


# --- the study's choice -----------------------------------------------------------------------------------------

def study_choice(design: Design) -> dict:
    """From the study's ``results.csv``: the chosen rate of both methods at the depth (the tuned table's rows) and
    the compared method's comparison row. :class:`Refusal` when a rate is not chosen yet or a row is missing."""
    from layerscale.study.report.results_table import read_results

    path = design.study / "results.csv"
    rows = {(r.method, r.depth): r for r in read_results(path) if r.table == "tuned"}
    found = {}
    for method in design.methods:
        row = rows.get((method, design.depth))
        if row is None:
            raise Refusal(f"{shown_path(path)}: no tuned row for {method} at depth {design.depth}; the study has "
                          f"no such cell")
        if row.lr is None:
            raise Refusal(f"{shown_path(path)}: the rate of {method} at depth {design.depth} is not chosen yet (the "
                          f"tuned table's lr is empty): the study has not finished that cell; run the held-out check "
                          f"after it")
        found[method] = row
    compared = found[design.method]
    if compared.interval("diff") is None:
        raise Refusal(f"{shown_path(path)}: {design.method} at depth {design.depth} has a rate but no difference "
                      f"against {design.reference} yet")
    return {"rates": {m: found[m].lr for m in design.methods},
            "study_row": {k: compared[k] for k in STUDY_ROW_FIELDS},
            "reference_row": {k: found[design.reference][k] for k in ("lr", "params", "test_mean", "test_ci_low",
                                                                      "test_ci_high", "test_n", "test_per_seed")}}


def read_recorded(study: Path, names: list[str]) -> dict[str, bytes | None]:
    """The bytes of each ``runs/<name>`` of the study (``None`` when absent): from the ``runs/`` folder when it
    exists, else from ``runs.tar.xz`` without unpacking it (regular-file members only)."""
    from layerscale.study.run.archive import ARCHIVE_FILE

    runs, archive = study / "runs", study / ARCHIVE_FILE
    if runs.is_dir():
        return {n: (runs / n).read_bytes() if (runs / n).is_file() else None for n in names}
    if not archive.is_file():
        raise Refusal(f"{shown_path(study)}: neither runs/ nor {ARCHIVE_FILE}; the study's run records are needed")
    wanted = {f"runs/{n}": n for n in names}
    found: dict[str, bytes | None] = dict.fromkeys(names)
    try:
        with tarfile.open(archive, mode="r:xz") as tar:
            for member in tar:
                name = wanted.get(PurePosixPath(member.name).as_posix())
                if name is not None and member.isfile():
                    found[name] = tar.extractfile(member).read()
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise Refusal(f"{shown_path(archive)}: not a readable runs archive ({exc})") from None
    return found


def parse_config(text: bytes, where: str) -> dict:
    """A recorded ``config.yaml`` read by the project's loader (:func:`load_config_file`: safe YAML only)."""
    from layerscale.train.config.config_file import load_config_file

    with tempfile.TemporaryDirectory(prefix="heldout-config-") as tmp:
        path = Path(tmp) / "config.yaml"
        path.write_bytes(text)
        try:
            return load_config_file(path)
        except ValueError as exc:
            raise Refusal(f"{where}: {str(exc).replace(str(path), 'config.yaml')}") from None


def _planned_steps(summary: bytes | None, status: bytes | None) -> int | None:
    for text in (summary, status):
        if text is not None:
            value = json.loads(text).get("total_steps")
            if value is not None:
                return int(value)
    return None


def study_runs(design: Design, wanted: list[tuple[str, float, int]]) -> tuple[dict, int | None]:
    """The study's recorded config of every (method, rate, seed) in ``wanted``, and the planned step count they share
    (``None`` when no run records one). :class:`Refusal` for a missing config or disagreeing budgets."""
    ids = {(m, lr, s): run_name(m, design.depth, lr, s) for m, lr, s in wanted}
    names = [f"{rid}/{f}" for rid in ids.values() for f in ("config.yaml", "summary.json", "study_status.json")]
    files = read_recorded(design.study, names)
    configs, budgets = {}, {}
    for key, rid in ids.items():
        text = files[f"{rid}/config.yaml"]
        if text is None:
            raise Refusal(f"{shown_path(design.study)}: no recorded config.yaml of run {rid} (the study's final run "
                          f"of {key[0]} at rate {key[1]:g}, seed {key[2]})")
        configs[key] = parse_config(text, f"{shown_path(design.study)} run {rid}")
        steps = _planned_steps(files[f"{rid}/summary.json"], files[f"{rid}/study_status.json"])
        if steps is not None:
            budgets[rid] = steps
    if len(set(budgets.values())) > 1:
        raise Refusal(f"{shown_path(design.study)}: the runs of the cell plan different step counts "
                      f"({', '.join(f'{k}: {v}' for k, v in sorted(budgets.items()))})")
    return configs, next(iter(budgets.values()), None)


# --- the held-out configs --------------------------------------------------------------------------------------------

def changed_keys(before: dict, after: dict, skip: tuple = ("run.out_dir",)) -> list[dict]:
    """``{"key", "study", "heldout"}`` for every key whose value differs (sorted; ``skip`` left out)."""
    b, a = dotted_items(before), dotted_items(after)
    return [{"key": k, "study": b.get(k), "heldout": a.get(k)} for k in sorted(set(a) | set(b))
            if k not in skip and b.get(k, "<absent>") != a.get(k, "<absent>")]


def heldout_config(study_raw: dict, data: dict, seed: int, out: str | Path, *, budget_steps: int | None = None,
                   steps_per_epoch: int | None = None) -> dict:
    """The held-out run's config: ``study_raw`` (the study's recorded config) with the design's ``data`` keys
    (``section.key`` → value), ``run.seed``, ``run.out_dir`` and ``run.progress: none``; with ``budget_steps``
    (the study's planned steps) ``optim.max_steps`` set to it and ``optim.epochs`` raised to
    ``ceil(budget_steps / steps_per_epoch)`` when the study's epochs would end the run sooner."""
    raw = copy.deepcopy(study_raw)
    for key, value in data.items():
        section, name = key.split(".")
        raw.setdefault(section, {})[name] = value
    raw["run"]["seed"] = int(seed)
    raw["run"]["out_dir"] = str(out)
    raw["run"]["progress"] = "none"
    if budget_steps is not None:
        if not steps_per_epoch:
            raise Refusal(f"the held-out training split holds less than one batch of {raw['data']['batch_size']}")
        raw["optim"]["max_steps"] = int(budget_steps)
        raw["optim"]["epochs"] = max(int(raw["optim"]["epochs"]), math.ceil(budget_steps / steps_per_epoch))
    return raw


def _data_label(raw: dict) -> str:
    data = raw["data"]
    return f"{data['name']} ({data['path']})" if data.get("path") else str(data["name"])


def _validated(raw: dict):
    from layerscale.train.config.schema import TrainConfig

    return TrainConfig.from_dict(raw)


def require_package(package: str | None) -> None:
    """:class:`Refusal` unless the Debian package ``package`` is installed (``dpkg-query``)."""
    import subprocess

    if package is None:
        return
    try:
        status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True,
                                check=False).stdout
    except OSError:
        raise Refusal(f"the held-out data comes from the Debian package {package}, and dpkg-query is not available "
                      "to check that it is installed") from None
    if "install ok installed" not in status:
        raise Refusal(f"the held-out data comes from the Debian package {package}, which is not installed: "
                      f"apt-get install {package}")


def corpus_record(path: str) -> dict:
    """A text corpus exactly: the files it joins (``read_text_bytes``'s order), its bytes and their SHA-256."""
    import hashlib

    from layerscale.data.text import read_text_bytes

    folder = Path(path)
    if folder.is_dir():
        files = [p for p in folder.rglob("*") if p.is_file()
                 and not any(part.startswith(".") for part in p.relative_to(folder).parts)]
    elif folder.is_file():
        files = [folder]
    else:
        files = [p for p in Path(folder.anchor or ".").glob(str(folder.relative_to(folder.anchor))
                                                            if folder.is_absolute() else str(folder)) if p.is_file()]
    data = read_text_bytes(path)
    return {"files": len(files), "bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}


def _load(raw: dict):
    """The validated config ``raw`` and its (held-out) data."""
    from layerscale.train.setup.data_setup import load_train_data

    config = _validated(raw)
    return config, load_train_data(config)


def _parameters(raw: dict, data) -> int:
    """The parameter count of ``raw``'s model on ``data`` (built on the meta device, as the trainer builds it)."""
    from layerscale.study.design.shapes import count_parameters

    config = _validated(raw)
    return count_parameters(config.model.name, {**data.model_args, **config.model.options})


def prepare(design: Design, *, write: bool = True) -> tuple[dict, dict]:
    """The check's record (``check.json``: the study's choice and row, the changed keys, the budget, the held-out
    data) and every held-out run's config, keyed ``(method, seed)``. Writes ``check.json`` when ``write``."""
    from layerscale.study.report.results import Metric
    from layerscale.train.loop.budget import planned_total_steps, steps_per_epoch

    choice = study_choice(design)
    equal = equal_rates(design, choice["rates"])
    studied, budget = study_runs(design, units(design, choice["rates"], equal))
    first = studied[(design.reference, choice["rates"][design.reference], design.seeds[0])]
    if all(dotted_items(first).get(k, "<absent>") == v for k, v in design.data.items()):
        raise Refusal(f"the design's data keys {design.data} are the study's own: nothing would be held out")
    if design.budget == "steps" and budget is None:
        raise Refusal(f"{shown_path(design.study)}: no run of the cell records its planned steps (summary.json or "
                      "study_status.json: total_steps), which the budget rule 'steps' keeps")
    require_package(design.package)
    probe = heldout_config(first, design.data, design.seeds[0], design.out / "probe")
    config, data = _load(probe)
    corpus = corpus_record(config.data.path) if data.kind == "text" else None
    per_epoch = steps_per_epoch(len(data.train), config.data.batch_size)
    configs, changes, params = {}, None, {}
    for (method, lr, seed), raw in studied.items():
        run_dir = design.run_dir(method, lr, seed)
        held = heldout_config(raw, design.data, seed, run_dir,
                              budget_steps=budget if design.budget == "steps" else None, steps_per_epoch=per_epoch)
        diff = changed_keys(raw, held)
        if changes is None:
            changes = diff
        elif diff != changes:
            raise Refusal(f"{shown_path(design.study)}: the study's configs of the cell differ beyond method, rate "
                          f"and seed ({run_name(method, design.depth, lr, seed)})")
        configs[(method, lr, seed)] = held
        params.setdefault(method, _parameters(held, data))
    chosen_first = (design.reference, choice["rates"][design.reference], design.seeds[0])
    planned = planned_total_steps(_validated(configs[chosen_first]).optim, per_epoch)
    metric = Metric.for_language_model(data.kind == "text")
    check = {"study": design.name, "study_folder": shown_path(design.study), "addendum": design.addendum,
             "method": design.method, "reference": design.reference, "depth": design.depth,
             "seeds": list(design.seeds), "classification": metric.classification, "metric": metric.name,
             "rates": choice["rates"], "study_row": choice["study_row"], "reference_row": choice["reference_row"],
             "study_data": _data_label(first), "heldout_data": _data_label(configs[chosen_first]),
             "data_description": data.description, "corpus": corpus, "design_keys": design.data, "changes": changes,
             "budget": {"rule": design.budget, "study_steps": budget, "steps_per_epoch": per_epoch,
                        "heldout_steps": planned},
             "params": {m: params[m] for m in design.methods},
             # only in the equal-rate design, so that a check written before it reads back byte-identically
             **({"equal_rates": equal} if design.equal_rates else {})}
    if write:
        design.out.mkdir(parents=True, exist_ok=True)
        from layerscale.atomic_io import write_text_atomic

        text = json.dumps(check, indent=1, sort_keys=True) + "\n"
        path = design.out / CHECK_FILE
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            write_text_atomic(path, text)
    return check, configs


def describe_changes(check: dict) -> list[str]:
    lines = [f"{c['key']}: {c['study']!r} -> {c['heldout']!r}" for c in check["changes"]]
    return lines + ["run.out_dir: the held-out run folder"]


# --- training ------------------------------------------------------------------------------------------------------

def equal_rates(design: Design, rates: dict) -> list[float]:
    """The rates both methods run at in the equal-rate design (each method's chosen rate, once each); ``[]``
    without it."""
    return sorted(set(rates.values())) if design.equal_rates else []


def units(design: Design, rates: dict, equal: list[float] = ()) -> list[tuple[str, float, int]]:
    """Every held-out run as (method, rate, seed): the pre-registered comparison seed by seed (the reference, then
    the compared method, each at its chosen rate), then the equal-rate runs it does not already have."""
    out = [(method, rates[method], seed) for seed in design.seeds for method in design.methods]
    for lr in equal:
        out += [(method, lr, seed) for seed in design.seeds for method in design.methods
                if (method, lr, seed) not in out]
    return out


def recorded_rows(design: Design) -> dict[tuple[str, float, int], dict]:
    """The committed ``runs.csv`` rows of the check that have ended, keyed (method, rate, seed): the record of a run
    whose folder is not on this machine (run folders are not committed)."""
    path = design.out / "runs.csv"
    if not path.is_file():
        return {}
    return {(r["method"], r["lr"], r["seed"]): r for r in read_runs(path) if r["status"] != "pending"}


def train_unit(design: Design, raw: dict, method: str, lr: float, seed: int) -> None:
    """One held-out run (:func:`layerscale.study.run.retrain.train_or_resume`): a finished or diverged run is kept, an
    unfinished one resumes from its latest checkpoint when its recorded config is ``raw`` (bitwise the uninterrupted
    run) and is trained again from its start otherwise."""
    from layerscale.study.run.retrain import outcome_text, train_or_resume
    from layerscale.train.state.run_lock import RunDirectoryInUse

    run_dir = design.run_dir(method, lr, seed)
    started = time.time()
    try:
        outcome = train_or_resume(run_dir, raw)
    except RunDirectoryInUse:
        return  # another live process trains it
    said = outcome_text(outcome, time.time() - started)
    if said is not None:
        print(f"{run_dir.name}: {said}", flush=True)


# --- collect (the report: evidence.heldout_report) ----------------------------------------------------------

def run_rows(design: Design, check: dict) -> list[dict]:
    """One row per held-out run (pending ones included): status, last validation and test metric, seconds, steps;
    a run whose folder is absent keeps its committed row when that row has ended (:func:`recorded_rows`)."""
    from layerscale.study.run.retrain import run_outcome

    recorded = recorded_rows(design)
    rows = []
    for method, lr, seed in units(design, check["rates"], check.get("equal_rates") or []):
        run_dir = design.run_dir(method, lr, seed)
        if not run_dir.exists() and (method, lr, seed) in recorded:
            rows.append(recorded[(method, lr, seed)])
            continue
        outcome = run_outcome(run_dir, check["classification"])
        train_s = outcome["train_s"]
        rows.append({"method": method, "lr": lr, "seed": seed, "status": outcome["status"], "val": outcome["val"],
                     "test": outcome["test"], "train_s": None if train_s is None else round(train_s, 1),
                     "steps": outcome["steps"]})
    return rows


def collect(design: Design) -> None:
    """check.json from the study as it is now, runs.csv from the run folders."""
    from layerscale.atomic_io import write_text_atomic
    from layerscale.study.run.csv_rows import csv_text

    check, _ = prepare(design)
    rows = run_rows(design, check)
    write_text_atomic(design.out / "runs.csv", csv_text(rows, RUN_FIELDS))
    ended = sum(r["status"] != "pending" for r in rows)
    print(f"collected {ended} of {len(rows)} held-out runs ended")


# --- estimate and main ---------------------------------------------------------------------------------------------

def estimate(design: Design) -> str:
    """The runs, and their time from the study's own runs of the cell (runs.csv ``wall_time_s``): the held-out
    runs have the study's shapes and steps. Works before the study has chosen its rates (it says so)."""
    lines = [f"{design.name}: {design.method} vs {design.reference} at depth {design.depth}, seeds "
             f"{', '.join(str(s) for s in design.seeds)}"
             + (", each method at its chosen rate and both at each one's (equal rates)" if design.equal_rates else "")
             + f" into {shown_path(design.out)}/runs",
             f"data keys changed: {', '.join(f'{k}={v!r}' for k, v in design.data.items())}; budget rule: "
             f"{design.budget}"]
    try:
        rates = study_choice(design)["rates"]
    except (Refusal, ValueError) as exc:
        rates = None
        lines.append(f"not ready: {exc}")
    seconds = []
    from layerscale.study.run.csv_rows import read_rows

    todo = units(design, rates, equal_rates(design, rates)) if rates else None
    if todo is not None:
        recorded = recorded_rows(design)
        new = [u for u in todo if u not in recorded and not (design.run_dir(*u) / "summary.json").is_file()]
        lines.append(f"{len(todo)} runs: {len(todo) - len(new)} already ended (their folders or the committed "
                     f"runs.csv), {len(new)} to train: "
                     + (", ".join(run_name(m, design.depth, lr, s) for m, lr, s in new) or "none"))
    wanted = {(m, lr) for m, lr, _ in todo} if todo else None
    for r in read_rows(design.study / "runs.csv"):
        if (r["kind"] == "final" and r["method"] in design.methods and int(r["depth"]) == design.depth
                and r["status"] == "finished" and r["wall_time_s"]
                and (wanted is None or (r["method"], float(r["lr"])) in wanted)):
            seconds.append(float(r["wall_time_s"]))
    count = len(new) if todo is not None else len(design.seeds) * len(design.methods)
    if seconds:
        each = sum(seconds) / len(seconds)
        lines.append(f"the study's finished runs of the cell{'' if rates else ' (any rate)'}: {each / 60:.1f} min "
                     f"each on average ({len(seconds)} runs): about {each * count / 3600:.1f} CPU-hours for the "
                     f"{count} run(s) to train (held-out runs on another dataset can take longer or shorter; the "
                     "committed check's own runs.csv, column train_s, gives theirs)")
    else:
        lines.append("no finished run of the cell in the study's runs.csv to time the check by")
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2
        self.exit(2, f"heldout_check: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--study", choices=sorted(DESIGNS), help="the redone study whose primary verdict to check")
    parser.add_argument("--shard", type=shard, default="0/1", help="I/N: train every N-th held-out run from the I-th")
    parser.add_argument("--collect", action="store_true", help="runs.csv from the run folders, then the report")
    parser.add_argument("--report-only", action="store_true", help="results.csv and results.md from the records")
    parser.add_argument("--estimate", action="store_true", help="list the runs and their time; train nothing")
    parser.add_argument("--design", default=None, help=argparse.SUPPRESS)  # a JSON design (tests)
    args = parser.parse_args(argv)
    if (args.study is None) == (args.design is None):
        parser.error("give --study NAME (one of " + ", ".join(sorted(DESIGNS)) + ")")
    index, count = args.shard
    try:
        design = Design.from_file(args.design) if args.design else Design.named(args.study)
        if args.estimate:
            print(estimate(design))
            return 0
        if args.report_only:
            write_report(design.out)
            return 0
        if args.collect:
            collect(design)
            write_report(design.out)
            return 0
        check, configs = prepare(design)
        print(f"{design.name}: rates {', '.join(f'{m} {lr:g}' for m, lr in check['rates'].items())}"
              + (f"; equal rates {', '.join(f'{lr:g}' for lr in check['equal_rates'])}" if design.equal_rates
                 else "") + f"; changed keys: {'; '.join(describe_changes(check))}", flush=True)
        recorded = recorded_rows(design)
        for method, lr, seed in units(design, check["rates"], check.get("equal_rates") or [])[index::count]:
            if not design.run_dir(method, lr, seed).exists() and (method, lr, seed) in recorded:
                continue  # ended on another machine: its committed row is its record
            train_unit(design, configs[(method, lr, seed)], method, lr, seed)
    except (ValueError, FileNotFoundError, ImportError) as exc:  # Refusal is a ValueError
        from layerscale.messages import one_line

        print(f"heldout_check: error: {one_line(exc)}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
