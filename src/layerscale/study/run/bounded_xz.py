"""An xz file someone else made, decompressed within a memory bound.

``tarfile.open(mode="r:xz")`` and ``lzma.open`` offer no memory limit, and liblzma's decoder allocates what the
stream's header asks for: the LZMA2 dictionary (up to 4 GiB; ``xz -9`` writes 64 MiB, ``xz --lzma2=dict=1536MiB``
1.5 GiB), chosen by whoever wrote the file. :class:`BoundedXzReader` reads the stream through
``lzma.LZMADecompressor(format=FORMAT_XZ, memlimit=...)``, which refuses such a header before allocating
(liblzma's ``LZMA_MEMLIMIT_ERROR``), and raises :class:`XzMemoryLimitError` naming the limit. Otherwise it reads
like ``lzma.LZMAFile``: concatenated streams are read one after another, anything after the last stream that is
not one is ignored, and a stream cut short is an ``EOFError``. It reads forward only (not seekable): ``tarfile``
reads it in stream mode (``"r|"``).
"""

from __future__ import annotations

import io
import lzma
from typing import BinaryIO

__all__ = ["BoundedXzReader", "XzMemoryLimitError"]

#: compressed bytes read from the file at a time
_CHUNK = 64 * 1024


class XzMemoryLimitError(lzma.LZMAError):
    """The xz stream's decoder would need more memory than the limit (its dictionary is larger)."""


class BoundedXzReader(io.RawIOBase):
    """The decompressed bytes of the xz file ``fileobj`` (read from where it stands; not closed with the reader),
    decoded within ``memlimit`` bytes of decoder memory (module docstring)."""

    def __init__(self, fileobj: BinaryIO, memlimit: int) -> None:
        super().__init__()
        self._file, self._memlimit = fileobj, memlimit
        self._decompressor = self._new_decompressor()
        self._done = False

    def _new_decompressor(self) -> lzma.LZMADecompressor:
        return lzma.LZMADecompressor(format=lzma.FORMAT_XZ, memlimit=self._memlimit)

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        with memoryview(buffer) as view, view.cast("B") as target:
            data = self.read(len(target))
            target[:len(data)] = data
        return len(data)

    def read(self, size: int = -1) -> bytes:
        if size < 0:
            return self.readall()
        if not size or self._done:
            return b""
        try:
            data = self._decompressed(size)
        except lzma.LZMAError as exc:
            if _past_limit(exc):
                raise XzMemoryLimitError(f"its xz stream needs more than {self._memlimit} bytes "
                                         f"({self._memlimit / 2**20:g} MiB) of decoder memory (the dictionary size "
                                         "its header asks for); at most that") from None
            raise
        self._done = not data
        return data

    def _decompressed(self, size: int) -> bytes:
        """At most ``size`` decompressed bytes; ``b""`` at the end (as ``lzma.LZMAFile``'s reader)."""
        while True:
            if self._decompressor.eof:  # the end of one stream: another may follow
                raw = self._decompressor.unused_data or self._file.read(_CHUNK)
                if not raw:
                    return b""
                self._decompressor = self._new_decompressor()
                try:
                    data = self._decompressor.decompress(raw, size)
                except lzma.LZMAError as exc:
                    if _past_limit(exc):
                        raise
                    return b""  # trailing bytes that are no stream are ignored, as lzma.LZMAFile does
            else:
                raw = b""
                if self._decompressor.needs_input:
                    raw = self._file.read(_CHUNK)
                    if not raw:
                        raise EOFError("Compressed file ended before the end-of-stream marker was reached")
                data = self._decompressor.decompress(raw, size)
            if data:
                return data


def _past_limit(error: lzma.LZMAError) -> bool:
    """Whether ``error`` is liblzma's ``LZMA_MEMLIMIT_ERROR`` ("Memory usage limit exceeded" / "... reached")."""
    return "memory usage limit" in str(error).lower()
