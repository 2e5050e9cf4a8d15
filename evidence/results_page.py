"""docs/RESULTS.md's numbers, generated from the committed studies' tables so that the page cannot drift from them.

The page is hand-written prose (designs, limits, what changed) with generated blocks between markers::

    <!-- generated: NAME -->
    ... replaced by :func:`render_block` ...
    <!-- end generated: NAME -->

:func:`render_page` rewrites every block from ``docs/results/<study>/results.csv`` (and ``study.json`` for the
grid and reference, ``runs.csv`` for the compute), printing every interval with
:func:`layerscale.study.report.formatting.format_interval` at the study's precision (1 decimal for accuracy in points, 3
for bits per byte) and every p-value with :func:`~layerscale.study.report.formatting.format_p`. ``python
scripts/results_page.py`` rewrites the page; ``--check`` says whether it is current.

Blocks (``<study>`` is ``fashion``, ``lm`` or ``depthbench``):

- ``glance``: the primary families' Holm-adjusted verdicts only (rows with ``family = primary``, and the
  depth-use, grow and confirmatory evidence's primary families once their runs have ended);
- ``<study>-primary``: the primary family's table (difference, raw and Holm-adjusted p, verdict);
- ``<study>-comparisons``: every other comparison against the reference, both tables (exploratory, BH-adjusted);
- ``<study>-rates``: the rate each cell chose; for a study tuned by the full-budget grid (``tuning: grid``), the
  ties, the extensions and the cells still at an edge, from its ``tuning.json``; for one tuned by successive
  halving, the cells at an edge of the grid with the full-budget validation score at that rate against the shared
  rate's (the final runs of both tables, 3 seeds each);
- ``<study>-redo``: what the redo changed — each primary comparison of the redo beside the same comparison of the
  version it replaced (:data:`ORIGINALS`), both read from their own tables;
- ``<study>-depth-use``: the depth-use interaction table and one sentence per method citing it (never "significant
  here, not there");
- ``depthbench-depth-gain``: each method against itself at the shallower depth (labelled with where the design
  says so: added after the original study's runs, named exploratory in the redo's design);
- ``<study>-stability``: the study's stability tables from its ``stability.csv`` (learning-rate window, seed spread and
  its ratio to the reference with the stability family's verdicts, divergences, loss spikes;
  :mod:`layerscale.study.report.stability_table`), printed by the same function as its ``results.md``;
- ``<study>-compute``: runs and training hours from ``runs.csv``;
- ``<study>-original-<block>``: a block above of the version a redo replaced (:data:`ORIGINALS`);
- ``<study>-heldout``: the held-out check of one primary verdict, from ``heldout/`` in the study's folder
  (:func:`evidence.heldout_report.heldout_sections`; a line saying it has not run before it has);
- ``corrections``: the two language-model intervals the previous page rounded by hand, at the two decimals it used;
- ``depth-use``: the depth-use and pruning evidence of the Fashion study's depth-12 models
  (docs/results/depth-use, :func:`evidence.depth_use_report.depth_use_sections`);
- ``grow``: growing a trained model deeper against training it on (docs/results/grow,
  :func:`evidence.grow_report.grow_sections`);
- ``llama-prune``: pruning a real-vocabulary Llama by each criterion, unhealed and healed (docs/results/llama-prune,
  :func:`evidence.llama_prune_report.llama_prune_sections`);
- ``attnres-beside-hc`` and ``attnres-<block>`` (``comparisons``, ``rates``, ``depth-use``, ``stability``,
  ``compute``, ...): the exploratory AttnRes sweep (docs/results/depthbench-attnres,
  :mod:`evidence.attnres_section`), its methods beside the redo's Hyper-Connections;
- ``confirm``: the confirmatory study on fresh seeds, each redo primary verdict beside its confirmation, and its
  stability family (docs/results/confirm, :func:`evidence.confirm_sections.confirm_sections`; one line saying it
  has not been reported before all its runs have ended, and no glance line).
"""

