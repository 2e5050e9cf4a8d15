"""Hypothesis strategies for what a shared study folder holds (issue 59): tar members of a runs archive, column-wise
metric logs and study records. Whatever they hold, each reader either reads it or refuses it with one line (a
``ValueError``); never another exception, never a member written outside the folder, never an unbounded output."""

import io
import json
import tarfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from layerscale.study.run.archive import _extract
from layerscale.study.run.columnar_metrics import MAX_DECODED_BYTES, decode_metrics, encode_metrics
from layerscale.study.run.worker import read_status
from layerscale.train.records.metrics_log import read_metrics
from layerscale.untrusted_files import parse_json

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70),
                      st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                          max_leaves=20)
member_name = st.one_of(st.sampled_from(["runs/a/metrics.jsonl", "runs/a/study_status.json", "runs/b/config.yaml",
                                         "runs/a/metrics.columns.json", "/etc/x", "runs/../x", "other/x", "runs",
                                         "runs/a/../../x", ""]),
                        st.text(alphabet="abc/._", min_size=1, max_size=12))
member_kind = st.sampled_from([tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE,
                               tarfile.CHRTYPE])


def _one_line_value_error(call) -> None:
    try:
        call()
    except ValueError as exc:
        assert "\n" not in str(exc).strip()


@given(st.lists(st.tuples(member_name, member_kind, st.binary(max_size=64)), max_size=6))
def test_any_tar_members_extract_inside_the_folder_or_are_refused(tmp_path_factory, members):
    folder = tmp_path_factory.mktemp("archive")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:xz") as tar:
        for name, kind, data in members:
            info = tarfile.TarInfo(name or "x")
            info.type = kind
            if kind == tarfile.REGTYPE:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
            else:
                info.linkname = "/etc/passwd"
                tar.addfile(info)
    archive = folder / "runs.tar.xz"
    archive.write_bytes(buffer.getvalue())
    into = folder / "into"
    into.mkdir()
    _one_line_value_error(lambda: _extract(archive, into))
    for path in folder.rglob("*"):
        assert path == archive or into in path.parents or path == into, path
        assert not path.is_symlink()


@given(json_value)
def test_any_columnar_document_decodes_boundedly_or_is_refused(value):
    document = json.dumps({"format": "layerscale.metrics-columns", "version": 1, "groups": value, "lines": value}
                          if not isinstance(value, dict) else value).encode()

    def decode():
        assert len(decode_metrics(document, "fuzz")) <= MAX_DECODED_BYTES

    _one_line_value_error(decode)


@given(st.lists(st.dictionaries(st.sampled_from(["step", "split", "loss", "diag"]), json_leaf, max_size=4),
                min_size=1, max_size=5))
def test_a_diagnostics_log_round_trips_through_columns(records):
    lines = [json.dumps({"split": "diagnostics", **r}) for r in records]
    data = "\n".join(lines).encode()
    encoded = encode_metrics(data)
    if encoded is not None:
        assert decode_metrics(encoded, "fuzz") == data


@given(st.one_of(json_value.map(lambda v: json.dumps(v).encode()), st.binary(max_size=64)))
def test_any_status_or_metrics_record_reads_or_is_one_line(tmp_path_factory, data):
    run = tmp_path_factory.mktemp("run")
    (run / "study_status.json").write_bytes(data)
    _one_line_value_error(lambda: read_status(run))
    (run / "metrics.jsonl").write_bytes(data + b"\n" + b'{"step": 1}\n')
    _one_line_value_error(lambda: read_metrics(run / "metrics.jsonl"))
    _one_line_value_error(lambda: parse_json(data, "fuzz"))


def test_the_fuzz_module_exercises_refusals():
    """The strategies above reach the refusing branches (a check that these tests can fail)."""
    try:
        parse_json(b"[" * 100 + b"]" * 100, "x")
    except ValueError as exc:
        assert "nested too deep" in str(exc)
    else:
        raise AssertionError("deep nesting was not refused")
    assert Path(__file__).name.startswith("test_fuzz")
