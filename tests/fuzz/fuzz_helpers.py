"""The property every loader must keep, and the strategies that build hostile inputs.

Property: reading any file gives either a correct load (a dict of named tensors) or exactly one ``ValueError``
with a one-line message (``FileNotFoundError`` only for a missing path) — never another exception type, never a
partial output file, and never code execution: a pickle payload would create ``marker``, which must never appear.
"""

from __future__ import annotations

import builtins
import io
import json
import os
import pickle
import struct
from pathlib import Path

import torch
from hypothesis import strategies as st

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool]


def check_loads_or_refuses(load, path: Path, marker: Path):
    """Call ``load(path)``; return its result or ``None`` after a one-line ``ValueError``. Any other exception
    propagates (Hypothesis reports it); the marker file must not exist afterwards."""
    try:
        result = load(path)
    except ValueError as exc:
        message = str(exc)
        assert message and "\n" not in message, f"ValueError message is not one line: {message!r}"
        result = None
    assert not marker.exists(), "a pickle payload ran during loading"
    return result


def assert_state_dict(result) -> None:
    assert isinstance(result.tensors, dict)
    assert all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in result.tensors.items())


# ---- tensors and state dicts ------------------------------------------------------------------------------------
@st.composite
def tensors(draw, max_dims: int = 3, max_side: int = 4) -> torch.Tensor:
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.lists(st.integers(0, max_side), max_size=max_dims))
    seed = draw(st.integers(0, 2**16))
    values = torch.randn(shape, generator=torch.Generator().manual_seed(seed)) * 10
    return values.to(dtype)


keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz._0123456789", min_size=1, max_size=24)
state_dicts = st.dictionaries(keys, tensors(), min_size=1, max_size=5)


def safetensors_bytes(state_dict: dict[str, torch.Tensor]) -> bytes:
    from safetensors.torch import save

    return save({k: v.contiguous() for k, v in state_dict.items()})


def torch_save_bytes(obj) -> bytes:
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


# ---- JSON headers -----------------------------------------------------------------------------------------------
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(allow_nan=False),
                         st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                  st.dictionaries(st.text(max_size=6), inner,
                                                                                  max_size=4)), max_leaves=12)
entries = st.fixed_dictionaries({}, optional={
    "dtype": st.one_of(st.sampled_from(["F32", "F16", "BF16", "I64", "U8", "BOOL", "F8_E4M3", "X"]), json_values),
    "shape": st.one_of(st.lists(st.integers(-3, 2**40), max_size=3), json_values),
    "data_offsets": st.one_of(st.lists(st.integers(-5, 2**64), max_size=3), json_values),
})
headers = st.dictionaries(st.one_of(keys, st.just("__metadata__")), st.one_of(entries, json_values), max_size=4)


def with_header(header_bytes: bytes, body: bytes, declared_length: int | None = None) -> bytes:
    length = len(header_bytes) if declared_length is None else declared_length
    return struct.pack("<Q", length % 2**64) + header_bytes + body


def header_json(header) -> bytes:
    return json.dumps(header).encode()


# ---- pickles ----------------------------------------------------------------------------------------------------
plain_objects = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8), st.binary(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.tuples(inner, inner),
                            st.dictionaries(st.text(max_size=6), inner, max_size=4)),
    max_leaves=10)


class Payload:
    """Unpickling this calls ``how(marker)``: it creates the marker file if the loader ever executes it."""

    def __init__(self, marker: Path, how: str) -> None:
        self.marker, self.how = str(marker), how

    def __reduce__(self):
        if self.how == "open":
            return (builtins.open, (self.marker, "w"))
        if self.how == "system":
            return (os.system, (f"touch {self.marker}",))
        return (eval, (f"open({self.marker!r}, 'w')",))


def payload_pickle(marker: Path, how: str, protocol: int, nested: bool) -> bytes:
    obj = Payload(marker, how)
    if nested:
        obj = {"model": {"w": torch.zeros(2), "x": obj}}
    return pickle.dumps(obj, protocol=protocol)


# ---- hostile text: names and values from a file -----------------------------------------------------------------
def assert_safe_message(exc: BaseException, limit: int = 4000) -> None:
    """An error message fit for one terminal line: no control or other non-printable character (a newline would
    forge a line, an ESC would drive the terminal) and bounded, whatever the input held."""
    message = str(exc)
    assert message, f"empty {type(exc).__name__}"
    assert message.isprintable(), f"non-printable character in {message[:300]!r}"
    assert len(message) <= limit, f"{len(message)}-character message: {message[:300]!r}"


#: Names as a crafted file may hold them: control characters, ANSI escapes, line separators, any code point, and
#: names of up to 200,000 characters.
hostile_names = st.one_of(
    st.text(min_size=1, max_size=40),
    st.lists(st.sampled_from(["\n", "\r", "\x1b", "[31m", "\u2028", "\x00", "a", ".", "gamma", "blocks.0."]),
             min_size=1, max_size=12).map("".join),
    st.builds(lambda base, n, tail: base + "x" * n + tail, st.sampled_from(["blocks.0.", "", "\x1b[2J"]),
              st.integers(100, 200_000), st.sampled_from(["", ".gamma", ".weight", "\n"])),
)

# ---- training-state fields ----------------------------------------------------------------------------------------
#: Field paths of ``train_state.pt`` (``.`` descends into a mapping) that a resumed run reads.
TRAIN_STATE_FIELDS = ["step", "epoch", "batch_in_epoch", "elapsed", "world_size", "total_steps", "model",
                      "model_args", "last_eval", "test_eval", "callbacks", "early_stopping", "early_stopping.best",
                      "early_stopping.best_step", "early_stopping.stopped_step",
                      "early_stopping.evals_without_improvement", "optimizer", "optimizer.state",
                      "optimizer.param_groups", "scheduler", "scheduler.last_epoch", "rng", "rng.0", "rng.0.cpu",
                      "rng.0.cuda"]

#: Values a crafted field may hold: anything ``torch.load(weights_only=True)`` can give back.
field_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2**70, 2**70), st.sampled_from([0, 1, 43, 44, 45, 10**6, -1]),
    st.floats(), st.text(max_size=20), hostile_names,
    st.lists(st.integers(-3, 3), max_size=3), st.dictionaries(st.one_of(st.text(max_size=5), st.integers()),
                                                             st.integers(), max_size=3),
    st.builds(lambda n, dtype: torch.zeros(n, dtype=dtype), st.integers(0, 8),
              st.sampled_from([torch.uint8, torch.float32, torch.int64])),
)

# ---- config trees -------------------------------------------------------------------------------------------------
config_scalars = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70),
                           st.integers(10**300, 10**400), st.floats(), st.text(max_size=12), hostile_names)
config_keys = st.one_of(st.sampled_from(["model", "data", "optim", "run", "diagnostics", "name", "lr", "depth",
                                         "embed_dim", "mlp_ratio", "batch_size", "seed", "epochs"]),
                        st.text(max_size=8), st.integers(-3, 3), hostile_names)
config_trees = st.recursive(config_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(config_keys, inner, max_size=4)), max_leaves=30)


def nested(levels: int, leaf=1):
    """``[[...[leaf]...]]`` ``levels`` deep, built without recursion."""
    value = leaf
    for _ in range(levels):
        value = [value]
    return value