from __future__ import annotations

import csv
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from layerscale.atomic_io import write_text_atomic
from . import attnres_section, confirm_sections, depth_use_report, grow_report, heldout_report, llama_prune_report
from layerscale.study.report.formatting import format_interval, format_p
from layerscale.study.report.results import Metric
from layerscale.study.report.results_table import ResultRow, read_results

__all__ = ["STUDIES", "FOLDERS", "ORIGINALS", "SWEEP", "Study", "comparison_cell", "load_study", "render_block",
           "render_page", "main"]

#: the committed studies, in page order, with the names the page gives them
STUDIES = {"fashion": "Fashion-MNIST depth study", "lm": "Byte-level language model",
           "depthbench": "DepthBench-style shape sweep (fixed parameter budget)"}
#: each study's folder under docs/results (a redo's folder once it is complete and replaces the study on the page)
FOLDERS = {"fashion": "fashion-grid", "lm": "lm-grid", "depthbench": "depthbench-grid"}
#: the exploratory AttnRes sweep beside the DepthBench redo (issue 58): its blocks are ``attnres-<block>``, read
#: only where the page has one (:func:`_sweep_block`), so the page can be generated while its runs are pending
SWEEP = "attnres"
#: the folder of the version a redo replaced: the ``<study>-redo`` block compares the two
ORIGINALS = {"fashion": "fashion", "lm": "lm", "depthbench": "depthbench"}
#: the evidence folders under docs/results with a block of their own: block name -> (folder, sections, glance)
EVIDENCE = {"depth-use": ("depth-use", depth_use_report.depth_use_sections, depth_use_report.primary_glance),
            "grow": ("grow", grow_report.grow_sections, grow_report.primary_glance),
            "llama-prune": ("llama-prune", llama_prune_report.llama_prune_sections,
                            llama_prune_report.primary_glance),
            "confirm": ("confirm", confirm_sections.confirm_sections, confirm_sections.primary_glance)}
_BLOCK = re.compile(r"(<!-- generated: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end generated: (?P=name) -->)",
                    re.DOTALL)


@dataclass(frozen=True)
class Study:
    """One committed study as the page reads it."""

    key: str
    rows: list[ResultRow]
    design: dict
    runs: list[dict]
    folder: Path | None = None  # where its tables are (and its held-out check, in heldout/)
    tuning: dict | None = None  # its tuning.json: how each cell's rate was chosen

    @property
    def classification(self) -> bool:
        return self.rows[0]["metric"].startswith("test accuracy")

    @property
    def digits(self) -> int:
        return Metric.for_language_model(not self.classification).digits

    @property
    def unit(self) -> str:
        return Metric.for_language_model(not self.classification).difference_unit

    @property
    def reference(self) -> str:
        return self.design.get("reference") or self.design["methods"][0]

    @property
    def depth_word(self) -> str:
        return "blocks" if self.design.get("shapes") else "depth"

    def at(self, depth: int) -> str:
        return f"{depth} blocks" if self.design.get("shapes") else f"depth {depth}"

    def table(self, name: str) -> list[ResultRow]:
        return [r for r in self.rows if r.table == name]

    def cell(self, table: str, method: str, depth: int) -> ResultRow | None:
        return next((r for r in self.table(table) if r.method == method and r.depth == depth), None)

    def interval(self, row: ResultRow, name: str = "diff", digits: int | None = None) -> str:
        return format_interval(row.interval(name), self.digits if digits is None else digits,
                               signed=name in ("diff",))


def _run_key(row: dict) -> tuple[str, int, float]:
    return row["method"], int(row["depth"]), float(row["lr"])


def extension_pending_runs(tuning: dict | None) -> set[tuple[str, int, float]]:
    """(method, depth, rate) of every grid extension ``tuning.json`` records as pending (issue 60: a cell whose best
    mean is at an edge adds a rate before the tie rule chooses). Their runs are the only pending ones the page
    accepts: the rest of the study is complete, and each such cell reads its provisional rate, flagged as such."""
    cells = (tuning or {}).get("cells") or []
    return {(c["method"], int(c["depth"]), float(lr)) for c in cells for lr in c.get("extension_pending") or []}


