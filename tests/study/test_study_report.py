"""The study report: headline with 95 % bands first, learning-rate sensitivity, the tables, every final run's curves,
γ / α heatmaps from step 0 and the warnings; n = 1 cells without bands, partial studies, language-model direction.

No training: the run directories are written by hand (metrics.jsonl and study_status.json as a study run leaves
them) and the result objects are built from them with the study's own readers.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest

from layerscale.diagnostics.plots import figure_scale_heatmaps
from layerscale.diagnostics.run_data import RunData
from layerscale.study.report.figures import figure_depth_curves, plot_lr_sensitivity, plot_metric_vs_depth
from layerscale.study.design.grid import StudySpec
from layerscale.study.report.markdown_html import markdown_to_html, split_title
from layerscale.study.report.html_report import headline_path, write_study_report
from layerscale.stats.intervals import welch_interval
from layerscale.study.report.results import Metric, cell_results, collect_run
from layerscale.study.run.rate_search import TuningOutcome
from layerscale.study.study import StudyPlan, summarize
from layerscale.study.report.summary import study_cost, study_markdown
from layerscale.study.run.tuning import RungResult, choose_rate
from study_helpers import TINY_BASE

pytest.importorskip("matplotlib")

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TOTAL_STEPS = 60
LRS = (3e-4, 1e-3, 3e-3)
# method -> (final accuracy at depth 2, change per doubling of depth)
LEVELS = {"prenorm": (0.80, -0.04), "layerscale": (0.82, 0.01), "rezero": (0.55, -0.10)}


def _diagnostics(method: str, depth: int, step: int) -> dict:
    growth = step / TOTAL_STEPS
    scale = {"prenorm": None, "layerscale": 1e-4 * (1 + 50 * growth), "rezero": 0.02 * (step - 1) / TOTAL_STEPS}[method]
    blocks = [{"name": f"blocks.{i}", "stream_rms": 1.0 + 0.1 * i, "grad_norm": 0.1, "update_ratio": 1e-3,
               "attn": {"ratio": 0.1, "scale_mean": scale}, "mlp": {"ratio": 0.2, "scale_mean": scale}}
              for i in range(depth)]
    return {"split": "diagnostics", "step": step, "blocks": blocks}


def _write_run(run_dir: Path, method: str, depth: int, lr: float, seed: int, *, classification: bool,
               status: str = "finished", stop: int = TOTAL_STEPS, test: bool = True) -> None:
    """A run directory as a study run leaves it: train / eval / test / diagnostics / warning records."""
    run_dir.mkdir(parents=True, exist_ok=True)
    base, slope = LEVELS[method]
    final = base + slope * math.log2(depth / 2) - 3 * abs(math.log10(lr / 1e-3)) / 100 + 0.01 * (seed % 10)
    records = []
    for step in range(1, stop + 1):
        progress = step / TOTAL_STEPS
        accuracy = 0.1 + (final - 0.1) * min(1.0, 1.5 * progress)
        loss = 2.3 * (1 - accuracy) + 0.05 if classification else 5.5 - 3.0 * accuracy
        if step == 1 or step % 5 == 0:
            records.append(_diagnostics(method, depth, step))
        if step % 5 == 0:
            records.append({"split": "train", "step": step, "loss": loss + 0.1, "accuracy": accuracy + 0.02,
                            "lr": lr, "time": float(step)})
        if step % 10 == 0:
            records.append({"split": "eval", "on": "validation", "step": step, "loss": loss, "accuracy": accuracy,
                            "time": float(step)})
    if method == "rezero":
        records.append({"split": "diagnostics_warning", "step": 10, "block": "blocks.0", "branch": "attn",
                        "kind": "ratio_growth", "value": 42.0, "threshold": 10.0,
                        "message": "step 10: blocks.0 attn branch: ratio grew x42 (limit x10) <b>"})
    if test and status == "finished":
        records.append({"split": "test", "on": "test", "step": stop, "loss": loss, "accuracy": accuracy})
    if status == "diverged":
        records = [r for r in records if r["step"] <= stop]
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in records) + "\n")
    (run_dir / "study_status.json").write_text(json.dumps(
        {"status": status, "step": stop, "total_steps": TOTAL_STEPS, "stop_at_step": 0,
         "diverged_step": stop if status == "diverged" else None, "message": ""}))


def make_study(study_dir: Path, *, methods=("prenorm", "layerscale", "rezero"), depths=(2, 4, 8), seeds=(0, 1, 2),
               lrs=LRS, language_model=False, label_smoothing=0.0, missing=(), diverged=(), shared_table=True,
               shapes=(), params=None, target=None):
    """A study folder written by hand and everything ``write_study_report`` takes. ``missing``: run ids left
    unwritten (pending); ``diverged``: run ids that diverged at step 20."""
    base = json.loads(json.dumps(TINY_BASE))
    base["optim"]["label_smoothing"] = label_smoothing
    spec = StudySpec(tuple(methods), tuple(depths), tuple(seeds), base, lrs=tuple(lrs), shared_table=shared_table,
                     shapes=shapes, target=target)
    metric = Metric.for_language_model(language_model)
    plan = StudyPlan(TOTAL_STEPS, metric, "digits: 1437 train / 360 test images (8x8, 10 classes)")
    rungs, chosen, choices = {}, {}, {}
    for method, depth in spec.cells():
        if not spec.tuned:
            continue
        scores = {}
        for lr in spec.lrs:
            run = spec.run(study_dir, method, depth, lr, spec.tune_seed, "tune", stop_at_step=15)
            status = "diverged" if (method == "rezero" and lr == max(spec.lrs)) else "paused"
            _write_run(run.run_dir, method, depth, lr, spec.tune_seed, classification=not language_model,
                       status=status, stop=15, test=False)
            scores[lr] = -math.inf if status == "diverged" else \
                LEVELS[method][0] / 2 - abs(math.log10(lr / 1e-3)) / 10 - 0.01 * depth
            if language_model and math.isfinite(scores[lr]):
                scores[lr] = -(4.0 - scores[lr])  # minus a loss in nats: larger is better
        choice = choose_rate({lr: (v,) for lr, v in scores.items()}, spec.shared_lr, tuple(spec.lrs))
        rungs[(method, depth)] = [RungResult(0, 15, scores, (choice.lr,), {lr: (v,) for lr, v in scores.items()})]
        chosen[(method, depth)] = choice.lr
        choices[(method, depth)] = choice
    finals = spec.final_runs(study_dir, chosen)
    for run in finals:
        if run.run_id in missing:
            continue
        _write_run(run.run_dir, run.method, run.depth, run.lr, run.seed, classification=not language_model,
                   status="diverged" if run.run_id in diverged else "finished",
                   stop=20 if run.run_id in diverged else TOTAL_STEPS)
    tune_runs = [spec.run(study_dir, m, d, lr, spec.tune_seed, "tune") for (m, d) in rungs for lr in spec.lrs]
    results = [collect_run(r, metric, target) for r in [*tune_runs, *finals]]
    tuning = TuningOutcome(chosen=chosen or {cell: spec.shared_lr for cell in spec.cells()}, choices=choices,
                           rates={cell: tuple(spec.lrs) for cell in rungs}, extended={cell: () for cell in rungs},
                           rungs=rungs)
    plan = StudyPlan(TOTAL_STEPS, metric, plan.data_description, params or {})
    cells, _, _, markdown = summarize(spec, plan, results, finals, tuning)
    return spec, plan, results, cells, rungs, markdown


def _sections(document: str) -> list[str]:
    return re.findall(r"<h2>(.*?)</h2>", document)


def test_report_reads_headline_first_then_sensitivity_tables_runs_and_diagnostics(tmp_path):
    args = make_study(tmp_path)
    out = write_study_report(tmp_path, *args)
    assert out == tmp_path / "report.html"
    document = out.read_text()
    titles = _sections(document)
    assert titles[:3] == ["Test accuracy (%) against depth", "Learning-rate sensitivity",
                          "Tables and what the intervals support"]
    for depth in (2, 4, 8):
        assert f"Training curves, depth {depth}" in titles
        assert f"Residual scales γ / α per block, depth {depth}" in titles
    assert titles[-2:] == ["Diagnostics warnings of the final runs", "Every run"]
    assert document.count('src="data:image/png;base64,') == 2 + 3 + 3
    png = headline_path(tmp_path, args[1].metric)
    assert png == tmp_path / "accuracy_vs_depth.png" and png.read_bytes()[:8] == PNG_SIGNATURE
    assert (tmp_path / "report_figures" / "lr_sensitivity.png").read_bytes()[:8] == PNG_SIGNATURE
    # the title comes from results.md, whose tables are rendered as HTML tables
    assert "<h1>Depth study: prenorm, layerscale, rezero at depths 2, 4, 8</h1>" in document
    assert document.count("<table>") >= 4 and "Complete: 27 of 27 final runs done" in document
    # sensitivity caption: rung-0 budget and the tuning seed
    assert "trained for 15 of the 60 steps" in document and "tuning seed(s) 1000, 1001" in document
    # warnings: every field, escaped, value and threshold side by side
    assert "<th>message</th><th>value</th><th>threshold</th>" in document
    assert "ratio grew x42 (limit x10) &lt;b&gt;" in document
    assert "<td class=num>42</td><td class=num>10</td>" in document
    # heatmap caption names the method without a learnable scale and ReZero's zero at initialisation
    assert "prenorm: no learnable residual scale" in document
    assert "rezero: some blocks have a scale of exactly 0" in document
    # every run reachable by a link to its directory
    assert '<a href="runs/layerscale-d8-lr0.001-s2/">' in document
    assert '<a href="runs/tune/rezero-d2-lr0.003-s1000/">' in document


def test_headline_has_bands_for_three_seeds_and_none_for_one(tmp_path):
    from matplotlib.collections import PolyCollection

    spec, plan, _, cells, _, _ = make_study(tmp_path / "three")
    ax = plot_metric_vs_depth(spec, cells, plan.metric).axes[0]
    assert len([c for c in ax.collections if isinstance(c, PolyCollection)]) == len(spec.methods)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2", "4", "8"] and ax.get_xscale() == "log"

    args = make_study(tmp_path / "one", seeds=(0,), methods=("prenorm", "layerscale"), depths=(2, 4))
    spec, plan, _, cells, _, _ = args
    figure = plot_metric_vs_depth(spec, cells, plan.metric)
    assert len(figure.axes[0].lines) >= len(spec.methods)
    for ax in figure.axes[:2]:
        assert not [c for c in ax.collections if isinstance(c, PolyCollection)]
    document = write_study_report(tmp_path / "one", *args).read_text()
    assert "Every cell has fewer than 3 finished seeds: no band is drawn (the tables list each seed)." in document
    assert "(n = 1)" in document  # the table says it too


def test_partial_study_renders_and_says_what_is_missing(tmp_path):
    missing = {"rezero-d8-lr0.001-s0", "rezero-d8-lr0.001-s1", "rezero-d8-lr0.001-s2", "prenorm-d4-lr0.001-s1",
               "prenorm-d4-lr0.001-s2"}
    args = make_study(tmp_path, missing=missing, diverged={"layerscale-d8-lr0.001-s0"})
    # one final run in progress: records but no status yet
    shutil.copytree(tmp_path / "runs" / "prenorm-d2-lr0.001-s0", tmp_path / "runs" / "prenorm-d4-lr0.001-s1")
    (tmp_path / "runs" / "prenorm-d4-lr0.001-s1" / "study_status.json").unlink()
    document = write_study_report(tmp_path, *args).read_text()
    assert "<b>Partial study</b>: 22 of 27 final runs done (1 of them diverged)" in document
    assert "Not finished (pending, 5): " in document
    assert all(run_id in document for run_id in missing)
    assert "No finished run yet (no point): rezero d8" in document
    # layerscale d8 lost one of its 3 seeds to divergence: 2 seeds get no band either
    assert ("Fewer than 3 seeds (no band; the tables list each seed): prenorm d4 (tuned), layerscale d8 (tuned), "
            "prenorm d4 (shared), layerscale d8 (shared).") in document
    assert "Partial results: 5 final run(s) not finished yet." in document  # results.md, rendered
    assert (tmp_path / "accuracy_vs_depth.png").read_bytes()[:8] == PNG_SIGNATURE


def test_a_shape_study_names_its_parameter_budget_in_title_paragraph_figure_and_table(tmp_path):
    methods, depths = ("prenorm", "layerscale"), (2, 4)
    shapes = tuple((m, d, 32 // d * 4) for d in depths for m in methods)
    params = {(m, d): 10_000 + 7 * d + (m == "layerscale") * 3 * d for d in depths for m in methods}
    spec, plan, _, cells, _, markdown = make_study(tmp_path, methods=methods, depths=depths, shapes=shapes,
                                                   params=params)
    assert markdown.startswith("# Shape study at a fixed parameter budget: prenorm, layerscale at depths 2, 4")
    assert ("at a fixed parameter budget, each method's width chosen per depth so that every cell has 10,014 to "
            "10,040 parameters") in markdown
    assert "| prenorm | width 64, 10,014 params | width 32, 10,028 params |" in markdown
    ax = plot_metric_vs_depth(spec, cells, plan.metric).axes[0]
    assert ax.get_xlabel().startswith("residual blocks at a fixed parameter budget")
    plain = make_study(tmp_path / "plain", methods=methods, depths=depths)[-1]
    assert plain.startswith("# Depth study:") and "parameter budget" not in plain


def test_the_depth_use_section_gives_welch_depth_gains_and_interactions_against_the_reference(tmp_path):
    methods, depths = ("prenorm", "layerscale"), (2, 4, 8)
    shapes = tuple((m, d, 64 // d * 2) for d in depths for m in methods)
    _, _, _, cells, _, markdown = make_study(tmp_path, methods=methods, depths=depths, shapes=shapes)
    section = markdown.split("## Depth use")[1].split("\n## ")[0]
    assert "Welch's 95 % t-interval" in section
    interaction, gain = section.split("**Depth gain**")
    by_key = {(c.method, c.depth): c for c in cells if c.table == "tuned"}

    def rows(text):
        return {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in text.splitlines()
                if line.startswith("| ") and not line.startswith("| method")}
    pairs = [(2, 4), (2, 8), (4, 8)]
    for method in methods:
        for column, (a, b) in enumerate(pairs):
            expected = welch_interval(by_key[(method, b)].test, by_key[(method, a)].test)
            assert rows(gain)[method][column].startswith(f"{expected.mean:+.1f} [{expected.low:.1f}, "
                                                         f"{expected.high:.1f}]")
    # the interaction of layerscale: the Welch interval between the two depths' paired differences
    for column, (a, b) in enumerate(pairs):
        expected = welch_interval(by_key[("layerscale", b)].diff, by_key[("layerscale", a)].diff)
        assert rows(interaction)["layerscale"][column].startswith(f"{expected.mean:+.1f}")
    assert "prenorm" not in rows(interaction)  # the reference has no interaction with itself
    assert re.search(r"^- layerscale: ", interaction, re.M)

def test_steps_to_target_counts_only_runs_that_have_ended(tmp_path):
    missing = {"rezero-d8-lr0.001-s0", "rezero-d8-lr0.001-s1", "rezero-d8-lr0.001-s2", "prenorm-d4-lr0.001-s2"}
    markdown = make_study(tmp_path, missing=missing, target=50.0)[-1]
    table = markdown.split("## Steps to reach 50 % on the validation split")[1].split("##")[0]
    assert "(k/n): k of the n runs that have ended reached it" in table
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table.splitlines()
            if line.startswith("| ") and not line.startswith("| method")}
    assert rows["rezero"][2] == "no run ended yet"
    assert rows["prenorm"][1].endswith("(2/2)") and rows["prenorm"][0].endswith("(3/3)")


@pytest.mark.parametrize("lrs", [(), (1e-3, 3e-3)])
def test_a_study_with_no_finished_run_still_renders(tmp_path, lrs):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1), TINY_BASE, lrs=lrs)
    plan = StudyPlan(TOTAL_STEPS, Metric.for_language_model(False), "digits")
    results = [collect_run(r, plan.metric) for r in spec.final_runs(tmp_path, {})]
    cells = cell_results(spec, results, {})
    markdown = study_markdown(spec, cells, plan.metric, study_cost(spec, results, {}), TOTAL_STEPS, len(results))
    document = write_study_report(tmp_path, spec, plan, results, cells, {}, markdown).read_text()
    assert "<b>Partial study</b>: 0 of 4 final runs done" in document and "Not finished (pending, 4)" in document
    assert "No diagnostics records at depth 2 yet" in document
    if lrs:
        assert "No rung of the learning-rate tuning has finished yet." in document
        assert "Learning rate not tuned yet (2 cells): prenorm d2, layerscale d2" in document
    else:
        assert "The study was not tuned" in document
    assert (tmp_path / "accuracy_vs_depth.png").read_bytes()[:8] == PNG_SIGNATURE


def test_language_model_scores_are_shown_as_bits_per_byte_lower_is_better(tmp_path):
    spec, plan, results, cells, rungs, markdown = make_study(tmp_path, language_model=True,
                                                             methods=("prenorm", "layerscale"), depths=(2, 4))
    assert not plan.metric.higher_is_better
    chosen = {(c.method, c.depth): c.lr for c in cells if c.table == "tuned"}
    figure = plot_lr_sensitivity(spec, rungs, chosen, plan.metric)
    ax = figure.axes[0]
    line = ax.lines[0]  # prenorm, depth 2: a loss of 4 - score nats, shown in bits per byte
    expected = [-rungs[("prenorm", 2)][0].scores[lr] / math.log(2) for lr in sorted(spec.lrs)]
    assert list(line.get_ydata()) == pytest.approx(expected)
    assert all(v > 0 for v in line.get_ydata())
    assert "bits per byte ↓" in ax.get_ylabel()
    headline = plot_metric_vs_depth(spec, cells, plan.metric)
    assert "lower is better" in headline.axes[0].get_ylabel()
    document = write_study_report(tmp_path, spec, plan, results, cells, rungs, markdown).read_text()
    assert "Test bits per byte, lower is better, on the test split" in document
    assert (tmp_path / "bits_per_byte_vs_depth.png").read_bytes()[:8] == PNG_SIGNATURE


def _axis_marks(ax) -> list[float]:
    """x positions of the ✕ marks drawn on the x axis (scatter points placed in axes units along y)."""
    from matplotlib.collections import PathCollection

    return [float(x) for c in ax.collections if isinstance(c, PathCollection)
            for x, y in c.get_offsets() if y == 0.0 and c.get_transform() != ax.transData]


def test_diverged_rates_and_cells_are_marked_on_the_axis(tmp_path):
    from matplotlib.colors import to_hex

    from layerscale.study.report.figures import method_colors

    diverged = {f"rezero-d8-lr0.001-s{s}" for s in range(3)}
    spec, plan, results, cells, rungs, _ = make_study(tmp_path, diverged=diverged)
    assert [c.test for c in cells if (c.method, c.depth, c.table) == ("rezero", 8, "tuned")] == [None]
    headline = plot_metric_vs_depth(spec, cells, plan.metric)
    marks = _axis_marks(headline.axes[0])
    assert len(marks) == 1 and marks[0] == pytest.approx(8, rel=0.1)
    assert "every run diverged" in [t.get_text() for t in headline.legends[0].get_texts()]

    chosen = {(c.method, c.depth): c.lr for c in cells if c.table == "tuned"}
    ax = plot_lr_sensitivity(spec, rungs, chosen, plan.metric).axes[0]
    rezero = to_hex(method_colors(spec.methods)["rezero"])
    line = next(line for line in ax.lines if to_hex(line.get_color()) == rezero and len(line.get_xdata()) == 3)
    assert math.isnan(line.get_ydata()[-1]) and not math.isnan(line.get_ydata()[0])  # 3e-3 diverged: no point
    marks = _axis_marks(ax)
    assert len(marks) == 1 and marks[0] == pytest.approx(3e-3, rel=0.1)  # ... but a ✕ on the axis instead


def test_train_and_validation_loss_share_an_axis_only_without_label_smoothing(tmp_path):
    plain = make_study(tmp_path / "plain", methods=("prenorm", "layerscale"), depths=(2,))
    smooth = make_study(tmp_path / "smooth", methods=("prenorm", "layerscale"), depths=(2,), label_smoothing=0.1)
    runs = {m: [(s, RunData.from_records(f"{m}-{s}", _records(tmp_path / "plain", m, s)), "finished", None)
                for s in (0, 1, 2)] for m in ("prenorm", "layerscale")}
    assert len(figure_depth_curves(2, runs, plain[1].metric, 0.0).axes) == 2 * 2
    figure = figure_depth_curves(2, runs, smooth[1].metric, 0.1)
    assert len(figure.axes) == 2 * 3
    assert "label smoothing 0.1" in figure.axes[0].get_title() and "no smoothing" in figure.axes[1].get_title()
    smoothed_report = write_study_report(tmp_path / "smooth", *smooth).read_text()
    assert "label smoothing 0.1: the training loss includes" in smoothed_report
    assert "No label smoothing" in write_study_report(tmp_path / "plain", *plain).read_text()


def _records(study_dir: Path, method: str, seed: int) -> list[dict]:
    path = study_dir / "runs" / f"{method}-d2-lr0.001-s{seed}" / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_scale_heatmap_starts_at_step_zero_never_below(tmp_path):
    make_study(tmp_path, methods=("layerscale",), depths=(2,), seeds=(0,), lrs=())
    run = RunData.from_records("ls", _records(tmp_path, "layerscale", 0), {"model": {"residual": "layerscale"}})
    figure = figure_scale_heatmaps([run])
    for ax in figure.axes[:2]:
        assert ax.get_xlim()[0] == pytest.approx(0.0)


def test_markdown_is_rendered_and_escaped():
    title, rest = split_title("# Study <x>\n\nText with **bold** and `code`.\n")
    assert title == "Study <x>" and "Study" not in rest
    rendered = markdown_to_html("## Head\n\n| a | b \\| c |\n|---|---:|\n| <script> | 1.5 |\n\n- one\n- two **2**\n"
                                "\nplain & text")
    assert "<h3>Head</h3>" in rendered
    assert "<th>a</th><th style=\"text-align:right\">b | c</th>" in rendered
    assert "<td>&lt;script&gt;</td><td style=\"text-align:right\">1.5</td>" in rendered
    assert "<ul><li>one</li><li>two <strong>2</strong></li></ul>" in rendered
    assert "<p>plain &amp; text</p>" in rendered and "<script>" not in rendered


def test_headline_axis_stays_within_the_metric_range_when_an_interval_reaches_past_it():
    from layerscale.stats.intervals import mean_interval
    from layerscale.study.report.results import CellResult

    spec = StudySpec(("prenorm", "layerscale"), (6, 24), (0, 1), TINY_BASE)
    wide = mean_interval([0.0, 50.0, 100.0])  # three seeds: t = 4.3, the interval spans about ±124 points
    assert wide.low < 0 and wide.high > 100
    cells = [CellResult("tuned", m, d, 1e-3, 2, 0, wide if m == "prenorm" else mean_interval([60.0, 62.0]), None,
                        None, 0, None, None) for d in spec.depths for m in spec.methods]
    ax = plot_metric_vs_depth(spec, cells, Metric.for_language_model(False)).axes[0]
    assert ax.get_ylim() == (0.0, 100.0)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["6", "24"]


def test_without_a_validation_split_the_report_says_evaluation_is_on_the_test_split(tmp_path):
    spec = StudySpec(("prenorm", "layerscale"), (2,), (0,), TINY_BASE, validation_fraction=0.0)
    plan = StudyPlan(TOTAL_STEPS, Metric.for_language_model(False), "digits")
    finals = spec.final_runs(tmp_path, {})
    for run in finals:  # finished, but the trainer reads no separate test split without a validation split
        _write_run(run.run_dir, run.method, run.depth, run.lr, run.seed, classification=True, test=False)
    results = [collect_run(r, plan.metric) for r in finals]
    cells = cell_results(spec, results, {})
    markdown = study_markdown(spec, cells, plan.metric, study_cost(spec, results, {}), TOTAL_STEPS, 0)
    document = write_study_report(tmp_path, spec, plan, results, cells, {}, markdown).read_text()
    assert "the periodic evaluation is on the test split" in document
    assert "2 finished run(s) have no test-split evaluation, so no test metric" in document


def test_report_only_renders_a_study_whose_tuning_has_not_finished(tmp_path):
    from layerscale.study.design.grid import StudySpec
    from layerscale.study.study import run_study
    from study_helpers import TINY_BASE

    spec = StudySpec(("prenorm", "layerscale"), (2,), (0, 1, 2), TINY_BASE, lrs=(1e-3, 3e-3))
    summary = run_study(spec, tmp_path / "study", train=False, progress=False)
    assert all(c.lr is None for c in summary.cells if c.table == "tuned")
    assert "tuning not finished" in summary.markdown
    assert (tmp_path / "study" / "report.html").is_file()


def test_cells_still_at_the_edge_of_the_rates_they_tried_are_named():
    from layerscale.study.report.summary import grid_edge_sentence
    from layerscale.study.run.tuning import RateChoice

    spec = StudySpec(("prenorm", "rezero", "dyt"), (2, 4), (0, 1, 2), json.loads(json.dumps(TINY_BASE)), lrs=LRS)
    grid = tuple(LRS)
    tuning = TuningOutcome(
        chosen={("prenorm", 2): 1e-3, ("rezero", 2): 3e-3, ("dyt", 4): 3e-4, ("prenorm", 4): 3e-3},
        choices={("prenorm", 2): RateChoice(1e-3, 1e-3, (1e-3,)), ("rezero", 2): RateChoice(3e-3, 3e-3, (3e-3,)),
                 ("dyt", 4): RateChoice(3e-4, 3e-4, (3e-4,)),
                 # a tie pulled the choice inward from an edge: the edge is still named (issue 60)
                 ("prenorm", 4): RateChoice(3e-3, 1e-2, (3e-3, 1e-2))},
        rates={("prenorm", 2): grid, ("rezero", 2): grid, ("dyt", 4): grid, ("prenorm", 4): (*grid, 1e-2)})
    sentence = grid_edge_sentence(spec, tuning)
    assert sentence.endswith("rezero at depth 2 (best mean at 0.003, the largest tried), dyt at depth 4 (best mean "
                             "at 0.0003, the smallest tried), prenorm at depth 4 (best mean at 0.01, the largest "
                             "tried; the tie rule took 0.003).")
    assert "prenorm at depth 2" not in sentence
    one_rate = StudySpec(("prenorm",), (2,), (0, 1, 2), json.loads(json.dumps(TINY_BASE)), lrs=(1e-3,))
    assert grid_edge_sentence(one_rate, tuning) is None


@pytest.mark.parametrize("families, expected", [
    (("primary", "primary", "exploratory"), "tests 3 comparisons. At 95 % each one alone calls a difference about 1 "
     "time in 20 when there is none, so among 3 equal pairs about 0.2 would be called by chance. Verdicts are "
     "therefore adjusted: the 2 comparison(s) of the primary family, fixed in the design before the runs, by Holm "
     "(1979; the chance of any false verdict among them is at most 5 %), and the other 1 by Benjamini"),
    (("exploratory",), "tests 1 comparison. At 95 % each one alone calls a difference about 1 time in 20 when there "
     "is none, so among 1 equal pair about 0.1 would be called by chance. Verdicts are therefore adjusted: none of "
     "the primary family (fixed in the design before the runs) has a p-value yet; the 1 by Benjamini"),
])
def test_the_multiplicity_sentence_counts_what_has_a_p_value(families, expected):
    from types import SimpleNamespace

    from layerscale.study.report.summary import multiplicity_sentence

    compared = [SimpleNamespace(p_raw=0.01, family=f) for f in families]
    waiting = SimpleNamespace(p_raw=None, family="primary")  # fewer than 3 seeds: not counted
    assert multiplicity_sentence(compared[:1] + [waiting], compared[1:]).startswith("This study " + expected)


def test_markdown_of_a_study_with_edge_choices_says_so(tmp_path):
    *_, markdown = make_study(tmp_path, lrs=(1e-4, 1e-3))
    section = markdown.split("## Learning-rate choice")[1].split("\n## ")[0]
    assert "Best mean still at an edge of the rates tried" in section and "- Ties: none." in section
