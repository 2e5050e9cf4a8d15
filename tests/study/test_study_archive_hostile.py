"""A hostile ``runs.tar.xz``: headers ``tarfile`` would read whole into memory or recursively (a pax or GNU long-name
header declaring megabytes, a chain of extended headers, a sparse map), members that collide as file and folder,
and the archive as a link — each refused by ``--unpack`` / ``--report-only`` in one line naming the archive and the
member, exit status 2, nothing written into the study folder; an archive with long names (GNU long-name headers)
still unpacks."""

from __future__ import annotations

import io
import lzma
import tarfile
from pathlib import Path

import pytest

from layerscale.cli import main
from layerscale.study.run.archive import (ARCHIVE_FILE, MAX_HEADER_BYTES, MAX_HEADER_CHAIN, pack_runs,
                                          unpack_runs)


def _header(name: str, type_: bytes, size: int) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = type_, size
    return info.tobuf(format=tarfile.GNU_FORMAT)


def _padded(data: bytes) -> bytes:
    return data + b"\0" * (-len(data) % 512)


def _xz(*parts: bytes) -> bytes:
    good = _header("runs/a/config.yaml", tarfile.REGTYPE, 1) + _padded(b"x")
    return lzma.compress(good + b"".join(parts) + b"\0" * 1024)


def _file(name: str = "runs/b/config.yaml", data: bytes = b"y") -> bytes:
    return _header(name, tarfile.REGTYPE, len(data)) + _padded(data)


_RECORD = b"20 comment=aaaaaaaa\n"
_SPARSE_10 = b"22 GNU.sparse.major=1\n22 GNU.sparse.minor=0\n"
_HOSTILE = {
    # tarfile reads the pax data whole (a few kB of xz can declare gigabytes of zeros)
    "pax-header-too-large": _xz(_header("runs/p", tarfile.XHDTYPE, MAX_HEADER_BYTES + 1)
                                + _padded(b"\0" * (MAX_HEADER_BYTES + 1)), _file()),
    "long-name-too-large": _xz(_header("././@LongLink", tarfile.GNUTYPE_LONGNAME, MAX_HEADER_BYTES + 1)
                               + _padded(b"runs/" + b"a" * MAX_HEADER_BYTES), _file()),
    # each extended header parses the next one recursively: thousands are a RecursionError (a traceback)
    "header-chain": _xz((_header("runs/p", tarfile.XHDTYPE, len(_RECORD)) + _padded(_RECORD)) * 2000, _file()),
    # GNU sparse 1.0: the map is read block by block until the count in the data is reached
    "sparse-1.0": _xz(_header("runs/p", tarfile.XHDTYPE, len(_SPARSE_10)) + _padded(_SPARSE_10),
                      _file(data=b"1000\n" + b"0\n" * 2000)),
    "old-gnu-sparse": _xz(_header("runs/b/config.yaml", tarfile.GNUTYPE_SPARSE, 0)),
    "file-named-runs": _xz(_file("runs")),
    "file-inside-a-file": _xz(_file("runs/b"), _file("runs/b/config.yaml")),
    "log-inside-a-file": _xz(_file("runs/b/metrics.jsonl"), _file("runs/b/metrics.jsonl/x")),
}


@pytest.mark.parametrize("case", sorted(_HOSTILE))
def test_a_hostile_archive_header_is_refused_in_one_line_and_nothing_is_written(tmp_path, capsys, case):
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / ARCHIVE_FILE).write_bytes(_HOSTILE[case])
    (folder / "runs.csv").write_text("run,status\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["study", "--out", str(folder), "--unpack"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and ARCHIVE_FILE in error and "refused" in error, error
    assert "member '" in error
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    with pytest.raises(ValueError, match="refused"):
        unpack_runs(folder)


def test_the_header_bounds_are_checked_before_tarfile_reads_the_header(tmp_path):
    """A header declaring 8 GB (of which only a few bytes follow) is refused from its size, not read."""
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / ARCHIVE_FILE).write_bytes(_xz(_header("runs/p", tarfile.XHDTYPE, 8 << 30) + b"\0" * 512))
    with pytest.raises(ValueError, match=rf"extended header of {8 << 30} bytes refused; at most {MAX_HEADER_BYTES}"):
        unpack_runs(folder)
    assert MAX_HEADER_CHAIN >= 3  # a pax header, a GNU long name and a long link before one member


def test_the_archive_as_a_link_is_refused(tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "runs" / "a").mkdir(parents=True)
    (elsewhere / "runs" / "a" / "config.yaml").write_text("x")
    pack_runs(elsewhere)
    folder = tmp_path / "study"
    folder.mkdir()
    (folder / ARCHIVE_FILE).symlink_to(elsewhere / ARCHIVE_FILE)
    assert main(["study", "--out", str(folder), "--unpack"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "refused (a symbolic link)" in error
    assert sorted(p.name for p in folder.iterdir()) == [ARCHIVE_FILE]


def test_an_archive_with_long_names_still_unpacks(tmp_path):
    folder = tmp_path / "study"
    run = folder / "runs" / ("r" * 150)
    run.mkdir(parents=True)
    (run / ("c" * 120 + ".yaml")).write_text("seed: 1\n")
    (run / "summary.json").write_text("{}")
    pack_runs(folder)
    (run / ("c" * 120 + ".yaml")).unlink()
    (run / "summary.json").unlink()
    run.rmdir()
    (folder / "runs").rmdir()
    unpack_runs(folder)
    assert (run / ("c" * 120 + ".yaml")).read_text() == "seed: 1\n" and (run / "summary.json").read_text() == "{}"
