"""The columnar metric log of a packed study: decoding gives back the log byte for byte, whatever its lines; the
diagnostics records are stored as one series per leaf; a document that is not one is refused in one line."""

from __future__ import annotations

import json
import lzma
import math

import pytest

from layerscale.study.run.columnar_metrics import decode_metrics, encode_metrics


def _diagnostics(step: int, blocks: int = 3, scale: float | None = 1e-4) -> dict:
    return {"split": "diagnostics", "step": step, "blocks": [
        {"name": f"blocks.{i}", "stream_rms": 1.0 + step / 7 + i, "grad_norm": 0.25 / step,
         "attn": {"scale_kind": "channel", "scale_mean": None if scale is None else scale * step, "ratio": 0.5},
         "mlp": None} for i in range(blocks)]}


def _log(*records) -> bytes:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in records).encode("utf-8")


CASES = {
    "diagnostics and other splits": _log(_diagnostics(1), {"split": "train", "step": 1, "loss": 2.0},
                                         _diagnostics(2), {"split": "eval", "step": 2, "loss": 1.5}, _diagnostics(3)),
    "two shapes (another block count, a null scale)": _log(_diagnostics(1), _diagnostics(2, blocks=2),
                                                           _diagnostics(3, scale=None), _diagnostics(4)),
    "int, float and bool leaves stay apart": _log({"split": "diagnostics", "step": 1, "v": 1},
                                                  {"split": "diagnostics", "step": 2, "v": 1.0},
                                                  {"split": "diagnostics", "step": 3, "v": True}),
    "non-finite values as strings and as literals": _log(
        {"split": "diagnostics", "step": 1, "v": "nan"}, {"split": "diagnostics", "step": 2, "v": math.inf},
        {"split": "diagnostics", "step": 3, "v": -math.inf}, {"split": "diagnostics", "step": 4, "v": math.nan}),
    "a line cut short and no final newline": _log(_diagnostics(1))
    + b'{"split": "diagnostics", "step": 2, "blo',
    "a diagnostics line not written as json.dumps writes it": _log(_diagnostics(1))
    + b'{"split":"diagnostics","step":2}\n',
    "unicode and blank lines": _log(_diagnostics(1), "", {"split": "train", "note": "γ → 0 ✓"}),
}


@pytest.mark.parametrize("data", CASES.values(), ids=CASES.keys())
def test_decoding_gives_back_the_log_byte_for_byte(data):
    document = encode_metrics(data)
    assert document is not None
    assert decode_metrics(document, "test") == data
    assert encode_metrics(data) == document  # deterministic


def test_a_log_with_no_diagnostics_record_or_not_utf8_is_not_stored_column_wise():
    assert encode_metrics(_log({"split": "train", "step": 1, "loss": 2.0})) is None
    assert encode_metrics(b"\xff\xfe" + _log(_diagnostics(1))) is None
    assert encode_metrics(b"") is None


def test_each_varying_leaf_is_one_series_and_constant_leaves_are_stored_once():
    data = _log(*[_diagnostics(step) for step in range(1, 6)])
    document = json.loads(encode_metrics(data))
    (group,) = document["groups"]
    assert document["lines"] == [0, 0, 0, 0, 0, ""]
    # leaves in walk order: split, step, then per block name, stream_rms, grad_norm, scale_kind, scale_mean, ratio, mlp
    assert group["varying"] == [1] + [2 + 7 * block + leaf for block in range(3) for leaf in (1, 2, 4)]
    assert group["constants"][:9] == ["diagnostics", None, "blocks.0", None, None, "channel", None, 0.5, None]
    assert group["columns"][0] == [1, 2, 3, 4, 5]  # the step
    assert group["columns"][1] == [_diagnostics(s)["blocks"][0]["stream_rms"] for s in range(1, 6)]


def test_the_columnar_document_compresses_better_than_the_log():
    records = [_diagnostics(step, blocks=24) for step in range(1, 201)]
    for record in records:
        for i, block in enumerate(record["blocks"]):
            block["stream_rms"] = float(f"{math.sin(record['step'] * (i + 1)) + 2:.4g}")
    data = _log(*records)
    assert len(lzma.compress(encode_metrics(data), preset=9)) < 0.9 * len(lzma.compress(data, preset=9))


def _document(**change) -> bytes:
    document = json.loads(encode_metrics(_log(_diagnostics(1), _diagnostics(2))))
    for key, value in change.items():
        if key in document:
            document[key] = value
        else:
            document["groups"][0][key] = value
    return json.dumps(document).encode("utf-8")


@pytest.mark.parametrize("document", [
    b"not json", b"[1, 2]", _document(format="something else"), _document(version=2), _document(lines=[0, 0, 1]),
    _document(lines=[0]), _document(lines=[0, 0, 0]), _document(lines=[True, 0]), _document(columns=[[1, 2]]),
    _document(constants=[None]), _document(varying=[10_000] + list(range(2, 11))),
    _document(constants={str(i): None for i in range(23)}), _document(lines="00"),
], ids=["not-json", "not-an-object", "format", "version", "unknown-group", "too-few-rows", "too-many-rows",
        "bool-index", "columns-missing", "constants-short", "leaf-out-of-range", "constants-not-a-list",
        "lines-not-a-list"])
def test_a_document_that_is_not_a_columnar_log_is_refused_in_one_line(document):
    with pytest.raises(ValueError, match=r"^runs/x/metrics.columns.json: not a columnar metrics log \(") as error:
        decode_metrics(document, "runs/x/metrics.columns.json")
    assert "\n" not in str(error.value)
