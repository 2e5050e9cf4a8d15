"""``layerscale report`` / ``write_report``: one self-contained HTML with valid figures, for one run and several;
clear errors for what is missing; a run in progress reported as far as it goes."""

from __future__ import annotations

import base64
import io
import math
import re
import shutil

import pytest
from diagnostics_helpers import PNG_SIGNATURE, read_jsonl

from layerscale.cli import main
from layerscale.diagnostics.plots import (figure_curves, figure_ratio_vs_depth, new_figure, pick_moments,
                                          plot_block_stat_vs_depth, plot_ratio_vs_depth)
from layerscale.diagnostics.report import ReportSection, write_report
from layerscale.diagnostics.run_data import RunData, read_run

pytest.importorskip("matplotlib")

FIGURES = {"curves", "scale_heatmap", "ratio_vs_depth", "signal_vs_depth"}


def assert_real_png(path) -> None:
    """A PNG that decodes to a picture with drawn content (not a blank canvas)."""
    import matplotlib.image
    import numpy as np

    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} is not a PNG"
    pixels = matplotlib.image.imread(path)[..., :3]
    assert pixels.shape[0] > 300 and pixels.shape[1] > 800
    not_white = (pixels < 0.95).any(axis=-1).mean()
    rgb = (pixels * 255).astype(np.uint32).reshape(-1, 3)
    colours = len(np.unique(rgb[:, 0] << 16 | rgb[:, 1] << 8 | rgb[:, 2]))
    assert not_white > 0.03, f"{path}: almost blank ({not_white:.1%} drawn)"
    assert colours > 30, f"{path}: only {colours} colours"


def embedded_images(html: str) -> list[bytes]:
    return [base64.b64decode(m) for m in re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)]


def test_report_of_one_run(trained_runs, tmp_path):
    report = write_report([trained_runs["layerscale"]], tmp_path / "one.html")
    html = report.html_path.read_text()
    assert set(report.figure_paths) == FIGURES
    for name, path in report.figure_paths.items():
        assert path.parent == tmp_path / "one_figures" and path.name == f"{name}.png"
        assert_real_png(path)
    images = embedded_images(html)
    assert sorted(images) == sorted(p.read_bytes() for p in report.figure_paths.values())  # self-contained
    assert "layerscale" in html and "complete" in html and "No diagnostics warnings" in html


def test_report_of_several_runs_one_colour_each(trained_runs, tmp_path):
    runs = [read_run(trained_runs["layerscale"]), read_run(trained_runs["prenorm"])]
    report = write_report(runs, tmp_path / "two.html")
    for path in report.figure_paths.values():
        assert_real_png(path)
    assert len(embedded_images(report.html_path.read_text())) == len(FIGURES)
    legend = figure_curves(runs).legends[0]
    entries = [(t.get_text(), line.get_color()) for t, line in zip(legend.get_texts(), legend.get_lines())
               if t.get_text()]
    assert [text for text, _ in entries] == ["layerscale — layerscale, depth 3", "train",
                                             "prenorm — prenorm, depth 3", "eval"]  # column by column
    assert entries[0][1] != entries[2][1]  # one colour per run


def test_plot_functions_compose_onto_given_axes(trained_runs):
    runs = [read_run(trained_runs["layerscale"]), read_run(trained_runs["prenorm"])]
    fig, axes = new_figure(8, 3, 1, 2)
    assert plot_ratio_vs_depth(runs, "mlp", ax=axes[0, 0]) is fig
    assert plot_block_stat_vs_depth(runs[0], "grad_norm", ax=axes[0, 1]) is fig
    moments = pick_moments(runs[0].diagnostics)
    assert [r["step"] for r in moments.values()] == [1, 4, 6]  # early, mid, late of steps 1, 2, 4, 6
    assert len(axes[0, 0].get_lines()) == 2 * 3  # runs x moments
    assert [list(line.get_xdata()) for line in axes[0, 1].get_lines()] == [[1, 2, 3]] * 3
    with pytest.raises(ValueError, match="stat must be one of"):
        plot_block_stat_vs_depth(runs, "loss")


def test_extra_sections_and_runs_built_from_records(trained_runs, tmp_path):
    records = read_jsonl(trained_runs["layerscale"] / "metrics.jsonl")
    run = RunData.from_records("in-memory", records, {"model": {"name": "vit", "depth": 3, "residual": "layerscale"}})
    fig, axes = new_figure(9, 4)
    axes[0, 0].plot([3, 6, 12], [0.5, 0.6, 0.7], marker="o")
    axes[0, 0].set(xlabel="depth", ylabel="accuracy", title="accuracy against depth")
    report = write_report([run], tmp_path / "extra.html",
                          extra_sections=[ReportSection("Accuracy against depth", fig, "From the study.")],
                          lead_sections=[ReportSection("Headline", html="<p id='headline'>first</p>")])
    assert "accuracy_against_depth" in report.figure_paths
    assert report.figure_paths["accuracy_against_depth"].read_bytes()[:8] == PNG_SIGNATURE
    html = report.html_path.read_text()
    assert html.index("id='headline'") < html.index("Training curves")
    assert html.index("Accuracy against depth") > html.index("Diagnostics warnings")
    assert len(embedded_images(html)) == len(FIGURES) + 1