def load_study(results_dir: str | os.PathLike, key: str, folder: str | None = None) -> Study:
    """The study ``key`` from ``results_dir/folder`` (default: its folder in :data:`FOLDERS`); ``ValueError`` for
    a study with runs still pending (the page quotes no number of a partial study)."""
    folder = Path(results_dir) / (folder or FOLDERS.get(key, key))
    design = json.loads((folder / "study.json").read_text(encoding="utf-8"))
    with (folder / "runs.csv").open(encoding="utf-8", newline="") as f:
        runs = list(csv.DictReader(f))
    tuning_path = folder / "tuning.json"
    tuning = json.loads(tuning_path.read_text(encoding="utf-8")) if tuning_path.is_file() else None
    waiting = extension_pending_runs(tuning)
    pending = sum(r["status"] == "pending" and _run_key(r) not in waiting for r in runs)
    if pending:
        raise ValueError(f"{folder} has {pending} run(s) pending: docs/RESULTS.md quotes only complete studies")
    return Study(key, read_results(folder / "results.csv"), design, runs, folder, tuning)


# ---- blocks -------------------------------------------------------------------------------------------------

def _adjusted(row: ResultRow) -> str:
    name = {"primary": "Holm", "exploratory": "BH"}.get(row.family, "")
    return f"{name}-adjusted p {format_p(row.p())}" if name else "no p-value"


def _label(study: Study, row: ResultRow) -> str:
    if row.table == "interaction":
        return f"{row.method} depth use {row.depth_from} → {row.depth} (against {study.reference})"
    return f"{row.method} at {study.at(row.depth)}"


def _primary_rows(study: Study) -> list[ResultRow]:
    return [r for r in study.rows if r.family == "primary"]


def _glance(studies: dict[str, Study], results_dir: str | os.PathLike) -> list[str]:
    lines = []
    for key, study in studies.items():
        rows = _primary_rows(study)
        parts = [f"{_label(study, r)} {study.interval(r)} {study.unit}: **{r.verdict}** "
                 f"(Holm-adjusted p {format_p(r.p())})" for r in rows]
        lines.append(f"- {STUDIES[key]}, against {study.reference} at each method's tuned rate, primary family of "
                     f"{len(rows)} comparison(s): " + "; ".join(parts) + ".")
    for folder, _, glance in EVIDENCE.values():
        line = glance(Path(results_dir) / folder)
        lines += [line] if line else []
    return lines


def _primary(study: Study) -> list[str]:
    """The primary family's table; with the design's two-level bootstrap (``bootstrap`` draws), its interval too."""
    boot = bool(study.design.get("bootstrap"))
    lines = ["| comparison | difference [95 % CI] | " + ("two-level bootstrap 95 % | " if boot else "")
             + "p | Holm p | verdict |", "|---|---:|" + ("---:|" if boot else "") + "---:|---:|---|"]
    for r in _primary_rows(study):
        bootstrap = ""
        if boot:
            low, high = r["bootstrap_low"], r["bootstrap_high"]
            bootstrap = (f"[{float(low):+.{study.digits}f}, {float(high):+.{study.digits}f}] | " if low and high
                         else "— | ")
        lines.append(f"| {_label(study, r)} | {study.interval(r)} | {bootstrap}{format_p(r.p('p_raw'))} | "
                     f"{format_p(r.p())} | {r.verdict} |")
    return lines


def _depths(study: Study) -> list[int]:
    return list(study.design["depths"])


def _wide(study: Study, header: str, rows: list[str], cell: Callable[[str, int], str]) -> list[str]:
    depths = _depths(study)
    lines = [f"| {header} | " + " | ".join(study.at(d) for d in depths) + " |", "|---|" + "---:|" * len(depths)]
    for method in rows:
        lines.append(f"| {method} | " + " | ".join(cell(method, d) for d in depths) + " |")
    return lines


