"""The xz decoder's memory of a ``runs.tar.xz`` is bounded
(:data:`layerscale.study.run.archive_reading.MAX_XZ_MEMORY`, :mod:`layerscale.study.run.bounded_xz`): a stream whose
header asks for a larger dictionary than ``--pack`` writes is refused (``--unpack``; ``--report-only`` reads it
alike) in one line naming the archive and the limit, exit status 2, nothing written, before the decoder allocates
it; what ``--pack`` writes (preset 9, a 64 MiB dictionary) still reads, as do concatenated streams, and a stream cut
short is refused."""

from __future__ import annotations

import io
import lzma
import shutil
import tarfile
import zlib
from pathlib import Path

import pytest

import layerscale.study.run.archive_reading as archive_reading
from layerscale.cli import main
from layerscale.study.run.archive import ARCHIVE_FILE, pack_runs, unpack_runs

_STREAM_HEADER = 12  # magic, flags, CRC32


def _packed_study(folder: Path) -> Path:
    """A study folder holding only ``runs.tar.xz`` (of one run's config, written by ``--pack``) and ``runs.csv``."""
    (folder / "runs" / "a").mkdir(parents=True)
    (folder / "runs" / "a" / "config.yaml").write_text("seed: 1\n")
    pack_runs(folder)
    shutil.rmtree(folder / "runs")
    (folder / "runs.csv").write_text("run,status\n")
    return folder


def _dictionary_code(size: int) -> int:
    """The LZMA2 property byte of a dictionary of ``size`` bytes (2 or 3 times a power of two)."""
    return next(code for code in range(41) if (2 | code & 1) << (code // 2 + 11) == size)


def _with_dictionary(xz: bytes, size: int) -> bytes:
    """``xz`` (one block, LZMA2 alone, as ``tarfile`` writes it) whose block header asks for a dictionary of ``size``
    bytes, its CRC32 recomputed: the data decode as before, but the decoder allocates what the header says. Cheap to
    make, where encoding with such a dictionary takes about ten times its size."""
    start = _STREAM_HEADER
    end = start + (xz[start] + 1) * 4
    header = bytearray(xz[start:end])
    assert header[1] == 0 and header[2:4] == b"\x21\x01", header.hex()  # one filter, no sizes: LZMA2, 1 property byte
    header[4] = _dictionary_code(size)
    header[-4:] = zlib.crc32(header[:-4]).to_bytes(4, "little")
    return xz[:start] + bytes(header) + xz[end:]


def _tree(root: Path) -> list:
    return sorted((p.relative_to(root), p.read_bytes() if p.is_file() else None) for p in root.rglob("*"))


def test_a_dictionary_larger_than_the_limit_is_refused_before_it_is_allocated(tmp_path, capsys):
    folder = _packed_study(tmp_path / "study")
    archive = folder / ARCHIVE_FILE
    archive.write_bytes(_with_dictionary(archive.read_bytes(), 512 * 1024 * 1024))
    before = _tree(tmp_path)
    limit = archive_reading.MAX_XZ_MEMORY
    assert main(["study", "--out", str(folder), "--unpack"]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and str(archive) in error, error
    assert f"refused; its xz stream needs more than {limit} bytes ({limit // 2**20} MiB) of decoder memory" in error
    assert _tree(tmp_path) == before


def test_an_archive_packed_with_preset_9_is_refused_under_a_smaller_limit(tmp_path, monkeypatch):
    folder = _packed_study(tmp_path / "study")
    monkeypatch.setattr(archive_reading, "MAX_XZ_MEMORY", 1024 * 1024)
    with pytest.raises(ValueError, match=r"runs\.tar\.xz: refused; its xz stream needs more than 1048576 bytes "
                                         r"\(1 MiB\) of decoder memory"):
        unpack_runs(folder)
    assert not (folder / "runs").exists()


def test_what_pack_writes_fits_the_limit(tmp_path):
    folder = _packed_study(tmp_path / "study")
    header = (folder / ARCHIVE_FILE).read_bytes()[_STREAM_HEADER:_STREAM_HEADER + 8]
    dictionary = (2 | header[4] & 1) << (header[4] // 2 + 11)
    assert dictionary == 64 * 1024 * 1024 < archive_reading.MAX_XZ_MEMORY  # preset 9
    unpack_runs(folder)
    assert (folder / "runs" / "a" / "config.yaml").read_text() == "seed: 1\n"


def _tar(*members: tuple[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def test_concatenated_streams_read_as_one_and_trailing_bytes_are_ignored(tmp_path):
    """As ``lzma.LZMAFile`` reads them (``xz`` itself writes concatenated streams with ``xz -T``)."""
    folder = tmp_path / "study"
    folder.mkdir()
    data = _tar(("runs/a/config.yaml", b"seed: 1\n"), ("runs/b/config.yaml", b"seed: 2\n" * 3000))
    cut = len(data) // 3
    (folder / ARCHIVE_FILE).write_bytes(lzma.compress(data[:cut]) + lzma.compress(data[cut:]) + b"\0" * 8)
    unpack_runs(folder)
    assert (folder / "runs" / "b" / "config.yaml").read_bytes() == b"seed: 2\n" * 3000


def test_a_stream_cut_short_is_not_a_readable_archive(tmp_path):
    folder = tmp_path / "study"
    folder.mkdir()
    xz = lzma.compress(_tar(("runs/a/config.yaml", bytes(range(256)) * 400)), preset=0)
    (folder / ARCHIVE_FILE).write_bytes(xz[:len(xz) - 40])
    with pytest.raises(ValueError, match="not a readable runs archive"):
        unpack_runs(folder)
    assert not (folder / "runs").exists()
