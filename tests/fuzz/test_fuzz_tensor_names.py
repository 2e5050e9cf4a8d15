"""Fuzzing tensor names (issue 30): a state dict with an extra tensor under any name — control characters, ANSI
escapes, line separators, 200,000 characters — given to fold, to every converter and to the resume architecture
check either works or raises one ``ValueError`` whose message is printable and bounded (the name escaped and cut by
:mod:`layerscale.messages`)."""

import pytest
import torch
from fuzz_helpers import assert_safe_message, hostile_names
from hypothesis import given
from hypothesis import strategies as st

from layerscale.interop.convert import convert_state_dict
from layerscale.interop.formats import list_formats
from layerscale.models import create_model
from layerscale.surgery import fold_state_dict
from layerscale.train.state.checkpoint import check_same_architecture


@pytest.fixture(scope="module")
def state():
    model = create_model("vit", img_size=8, patch_size=2, in_chans=1, num_classes=10, embed_dim=16, depth=1,
                         num_heads=2, residual="layerscale")
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _refuses_safely_or_works(call):
    try:
        call()
    except ValueError as exc:
        assert_safe_message(exc)


@given(name=hostile_names, shape=st.sampled_from([(16,), (1,), (0,), (16, 16)]))
def test_fold_names_hostile_keys_safely(state, name, shape):
    crafted = {**state, name: torch.ones(shape)}
    _refuses_safely_or_works(lambda: fold_state_dict(crafted))


@given(name=hostile_names, source=st.sampled_from(["auto", *list_formats()]),
       target=st.sampled_from(list_formats()))
def test_convert_names_hostile_keys_safely(state, name, source, target):
    crafted = {**state, name: torch.ones(3)}
    _refuses_safely_or_works(lambda: convert_state_dict(crafted, source, target))


@given(extra=hostile_names, renamed=hostile_names)
def test_resume_architecture_check_names_hostile_keys_safely(state, extra, renamed):
    crafted = dict(state)
    crafted[renamed] = crafted.pop("head.weight")
    crafted[extra] = torch.ones(1)
    _refuses_safely_or_works(lambda: check_same_architecture("ckpt", crafted, state))
