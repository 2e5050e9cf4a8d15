"""IDX files from outside: a gzip file that expands far past what its header declares, and a header that declares
more than any image set holds, are refused in one line without decompressing or allocating past the header's
(bounded) size."""

from __future__ import annotations

import struct
import tracemalloc
import zlib

import pytest

from layerscale.data import read_idx
from layerscale.data.idx import MAX_IDX_BYTES


def _gzip(header: bytes, zeros: int) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)  # wbits 31: the gzip container
    chunk = b"\0" * (1 << 20)
    body = packer.compress(header) + b"".join(packer.compress(chunk) for _ in range(zeros >> 20))
    return body + packer.flush()


def test_a_gzip_bomb_is_read_only_as_far_as_its_header_declares(tmp_path):
    path = tmp_path / "train-images-idx3-ubyte.gz"
    path.write_bytes(_gzip(struct.pack(">4B3I", 0, 0, 8, 3, 10, 28, 28), 64 << 20))  # 64 MiB of zeros, ~64 kB
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match=r"trailing data: more than 7856 bytes once decompressed, but the "
                                             r"header's shape \(10, 28, 28\) needs 7856"):
            read_idx(path, 3)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 << 20, f"{peak} bytes allocated to refuse a file whose header declares 7840"


@pytest.mark.parametrize("gz", [False, True])
def test_a_header_declaring_more_than_any_image_set_is_refused_before_reading(tmp_path, gz):
    header = struct.pack(">4B3I", 0, 0, 8, 3, 1 << 20, 1 << 10, 1 << 10)  # 1 TiB of pixels
    path = tmp_path / "imgs"
    path.write_bytes(_gzip(header, 1 << 20) if gz else header + bytes(1 << 10))
    with pytest.raises(ValueError, match=rf"imgs: the header's shape \(1048576, 1024, 1024\) needs {1 << 40} bytes; "
                                         rf"an IDX file of images or labels holds at most {MAX_IDX_BYTES} bytes"):
        read_idx(path, 3)