def _comparisons(study: Study) -> list[str]:
    methods = [m for m in study.design["methods"] if m != study.reference]
    lines = []
    for table, title in (("tuned", "each method at its own tuned rate"),
                         ("shared", f"every method at the shared rate {_shared_lr(study):g}"
                                    if _shared_lr(study) else "")):
        if not study.table(table):
            continue

        def cell(method, depth, table=table):
            row = study.cell(table, method, depth)
            return "—" if row is None or row.interval("diff") is None else comparison_cell(study, row)

        twins = any(r["same_runs_as"] for r in study.table(table))
        lines += [f"Difference against {study.reference} in {study.unit}, {title} (paired by seed; verdict by the "
                  "adjusted p shown: Holm for the primary comparisons, marked *, Benjamini–Hochberg for the rest"
                  + ("; = the same runs as the tuned table's row, with its verdict, counted once" if twins else "")
                  + "):", "", *_wide(study, "method", methods, cell), ""]
    return lines[:-1]


def comparison_cell(study: Study, row: ResultRow) -> str:
    """One comparison as the page's tables print it: interval, verdict (``*``: primary, Holm; `` =``: the same runs
    as the tuned table's row) and the adjusted p."""
    mark = "*" if row.family == "primary" else " =" if row["same_runs_as"] else ""
    return f"{study.interval(row)} {row.verdict}{mark} (p {format_p(row.p())})"


def _shared_lr(study: Study) -> float | None:
    lrs = {r.lr for r in study.table("shared")}
    return lrs.pop() if len(lrs) == 1 else None


def _rates(study: Study) -> list[str]:
    grid = sorted(study.design["lrs"])
    lines = [f"Rate each cell chose (grid {', '.join(f'{lr:g}' for lr in grid)}):", ""]
    lines += _wide(study, "method", list(study.design["methods"]),
                   lambda m, d: _chosen_rate(study.cell("tuned", m, d)))
    if study.design.get("tuning") == "grid":
        return lines + ["", *_grid_choice(study)]
    shared = _shared_lr(study)
    edge = [r for r in study.table("tuned") if r.lr in (grid[0], grid[-1]) and r.lr != shared]
    if not edge or shared is None:
        return lines
    better = 0
    table = ["| cell | chosen rate | validation at it | validation at the shared rate | test at it | test at the "
             "shared rate |", "|---|---:|---:|---:|---:|---:|"]
    sign = 1 if study.classification else -1
    for r in edge:
        s = study.cell("shared", r.method, r.depth)
        if s is None or r.interval("val_best") is None or s.interval("val_best") is None:
            continue
        better += sign * (s.interval("val_best").mean - r.interval("val_best").mean) > 0
        table.append(f"| {r.method} at {study.at(r.depth)} | {r.lr:g} | {study.interval(r, 'val_best')} | "
                     f"{study.interval(s, 'val_best')} | {study.interval(r, 'test')} | {study.interval(s, 'test')} |")
    side = "smallest" if all(r.lr == grid[0] for r in edge) else "largest" if all(r.lr == grid[-1] for r in edge) \
        else "smallest or largest"
    compared = len(table) - 2
    lines += ["", f"{len(edge)} cell(s) chose the {side} rate of the grid. Their final runs at that rate and at the "
              f"shared rate {shared:g} both ran the full budget with 3 seeds; the better mean best validation score "
              f"was at the shared rate in {better} of the {compared} and at the edge rate in {compared - better} "
              f"(best {_val_name(study)} during the run, mean over seeds [95 % t-interval]; the test columns are for "
              "reading only, the choice never sees them):", "", *table]
    return lines


def _chosen_rate(row: ResultRow | None) -> str:
    return "—" if row is None or row.lr is None else f"{row.lr:g}"


