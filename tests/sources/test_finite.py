"""The non-finite-weight check names the first offending tensor, for every floating dtype (float8 included, which
has no ``isfinite`` of its own), and passes over integer tensors."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from layerscale.sources.finite import check_finite_model, check_finite_tensors, first_nonfinite


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64,
                                   torch.float8_e4m3fn, torch.float8_e5m2])
def test_first_nonfinite_in_every_floating_dtype(dtype):
    bad = torch.tensor([1.0, float("nan"), 2.0, float("inf") if dtype != torch.float8_e4m3fn else float("nan")])
    named = [("ok", torch.ones(3, dtype=dtype)), ("ids", torch.arange(4)), ("bad", bad.to(dtype)),
             ("later", torch.tensor([float("nan")]))]
    assert first_nonfinite(named) == ("bad", 2)
    assert first_nonfinite(named[:2]) is None


def test_model_and_state_dict_refusals_name_the_tensor():
    model = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
    check_finite_model(model)
    with torch.no_grad():
        model[1].running_var[1] = float("inf")
    with pytest.raises(ValueError, match=r"^src: Sequential: buffer '1\.running_var' holds 1 NaN or infinite"):
        check_finite_model(model, "src")
    with pytest.raises(ValueError, match=r"^w\.safetensors: tensor '1\.running_var' holds 1 NaN or infinite"):
        check_finite_tensors(model.state_dict(), "w.safetensors")
