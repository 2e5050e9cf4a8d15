"""``layerscale prune --by ... --report DIR`` keeps the comparison files already in DIR: without ``--force`` the
first one (a table, a figure or ``criteria.json``) is refused in one line naming it, exit status 2, before the
source is read; with ``--force`` each is replaced atomically, no temporary file left. ``analyze`` refuses a
``criteria.json`` in ``--out`` alike (both through
:func:`layerscale.analysis.options.depth_options.existing_paper_file`)."""

from __future__ import annotations

import pytest

from layerscale.cli import main


@pytest.mark.parametrize("name", ["criteria.md", "criteria.json", "removal_gromov.svg"])
def test_an_existing_report_file_is_refused_without_force_before_the_source_is_read(tmp_path, capsys, name):
    report, out = tmp_path / "report", tmp_path / "dest"
    report.mkdir()
    (report / name).write_text("kept\n")
    capsys.readouterr()
    # the source does not exist: a check after reading it would report that instead
    assert main(["prune", str(tmp_path / "no-such-source"), "--by", "gamma", "--remove", "1", "--report",
                 str(report), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{report / name} already exists; use --force to replace it" in err, err
    assert (report / name).read_text() == "kept\n" and [p.name for p in report.iterdir()] == [name]
    assert not out.exists()


def test_analyze_refuses_an_existing_criteria_json_without_force(tmp_path, capsys):
    out = tmp_path / "analysis"
    out.mkdir()
    (out / "criteria.json").write_text("{}\n")
    capsys.readouterr()
    assert main(["analyze", str(tmp_path / "no-such-source"), "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"{out / 'criteria.json'} already exists; use --force" in err, err
    assert (out / "criteria.json").read_text() == "{}\n"


def test_force_replaces_the_report_files(tmp_path, capsys):
    pytest.importorskip("transformers")
    pytest.importorskip("tokenizers")
    from source_models import corpus_lines, hf_folder, llama, tokenizer_vocab, train_bpe_tokenizer, write_text

    lines = corpus_lines(120)
    tokenizer = train_bpe_tokenizer(tmp_path / "tokenizer", lines)
    folder = hf_folder(tmp_path / "model", llama(tokenizer_vocab(tokenizer), layers=3, hidden=32), tokenizer)
    corpus = write_text(tmp_path / "corpus.txt", lines)
    report = tmp_path / "report"
    report.mkdir()
    (report / "criteria.md").write_text("stale\n")
    (report / "notes.txt").write_text("mine\n")
    command = ["prune", str(folder), "--by", "gromov", "--remove", "1", "--data-path", str(corpus), "--seq-len", "16",
               "--samples", "6", "--bootstrap", "20", "--report", str(report), "--out", str(tmp_path / "dest")]
    assert main(command) == 2
    assert (report / "criteria.md").read_text() == "stale\n" and not (tmp_path / "dest").exists()
    capsys.readouterr()
    assert main([*command, "--force"]) == 0
    assert "gromov" in (report / "criteria.md").read_text()
    assert (report / "criteria.md").read_text() != "stale\n" and (report / "notes.txt").read_text() == "mine\n"
    assert (report / "criteria.json").stat().st_size > 0
    assert not [p.name for p in report.iterdir() if p.name.startswith(".")]