def _edge_side(cell: dict) -> str:
    """Which edge of the rates that ran holds a cell's best mean (``tuning.json``'s cell)."""
    ran = [lr for lr in cell["rates"] if lr not in (cell.get("extension_pending") or [])]
    return "largest" if cell["best_lr"] == max(ran) else "smallest"


def _grid_choice(study: Study) -> list[str]:
    """How a full-budget grid chose (its ``tuning.json``): the ties and how they were resolved, the cells whose grid
    was extended, and the cells still at the edge of the rates they tried."""
    cells = study.tuning["cells"]
    seeds = ", ".join(str(s) for s in study.tuning["seeds"])
    shared = _shared_lr(study)

    def where(c):
        return f"{c['method']} at {study.at(c['depth'])}"

    ties = [f"{where(c)} ({', '.join(f'{lr:g}' for lr in c['tied_lrs'])}: {c['chosen_lr']:g} taken)"
            for c in cells if len(c["tied_lrs"]) > 1]
    extended = [f"{where(c)} (added {', '.join(f'{lr:g}' for lr in c['extended_with'])}; settled at "
                f"{c['chosen_lr']:g})" for c in cells if c["extended_with"]]
    edge = [f"{where(c)} (best mean at {c['best_lr']:g}, the "
            f"{'largest' if c['best_lr'] == max(c['rates']) else 'smallest'} tried"
            + (f"; the tie rule took {c['chosen_lr']:g}" if c["chosen_lr"] != c["best_lr"] else "") + ")"
            for c in cells if c["best_lr"] is not None and c["best_lr"] in (min(c["rates"]), max(c["rates"]))]
    waiting = [f"{where(c)} (best mean at {c['best_lr']:g}, the {_edge_side(c)} tried; "
               f"{', '.join(f'{lr:g}' for lr in c['extension_pending'])} to run; until then the cell reads the tie "
               f"rule's choice among the rates that ran, {c['chosen_lr']:g})"
               for c in cells if c.get("extension_pending")]
    at_shared = sum(c["chosen_lr"] == shared for c in cells)
    more = " (more in the primary family's cells)" if study.design.get("primary_seeds") else ""
    times = study.design.get("extend_grid") or 0
    extend = (f"a cell whose best mean is at an edge of the grid adds one rate outward (×3 or ÷3) before the tie "
              f"rule chooses, at most {times} time{'s' if times != 1 else ''}." if times
              else "the grid was not extended at its edges.")
    return [f"Every rate of the grid ran the full budget with every seed of the cell (seeds {seeds}{more}); each "
            "cell took the rate with the best mean validation score, rates "
            "within one standard error of the best (paired by seed) counting as a tie, resolved toward the shared "
            f"rate{f' {shared:g}' if shared else ''}; {extend} "
            f"{at_shared} of the {len(cells)} cells chose the shared rate.", "",
            "- Ties: " + ("; ".join(ties) if ties else "none") + ".",
            "- Extended: " + ("; ".join(extended) if extended else "none") + ".",
            *(["- Extension pending (runs not yet trained; the tables keep the rate chosen before it): "
               + "; ".join(waiting) + "."] if waiting else []),
            "- Best mean still at an edge of the rates tried (the best rate may lie beyond them, whatever the tie "
            "rule took): "
            + ("; ".join(edge) if edge else "none") + "."]


def _val_name(study: Study) -> str:
    return "validation accuracy (%)" if study.classification else "validation bits per byte"


def _contrast_table(study: Study, kind: str, methods: list[str]) -> list[str]:
    rows = study.table(kind)
    pairs = list(dict.fromkeys((r.depth_from, r.depth) for r in rows))
    lines = ["| method | " + " | ".join(f"{a} → {b}" for a, b in pairs) + " |", "|---|" + "---:|" * len(pairs)]
    for method in methods:
        by_pair = {(r.depth_from, r.depth): r for r in rows if r.method == method}
        cells = [f"{study.interval(by_pair[p])} {by_pair[p].verdict}" if p in by_pair and
                 by_pair[p].interval("diff") is not None else "—" for p in pairs]
        lines.append(f"| {method} | " + " | ".join(cells) + " |")
    return lines