def test_run_in_progress_reports_what_exists(trained_runs, tmp_path):
    partial = tmp_path / "partial"
    shutil.copytree(trained_runs["layerscale"], partial)
    (partial / "summary.json").unlink()
    shutil.rmtree(partial / "checkpoints")
    with open(partial / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 7, "split": "diagnostics", "blocks": [{"name": "blo')  # a killed writer
    run = read_run(partial)
    assert not run.complete and run.last_step == 6 and run.checkpoints == []
    assert run.notes == ["metrics.jsonl: last line is incomplete or damaged and was skipped",
                         "in progress or stopped early (no summary.json): records up to step 6, no checkpoint yet"]
    report = write_report([partial], tmp_path / "partial.html")
    html = report.html_path.read_text()
    assert "in progress / stopped" in html and "last line is incomplete" in html
    for path in report.figure_paths.values():
        assert_real_png(path)


@pytest.mark.parametrize("missing", ["config.yaml", "metrics.jsonl"])
def test_missing_file_is_named(trained_runs, tmp_path, missing):
    broken = tmp_path / "broken"
    shutil.copytree(trained_runs["prenorm"], broken)
    (broken / missing).unlink()
    with pytest.raises(FileNotFoundError, match=re.escape(str(broken / missing)) + ": missing"):
        write_report([broken], tmp_path / "r.html")
    assert not (tmp_path / "r.html").exists()


def test_cli_report_and_its_errors(trained_runs, tmp_path, capsys):
    out = tmp_path / "cli" / "report.html"
    assert main(["report", str(trained_runs["layerscale"]), str(trained_runs["prenorm"]), "--out", str(out)]) == 0
    assert out.is_file() and f"wrote {out}" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nowhere"), "--out", str(out), "--force"]) == 2  # out exists now
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"layerscale report: error: {tmp_path / 'nowhere'}: run directory not found"]
    assert main(["report", str(trained_runs["prenorm"]), "--out", str(tmp_path / "report.pdf")]) == 2
    assert "report path must end in .html" in capsys.readouterr().err


def test_two_runs_with_one_name_are_refused(trained_runs, tmp_path):
    run = read_run(trained_runs["prenorm"])
    with pytest.raises(ValueError, match="two runs are both named 'prenorm'"):
        write_report([run, run], tmp_path / "dup.html")
    with pytest.raises(ValueError, match="at least one run"):
        write_report([], tmp_path / "none.html")


def test_runs_without_diagnostics_say_so(trained_runs):
    records = [r for r in read_jsonl(trained_runs["layerscale"] / "metrics.jsonl") if r["split"] != "diagnostics"]
    run = RunData.from_records("plain", records, {"model": {"name": "vit", "depth": 3}})
    assert run.diagnostics == [] and run.method == "layerscale"  # the model's default residual
    from layerscale.diagnostics.plots import figure_scale_heatmaps

    for figure in (figure_scale_heatmaps([run]), figure_ratio_vs_depth([run])):
        texts = [t.get_text() for ax in figure.axes for t in ax.texts]
        assert "no diagnostics records in these runs (trained with diagnostics off?)" in texts


def test_figures_survive_diverged_and_degenerate_records():
    """One record only, non-finite values as the log writes them, zeros (ReZero at init), a non-finite event."""
    from layerscale.diagnostics.plots import figure_scale_heatmaps, figure_signal_vs_depth

    def block(i, ratio, scale):
        return {"name": f"blocks.{i}", "index": i + 1, "stream_rms": "inf" if i else 1.0, "grad_norm": "nan",
                "update_ratio": 0.0, "attn": {"ratio": ratio, "scale_mean": scale}, "mlp": {"ratio": 0.0,
                                                                                          "scale_mean": 0.0}}

    records = [{"split": "train", "step": 1, "loss": 2.3}, {"split": "train", "step": 2, "loss": "inf",
                                                            "event": "nonfinite"},
               {"split": "diagnostics", "step": 1, "blocks": [block(0, "nan", 0.0), block(1, "inf", 1e-6)]}]
    run = RunData.from_records("diverged", records, {"model": {"name": "vit", "residual": "rezero", "depth": 2}})
    assert math.isinf(run.diagnostics[0]["blocks"][1]["stream_rms"])
    for make in (figure_curves, figure_scale_heatmaps, figure_ratio_vs_depth, figure_signal_vs_depth):
        figure = make([run])
        figure.savefig(io.BytesIO(), format="png")  # draws every artist: no error on NaN, inf or zeros
    curve = figure_curves([run]).axes[0].get_lines()[0]
    assert list(curve.get_xdata()) == [1]  # the non-finite event is not a point of the loss curve


def test_no_figure_is_written_through_a_linked_figures_folder(trained_runs, tmp_path, capsys):
    outside = tmp_path / "outside"
    outside.mkdir()
    (tmp_path / "one_figures").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ValueError, match="one_figures: a symbolic link; expected a folder"):
        write_report([trained_runs["layerscale"]], tmp_path / "one.html")
    assert not list(outside.iterdir()) and not (tmp_path / "one.html").exists()
