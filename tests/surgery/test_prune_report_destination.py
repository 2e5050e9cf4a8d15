"""``layerscale prune --by ... --report DIR`` checks DIR as it checks ``--out`` before any work, so a bad one costs
one line (exit status 2) and changes nothing on disk — above all not an existing DEST, which ``--force`` would
otherwise have replaced before the report failed: DIR must be a folder that can be made and written (tried by
creating and removing a temporary entry: :func:`layerscale.destinations.check_writable_dir`), must not be the
source or lie inside it (or inside the training run of a source checkpoint), and, with ``--force``, must hold no
folder where a comparison file goes. ``--heal-out`` must not lie inside the source either. A report outside DEST is
staged before DEST is written: a failure writing it leaves DEST as it was."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from layerscale.cli import main
from source_models import tiny_gpt_folder


def _dest(tmp_path):
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "marker.txt").write_text("keep\n")
    return dest


def _prune(source, dest, *extra):
    return main(["prune", str(source), "--by", "gromov", "--remove", "1", "--out", str(dest), "--force", *extra])


def _refused(capsys, *words):
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    for word in words:
        assert word in err, err
    return err


def _kept(dest):
    assert sorted(p.name for p in dest.iterdir()) == ["marker.txt"]


def test_a_report_under_a_regular_file_is_refused_before_the_source_is_read(tmp_path, capsys):
    dest, plain = _dest(tmp_path), tmp_path / "corpus.txt"
    plain.write_text("text\n")
    capsys.readouterr()
    # the source does not exist: a check after reading it would report that instead
    assert _prune(tmp_path / "no-such-source", dest, "--report", str(plain / "rep")) == 2
    _refused(capsys, "--report", str(plain / "rep"), "not a folder")
    _kept(dest)
    assert plain.read_text() == "text\n"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs /proc")
def test_a_report_in_a_pseudo_file_system_is_refused_before_the_source_is_read(tmp_path, capsys):
    dest = _dest(tmp_path)
    capsys.readouterr()
    assert _prune(tmp_path / "no-such-source", dest, "--report", "/proc/layerscale-report") == 2
    _refused(capsys, "--report", "/proc/layerscale-report", "does not accept new files")
    _kept(dest)


def test_a_folder_where_a_comparison_file_goes_is_refused_with_force(tmp_path, capsys):
    dest, report = _dest(tmp_path), tmp_path / "report"
    (report / "criteria.md").mkdir(parents=True)
    capsys.readouterr()
    assert _prune(tmp_path / "no-such-source", dest, "--report", str(report)) == 2
    _refused(capsys, str(report / "criteria.md"), "is a folder")
    _kept(dest)


def _gpt_folder(tmp_path):
    folder, text = tiny_gpt_folder(tmp_path)
    return folder, ["--data-path", str(text), "--seq-len", "16", "--samples", "4", "--bootstrap", "20"]


@pytest.mark.parametrize("where", ["source", "inside"])
def test_a_report_in_the_source_folder_is_refused(tmp_path, capsys, where):
    folder, data = _gpt_folder(tmp_path)
    before = sorted(p.name for p in folder.iterdir())
    report = folder if where == "source" else folder / "rep"
    dest = _dest(tmp_path)
    capsys.readouterr()
    assert _prune(folder, dest, *data, "--report", str(report)) == 2
    _refused(capsys, "--report", str(report), "source")
    assert sorted(p.name for p in folder.iterdir()) == before
    _kept(dest)


def test_a_report_inside_the_run_of_a_source_checkpoint_is_refused(tmp_path, capsys):
    run = _fake_run(tmp_path)
    dest = _dest(tmp_path)
    capsys.readouterr()
    assert _prune(run / "checkpoints" / "step_1", dest, "--report", str(run / "report")) == 2
    _refused(capsys, "--report", str(run), "run")
    assert not (run / "report").exists()
    _kept(dest)


def _fake_run(tmp_path):
    """The layout of a training run (config.yaml, checkpoints/step_1): enough for checks made before it is read."""
    run = tmp_path / "run"
    (run / "checkpoints" / "step_1").mkdir(parents=True)
    (run / "config.yaml").write_text("model: {}\n")
    return run


@pytest.mark.parametrize("source", ["run", "checkpoint"])
def test_heal_out_inside_the_source_run_is_refused_before_it_is_read(tmp_path, capsys, source):
    run = _fake_run(tmp_path)
    dest = _dest(tmp_path)
    capsys.readouterr()
    origin = run if source == "run" else run / "checkpoints" / "step_1"
    assert main(["prune", str(origin), "--blocks", "1", "--heal-steps", "1", "--heal-out", str(run / "heal"),
                 "--out", str(dest), "--force"]) == 2
    _refused(capsys, "--heal-out", str(run / "heal"), "inside")
    assert not (run / "heal").exists()
    _kept(dest)


def test_a_report_holding_the_source_is_written(tmp_path, capsys):
    folder, data = _gpt_folder(tmp_path)
    dest = tmp_path / "dest"
    assert _prune(folder, dest, *data, "--report", str(tmp_path)) == 0
    assert (tmp_path / "criteria.md").is_file() and (dest / "config.json").is_file()


def test_a_failed_report_write_leaves_dest_as_it_was(tmp_path, capsys, monkeypatch):
    from layerscale import atomic_io

    folder, data = _gpt_folder(tmp_path)
    dest, report = _dest(tmp_path), tmp_path / "report"
    report.mkdir()
    (report / "criteria.md").write_text("old\n")
    real = atomic_io.atomic_path

    def failing(path):
        if Path(path).name == "criteria.md":
            raise OSError(28, "No space left on device", os.fspath(path))
        return real(path)

    monkeypatch.setattr(atomic_io, "atomic_path", failing)
    capsys.readouterr()
    assert _prune(folder, dest, *data, "--report", str(report)) == 2
    _refused(capsys, "No space left on device")
    _kept(dest)
    assert (report / "criteria.md").read_text() == "old\n"
    assert not [p.name for p in report.iterdir() if p.name.startswith(".")]


def test_a_failed_dest_write_leaves_the_old_report(tmp_path, capsys, monkeypatch):
    from layerscale.surgery import surgery_output

    folder, data = _gpt_folder(tmp_path)
    dest, report = _dest(tmp_path), tmp_path / "report"
    report.mkdir()
    (report / "criteria.md").write_text("old\n")

    def failing(*args, **kwargs):
        raise OSError(28, "No space left on device", str(dest))

    monkeypatch.setattr(surgery_output, "finish_write", failing)
    capsys.readouterr()
    assert _prune(folder, dest, *data, "--report", str(report)) == 2
    _refused(capsys, "No space left on device")
    _kept(dest)
    assert sorted(p.name for p in report.iterdir()) == ["criteria.md"]
    assert (report / "criteria.md").read_text() == "old\n"