def _depth_use(study: Study) -> list[str]:
    methods = [m for m in study.design["methods"] if m != study.reference]
    lines = [f"Depth-use interaction: (the method's gain from the shallower to the deeper {study.depth_word}) − "
             f"({study.reference}'s gain), in {study.unit}, each at its tuned rate; Welch intervals (two depths are "
             "two models); verdicts by Benjamini–Hochberg-adjusted p (exploratory) unless the design made one "
             "primary:", "", *_contrast_table(study, "interaction", methods), ""]
    for method in methods:
        rows = [r for r in study.table("interaction") if r.method == method and r.interval("diff") is not None]
        called = [r for r in rows if r.verdict in ("better", "worse")]
        quiet = [f"{r.depth_from} → {r.depth}" for r in rows if r not in called]
        parts = [f"{method} gains {'more' if r.verdict == 'better' else 'less'} from depth than {study.reference} "
                 f"from {r.depth_from} → {r.depth} (interaction {study.interval(r)} {study.unit}, {_adjusted(r)})"
                 for r in called]
        if quiet:
            parts.append(f"{'its' if called else method + chr(39) + 's'} depth gain is within noise of {study.reference}'s "
                         f"from {', '.join(quiet)}")
        if parts:
            lines.append(f"- {'; '.join(parts)}.")
    return lines


def _depth_gain(study: Study) -> list[str]:
    where = ("**Added after the runs** (DESIGN.md addendum of 2026-12-01), not part of the design fixed before them."
             if not study.design.get("primary_declared") else
             "Named exploratory in the design before the runs (DESIGN.md addendum of 2026-12-01 11:45 UTC); the "
             "original study added it after its runs.")
    return ["Depth gain: each method against itself at the shallower depth, in "
            f"{study.unit}, at its tuned rate (Welch intervals; exploratory, Benjamini–Hochberg-adjusted verdicts). "
            f"{where} A gain here is not a comparison with the reference: the interaction table above is.", "",
            *_contrast_table(study, "depth_gain", list(study.design["methods"]))]


def _compute(study: Study) -> list[str]:
    ran = [r for r in study.runs if r["status"] != "pending"]  # the only pending ones: a grid extension's
    waiting = len(study.runs) - len(ran)
    kinds = {kind: sum(1 for r in ran if r["kind"] == kind) for kind in ("tune", "final")}
    seconds = sum(float(r["wall_time_s"]) for r in ran if r["wall_time_s"])
    runs = (f"{len(ran)} full-budget runs (every rate of the grid × every seed of the cell; a grid has no "
            "separate tuning runs)" if study.design.get("tuning") == "grid" else
            f"{len(ran)} runs ({kinds['tune']} tuning, {kinds['final']} final)")
    pending = (f" {waiting} more, the pending grid extension above, have not run." if waiting else "")
    return [f"{runs}, {seconds / 3600:.1f} h of training time summed over runs (`runs.csv`, column `wall_time_s`)."
            + pending]


