"""Reading a study's ``runs.tar.xz`` as an archive someone else made: every member's header checked before any
data is read, nothing extracted when one is refused (:mod:`layerscale.study.run.archive` packs and unpacks it).

Refused: a member outside ``runs/``, an absolute path or ``..``, a link or device, a name that
appears twice, a file where another member needs a folder (``runs`` itself, or ``runs/a`` beside ``runs/a/b``), a
run's log stored both as rows and as columns, a columnar log that does not decode, a damaged
file or xz stream, an xz stream whose decoder needs more than :data:`MAX_XZ_MEMORY` bytes (its dictionary size,
read from its header before anything is allocated, :mod:`~layerscale.study.run.bounded_xz`), or an archive past
its stated limits — more than :data:`MAX_MEMBERS` members, a member over
:data:`MAX_MEMBER_BYTES`, or more than :data:`MAX_EXPANDED_BYTES` in all (checked from the member headers before
anything is extracted; a columnar log's decoded size is bounded before it is built,
:mod:`layerscale.study.run.columnar_metrics`), an extended header (pax record, GNU long name) over
:data:`MAX_HEADER_BYTES` or more than :data:`MAX_HEADER_CHAIN` of them before one member, or a sparse member
(``tarfile`` reads those whole into memory, or recursively, while it parses the header, before any of the checks
above sees a member: refused before it reads them): one ``ValueError`` naming the archive and the member; nothing is
extracted into the study folder. ``runs.tar.xz`` itself is refused when it is a link (opened with
``O_NOFOLLOW``). The archive is read forward once per pass (``tarfile`` in stream mode over the bounded xz
reader): once to check every header, once to extract.
"""

from __future__ import annotations

import io
import lzma
import os
import shutil
import stat
import tarfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

from ...train.records.metrics_log import METRICS_FILE
from ..design.grid import RUNS_DIR
from .bounded_xz import BoundedXzReader, XzMemoryLimitError
from .columnar_metrics import COLUMNS_FILE, decode_metrics

__all__ = ["MAX_MEMBERS", "MAX_MEMBER_BYTES", "MAX_EXPANDED_BYTES", "MAX_HEADER_BYTES", "MAX_HEADER_CHAIN",
           "MAX_XZ_MEMORY"]

#: the committed studies hold at most ~1,600 members (312 runs × 5 records); tarfile keeps every header read
#: (about 1 KB each), so the bound also bounds that memory
MAX_MEMBERS = 100_000
#: the largest record of one run (a depth-96 language-model run's metrics.jsonl is about 2 MB)
MAX_MEMBER_BYTES = 256 * 1024 * 1024
#: everything an archive may expand to (the largest committed study's runs/ is about 200 MB)
MAX_EXPANDED_BYTES = 4 * 1024 * 1024 * 1024
#: the largest extended header (pax record or GNU long name) of one member: what --pack writes holds one name of a few
#: hundred bytes
MAX_HEADER_BYTES = 64 * 1024
#: the most extended headers before one member (a pax header and a GNU long name and link are 3)
MAX_HEADER_CHAIN = 8
#: the xz decoder's memory: --pack writes preset 9, a 64 MiB dictionary, which decodes in 65 MiB (the dictionary and
#: the decoder's state); twice that leaves room, and refuses a header asking for up to 4 GiB (tarfile's own "r:xz"
#: would allocate whatever the header asks)
MAX_XZ_MEMORY = 128 * 1024 * 1024



class _HeaderRefused(tarfile.TarError):
    """An extended or sparse header refused by :class:`_BoundedTarInfo` (no ``HeaderError``: ``tarfile`` would take
    that for the end of the archive)."""


class _BoundedTarInfo(tarfile.TarInfo):
    """A member header that ``tarfile`` parses only within bounds: it reads a pax or GNU long-name header's data whole
    into memory (``_proc_pax``, ``_proc_gnulong``: a few kB of xz expand to gigabytes), parses the next header
    recursively (a chain of them is a ``RecursionError``) and reads a sparse map block by block without limit; so a
    header over :data:`MAX_HEADER_BYTES`, a chain longer than :data:`MAX_HEADER_CHAIN` and any sparse member (a
    runs archive holds none) are refused before ``tarfile`` reads them."""

    def _proc_member(self, tar):
        if self.type in (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK, tarfile.XHDTYPE, tarfile.XGLTYPE,
                         tarfile.SOLARIS_XHDTYPE) and self.size > MAX_HEADER_BYTES:
            raise _HeaderRefused(f"member {self.name!r}: an extended header of {self.size} bytes refused; at most "
                                 f"{MAX_HEADER_BYTES} bytes")
        if self.type == tarfile.GNUTYPE_SPARSE:
            self._refuse_sparse()
        depth = getattr(tar, "_layerscale_header_chain", 0)
        if depth >= MAX_HEADER_CHAIN:
            raise _HeaderRefused(f"member {self.name!r}: more than {MAX_HEADER_CHAIN} extended headers before one "
                                 "member refused")
        tar._layerscale_header_chain = depth + 1
        try:
            return super()._proc_member(tar)
        finally:
            tar._layerscale_header_chain = depth

    def _refuse_sparse(self, *args) -> None:
        raise _HeaderRefused(f"member {self.name!r} (a sparse file) refused; a runs archive holds only files and "
                             f"folders under {RUNS_DIR}/")

    _proc_gnusparse_00 = _proc_gnusparse_01 = _proc_gnusparse_10 = _refuse_sparse


