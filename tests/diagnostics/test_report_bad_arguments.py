"""``write_report`` / ``write_html_document`` check out_path, dpi, title and sections before drawing or writing
anything: a previous report's figures stay as they were."""
from __future__ import annotations

import os

import pytest

from layerscale.diagnostics.report import ReportSection, write_html_document, write_report
from layerscale.diagnostics.run_data import RunData

pytest.importorskip("matplotlib")

RECORDS = [{"split": "train", "step": 1, "loss": 2.3}, {"split": "train", "step": 2, "loss": 2.1},
           {"split": "eval", "step": 2, "loss": 2.2, "accuracy": 0.2}]


def _run() -> RunData:
    return RunData.from_records("tiny", RECORDS, {"model": {"name": "vit", "depth": 2}})


def _previous_figures(tmp_path, stem):
    figures = tmp_path / f"{stem}_figures"
    figures.mkdir()
    (figures / "curves.png").write_bytes(b"previous report")
    return figures


def _nothing_changed(figures):
    assert [p.name for p in figures.iterdir()] == ["curves.png"]
    assert (figures / "curves.png").read_bytes() == b"previous report"


def test_an_out_path_that_is_a_folder_is_refused_before_any_figure_is_written(tmp_path):
    (tmp_path / "isdir.html").mkdir()
    figures = _previous_figures(tmp_path, "isdir")
    with pytest.raises(ValueError, match="isdir.html: is a directory; expected an HTML report file") as exc:
        write_report([_run()], tmp_path / "isdir.html")
    assert "\n" not in str(exc.value)
    _nothing_changed(figures)


def test_an_out_path_that_is_a_fifo_is_refused(tmp_path):
    os.mkfifo(tmp_path / "pipe.html")
    with pytest.raises(ValueError, match="pipe.html: is a FIFO"):
        write_report([_run()], tmp_path / "pipe.html")
    assert not (tmp_path / "pipe_figures").exists()


@pytest.mark.parametrize("kwargs,match", [({"dpi": 0}, "dpi must be an integer"), ({"dpi": "x"}, "dpi must be"),
                                          ({"dpi": 10**6}, "dpi must be"), ({"dpi": True}, "dpi must be"),
                                          ({"title": 3}, "title must be a string"),
                                          ({"extra_sections": ["x"]}, r"extra_sections\[0\] must be a ReportSection"),
                                          ({"extra_sections": "x"}, "extra_sections must be a list"),
                                          ({"lead_sections": [None]}, r"lead_sections\[0\]")])
def test_bad_arguments_are_refused_before_any_figure_is_written(tmp_path, kwargs, match):
    figures = _previous_figures(tmp_path, "r")
    with pytest.raises(ValueError, match=match) as exc:
        write_report([_run()], tmp_path / "r.html", **kwargs)
    assert "\n" not in str(exc.value)
    _nothing_changed(figures)
    assert not (tmp_path / "r.html").exists()


def test_write_html_document_checks_its_arguments_first(tmp_path):
    import matplotlib.pyplot as plt

    figure = plt.figure()
    figures = _previous_figures(tmp_path, "doc")
    section = ReportSection("A figure", figure, name="curves")
    for kwargs, match in (({"sections": [section, 3]}, r"sections\[1\]"), ({"title": None}, "title must be"),
                          ({"dpi": -1}, "dpi must be")):
        args = {"out_path": tmp_path / "doc.html", "sections": [section], "title": "t"} | kwargs
        with pytest.raises(ValueError, match=match):
            write_html_document(**args)
        _nothing_changed(figures)
    plt.close(figure)


def test_good_arguments_still_write_the_report(tmp_path):
    report = write_report([_run()], tmp_path / "sub" / "ok.html", title="Mine", dpi=50,
                          extra_sections=(ReportSection("Note", text="plain"),))
    text = report.html_path.read_text()
    assert "<title>Mine</title>" in text and "Note" in text
    assert (tmp_path / "sub" / "ok_figures" / "curves.png").is_file()