def _stability(study: Study) -> list[str]:
    """The stability tables of ``results.md`` ("Stability"), from the study's ``stability.csv``."""
    from layerscale.study.report.stability_table import STABILITY_FILE, stability_table_lines
    from layerscale.study.run.csv_rows import read_rows

    rows = read_rows(study.folder / STABILITY_FILE)
    if not rows:
        return [f"No {STABILITY_FILE} yet: `layerscale study --report-only --out {study.folder.name}` writes it."]
    tolerance = {r["window_tolerance"] for r in rows if r["window_tolerance"]}
    unit = "point of accuracy" if study.classification else "bits per byte"
    family = [f"{r['method']} at {study.at(int(r['depth']))}" for r in rows if r["family"] == "primary"]
    return [f"Learning-rate window: the rates a cell tried whose mean validation score at the full budget is within "
            f"{', '.join(f'{float(t):g}' for t in sorted(tolerance))} {unit} of the best rate's (factor largest ÷ "
            f"smallest; then the span and how many of the rates tried it holds). Seed SD: over the seeds at the chosen "
            f"rate, 95 % chi-square interval. SD ÷ {study.reference}'s: paired by seed, 95 % percentile bootstrap "
            "interval over seeds, Pitman–Morgan p. Stability family (Holm): the seed-spread ratio of "
            + (", ".join(family) or "none") + "; the rest exploratory (Benjamini–Hochberg). Diverged and loss "
            "spikes: over every run of the cell, every rate and seed. Definitions and sources: docs/study.md, "
            "\"Stability\".",
            "", *stability_table_lines(rows, study.reference, study.digits + 1, study.at)]


def _heldout(study: Study) -> list[str]:
    """The study's held-out check (``heldout/`` in its folder; :mod:`evidence.heldout_report`)."""
    return heldout_report.heldout_sections(study.folder / "heldout", level="####")


def _redo(study: Study, results_dir: str | os.PathLike) -> list[str]:
    """The redo's primary comparisons beside the same comparisons of the version it replaced (:data:`ORIGINALS`),
    each with its own verdict and adjustment; a line saying so for a study not redone yet."""
    original_folder = ORIGINALS.get(study.key, study.key)
    if study.folder is None or study.folder.name == original_folder:
        return [f"Not redone yet: the page shows the original study ({original_folder})."]
    original = load_study(results_dir, study.key, original_folder)
    lines = [f"Each primary comparison of the redo (`{study.folder.name}`: rates chosen at the full budget over the "
             "cell's seeds, its primary family fixed before its runs, Holm-adjusted) beside the same comparison of "
             f"the original study (`{original_folder}`: rates chosen by {_seeds(original.design['tune_seeds'])} at "
             f"{original.design['min_budget']:g} of the budget; its verdict adjusted as that study's table now "
             "reads it — Holm within the family named after its runs, Benjamini–Hochberg for the rest):", "",
             "| comparison | original [95 % CI] | original verdict | redo [95 % CI] | redo seeds | redo Holm p | "
             "redo verdict |", "|---|---:|---|---:|---:|---:|---|"]
    for r in _primary_rows(study):
        o = next((x for x in original.table(r.table) if x.method == r.method and x.depth == r.depth
                  and x.depth_from == r.depth_from), None)
        old = (f"{original.interval(o)} | {o.verdict} ({_adjusted(o)})" if o is not None and
               o.interval("diff") is not None else "— | not compared")
        lines.append(f"| {_label(study, r)} | {old} | {study.interval(r)} | {r['diff_n'] or '—'} | "
                     f"{format_p(r.p())} | {r.verdict} |")
    return lines


def _seeds(n: int) -> str:
    return "one seed" if n == 1 else f"{n} seeds"


def _corrections(results_dir: str | os.PathLike) -> list[str]:
    """What the previous page rounded by hand: always the original language-model study's table (``lm``), whichever
    folder the page shows."""
    lm = load_study(results_dir, "lm", "lm")
    parts = []
    for method, wrong in (("layerscale", "lower end −0.60"), ("lns", "lower end 0.03")):
        row = lm.cell("shared", method, 96)
        parts.append(f"{method} at depth 96 against {lm.reference} reads {lm.interval(row, digits=2)} bits per "
                     f"byte at two decimals (table: {lm.interval(row)}; the previous page printed the {wrong})")
    return ["- **Two prose intervals were rounded by hand from rounded values** (language model, shared rate): "
            + "; ".join(parts) + ". Every interval on this page is now generated from the tables."]


_PER_STUDY = {"primary": _primary, "comparisons": _comparisons, "rates": _rates, "depth-use": _depth_use,
              "compute": _compute, "heldout": _heldout, "stability": _stability}