def _checked(member: tarfile.TarInfo, where: str) -> tarfile.TarInfo:
    path = PurePosixPath(member.name)
    if (path.is_absolute() or ".." in path.parts or not path.parts or path.parts[0] != RUNS_DIR
            or not (member.isfile() or member.isdir())):
        kind = "file" if member.isfile() else "folder" if member.isdir() else "link or special file"
        raise ValueError(f"{where}: member {member.name!r} ({kind}) refused; a runs archive holds only files and "
                         f"folders under {RUNS_DIR}/")
    return member


def _members(fileobj, where: str) -> list[tarfile.TarInfo]:
    """Every member's header, checked (names, kinds, duplicates and the size limits) before any data is read."""
    members, total, seen = [], 0, set()
    try:
        with _open_tar(fileobj) as tar:
            for member in tar:  # one header at a time: the member count is bounded before the list grows past it
                members.append(_checked(member, where))
                if len(members) > MAX_MEMBERS:
                    raise ValueError(f"{where}: more than {MAX_MEMBERS} members; a runs archive holds at most "
                                     f"{MAX_MEMBERS}")
                name = str(PurePosixPath(member.name))
                if name in seen:
                    raise ValueError(f"{where}: member {member.name!r} appears twice; a runs archive names each file "
                                     "once")
                seen.add(name)
                if member.size > MAX_MEMBER_BYTES:
                    raise ValueError(f"{where}: member {member.name!r} is {member.size} bytes; at most "
                                     f"{MAX_MEMBER_BYTES} bytes a member")
                total += member.size
                if total > MAX_EXPANDED_BYTES:
                    raise ValueError(f"{where}: expands to more than {MAX_EXPANDED_BYTES} bytes; at most "
                                     f"{MAX_EXPANDED_BYTES} in all")
    except _HeaderRefused as exc:
        raise ValueError(f"{where}: {exc}") from None
    except XzMemoryLimitError as exc:  # before LZMAError, of which it is one
        raise ValueError(f"{where}: refused; {exc}") from None
    except (tarfile.TarError, EOFError, OSError, lzma.LZMAError) as exc:  # LZMAError is no OSError
        raise ValueError(f"{where}: not a readable runs archive ({str(exc).splitlines()[0] if str(exc) else exc!r})") \
            from None
    names = {m.name for m in members}
    for name in sorted(names):
        if PurePosixPath(name).name == COLUMNS_FILE and str(PurePosixPath(name).with_name(METRICS_FILE)) in names:
            raise ValueError(f"{where}: member {name!r} refused; the archive also holds its run's {METRICS_FILE} "
                             "(a run's log is stored once, as one or the other)")
    files = {_extracted_name(m.name) for m in members if m.isfile()}
    for member in members:
        inside = next((str(p) for p in PurePosixPath(_extracted_name(member.name)).parents if str(p) in files), None)
        if inside is not None or (member.isfile() and len(PurePosixPath(member.name).parts) < 2):
            raise ValueError(f"{where}: member {member.name!r} refused; "
                             + (f"it lies inside the file member {inside!r}" if inside else "it is a file named "
                                f"{RUNS_DIR}") + f" (a runs archive holds files inside folders under {RUNS_DIR}/)")
    return members


@contextmanager
def _open_tar(fileobj) -> Iterator[tarfile.TarFile]:
    """The runs archive ``fileobj`` (from where it stands) as a ``tarfile`` read forward, its xz stream decoded
    within :data:`MAX_XZ_MEMORY` and its headers within :class:`_BoundedTarInfo`'s bounds."""
    with BoundedXzReader(fileobj, MAX_XZ_MEMORY) as reader, \
            tarfile.open(fileobj=reader, mode="r|", tarinfo=_BoundedTarInfo) as tar:
        yield tar


def _extracted_name(name: str) -> str:
    """The path ``name`` is extracted to: a columnar log becomes its run's ``metrics.jsonl``."""
    path = PurePosixPath(name)
    return str(path.with_name(METRICS_FILE) if path.name == COLUMNS_FILE else path)


def _extract(archive: Path, into: Path) -> None:
    """Every member of ``archive`` under ``into`` (checked first, all of them: a refused archive extracts
    nothing)."""
    where = str(archive)
    with _opened(archive) as f:
        _members(f, where)
        f.seek(0)
        _extract_checked(f, where, into)


@contextmanager
def _opened(archive: Path) -> Iterator[io.BufferedReader]:
    """``archive`` opened for reading with no link followed (``O_NOFOLLOW``) and no FIFO waited on: ``ValueError``
    when it is a link or not a regular file."""
    try:
        fd = os.open(archive, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        kind = "a symbolic link" if archive.is_symlink() else (exc.strerror or type(exc).__name__).lower()
        raise ValueError(f"{archive}: refused ({kind}); expected the study's runs archive, a regular file") from None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{archive}: refused (not a regular file); expected the study's runs archive, a "
                             "regular file")
        yield f


def _extract_checked(f, where: str, into: Path) -> None:
    """The members of the archive open as ``f``, already checked by :func:`_members`, under ``into``."""
    try:
        with _open_tar(f) as tar:
            for member in tar:
                _checked(member, where)
                target = into.joinpath(*PurePosixPath(member.name).parts)
                if member.isdir():
                    target.mkdir(parents=True, exist_ok=True)
                    continue
                target.parent.mkdir(parents=True, exist_ok=True)
                source = tar.extractfile(member)
                if target.name == COLUMNS_FILE:
                    data = decode_metrics(source.read(), f"{where}: member {member.name!r} refused")
                    target.with_name(METRICS_FILE).write_bytes(data)
                    continue
                with open(target, "wb") as out:
                    shutil.copyfileobj(source, out)
    except (tarfile.TarError, EOFError, lzma.LZMAError) as exc:
        raise ValueError(f"{where}: not a readable runs archive ({exc})") from None
