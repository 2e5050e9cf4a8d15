"""Fixtures the performance tests share."""

import pytest
import torch


@pytest.fixture
def saved_storages():
    """``saved_storages(fn)``: the storages autograd saves for the backward while ``fn()`` runs, as
    ``{data pointer: bytes}`` (each storage once, however many tensors view it)."""

    def measure(fn) -> dict[int, int]:
        seen = {}

        def pack(t):
            seen[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
            return t

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            fn()
        return seen

    return measure