def _sweep_block(block: str, studies: dict[str, Study], results_dir: str | os.PathLike) -> list[str]:
    """A block of the AttnRes sweep (:data:`SWEEP`): ``beside-hc`` (:func:`evidence.attnres_section.beside_hc`) or
    one of the per-study blocks; read only when the block is on the page, and refused while runs are pending."""
    sweep = load_study(results_dir, SWEEP, attnres_section.SWEEP_FOLDER)
    if block == "beside-hc":
        return attnres_section.beside_hc(sweep, studies["depthbench"], comparison_cell)
    if block not in _PER_STUDY:
        raise ValueError(f"docs/RESULTS.md: unknown generated block {SWEEP}-{block!r}; expected beside-hc or one of "
                         f"{', '.join(_PER_STUDY)}")
    return _PER_STUDY[block](sweep)


def render_block(name: str, studies: dict[str, Study], results_dir: str | os.PathLike = "docs/results") -> str:
    """The Markdown of the generated block ``name`` (see the module docstring) from the tables in ``results_dir``;
    ``ValueError`` for an unknown one."""
    if name == "glance":
        lines = _glance(studies, results_dir)
    elif name == "corrections":
        lines = _corrections(results_dir)
    elif name.endswith("-redo") and name[:-len("-redo")] in studies:
        lines = _redo(studies[name[:-len("-redo")]], results_dir)
    elif name == "depthbench-depth-gain":
        lines = _depth_gain(studies["depthbench"])
    elif name.startswith(SWEEP + "-"):
        lines = _sweep_block(name[len(SWEEP) + 1:], studies, results_dir)
    elif name in EVIDENCE:
        folder, sections, _ = EVIDENCE[name]
        lines = sections(Path(results_dir) / folder, level="###")
    else:
        key, _, block = name.partition("-")
        study = studies.get(key)
        if block.startswith("original-") and study is not None:  # the version a redo replaced, same block
            block = block[len("original-"):]
            study = load_study(results_dir, key, ORIGINALS.get(key, key))
        if study is None or block not in _PER_STUDY:
            raise ValueError(f"docs/RESULTS.md: unknown generated block {name!r}; expected glance, corrections, "
                             f"{', '.join(EVIDENCE)}, depthbench-depth-gain or <study>-<block> with study in "
                             f"{', '.join(STUDIES)} and block in {', '.join(_PER_STUDY)} or redo "
                             "(original-<block>: the version a redo replaced)")
        lines = _PER_STUDY[block](study)
    return "\n".join(lines) + "\n"


def render_page(text: str, results_dir: str | os.PathLike) -> str:
    """``text`` (the page) with every generated block rewritten from the studies in ``results_dir``."""
    studies = {key: load_study(results_dir, key) for key in STUDIES}
    return _BLOCK.sub(lambda m: m.group(1) + render_block(m.group("name"), studies, results_dir) + m.group(4), text)


def main(argv: list[str] | None = None) -> int:
    """``results_page.py [--check] [PAGE] [RESULTS_DIR]``: rewrite the page (default docs/RESULTS.md, studies in
    docs/results); ``--check``: exit 1 when the page is not what the tables give, changing nothing."""
    args = list(sys.argv[1:] if argv is None else argv)
    check = "--check" in args
    args = [a for a in args if a != "--check"]
    page = Path(args[0] if args else "docs/RESULTS.md")
    results_dir = Path(args[1] if len(args) > 1 else page.parent / "results")
    text = page.read_text(encoding="utf-8")
    rendered = render_page(text, results_dir)
    if check:
        if rendered != text:
            print(f"{page} is not what {results_dir}'s tables give: run python scripts/results_page.py",
                  file=sys.stderr)
            return 1
        return 0
    if rendered != text:
        write_text_atomic(page, rendered)
    print(f"{page}: {len(_BLOCK.findall(text))} generated blocks from {results_dir}")
    return 0
