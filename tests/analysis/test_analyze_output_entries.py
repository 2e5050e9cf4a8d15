"""``layerscale analyze --out DIR --force`` replaces files only: a folder in DIR where one of its output files goes
(``analysis.html``, ``criteria.json``, a table or figure) is refused in one line, exit status 2, before any work —
not found after the analysis, once some of the old files were already replaced by new ones."""

from __future__ import annotations

import pytest

from layerscale.cli import main
from source_models import tiny_gpt_folder


@pytest.mark.parametrize("name", ["analysis.html", "depth_summary.md"])
def test_a_folder_where_an_output_file_goes_is_refused_before_the_work(tmp_path, capsys, name):
    folder, text = tiny_gpt_folder(tmp_path)
    out = tmp_path / "analysis"
    (out / name).mkdir(parents=True)
    (out / "analysis.json").write_text("old\n")
    capsys.readouterr()
    assert main(["analyze", str(folder), "--data-path", str(text), "--seq-len", "16", "--samples", "4",
                 "--bootstrap", "20", "--no-progress", "--no-probes", "--out", str(out), "--force"]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip()
    assert len(err.splitlines()) == 1 and str(out / name) in err and "is a folder" in err, err
    assert captured.out == ""  # refused before the model was read and scored
    assert (out / "analysis.json").read_text() == "old\n"
    assert sorted(p.name for p in out.iterdir()) == sorted(["analysis.json", name])
