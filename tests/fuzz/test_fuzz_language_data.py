"""Hypothesis strategies for a user's language data (issue 55): whatever bytes a text or JSONL file holds, and
whatever a model folder's ``config.json`` holds, the readers either read it or refuse it with one line (a
``ValueError``); never another exception."""

import json

from hypothesis import given
from hypothesis import strategies as st

from layerscale.data.corpus_file import read_corpus
from layerscale.sources.model_folder import folder_kind

json_leaf = st.one_of(st.none(), st.booleans(), st.integers(-2 ** 70, 2 ** 70), st.floats(), st.text(max_size=8))
json_value = st.recursive(json_leaf, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                              st.dictionaries(st.text(max_size=6), inner, max_size=4)),
                          max_leaves=20)
line = st.one_of(json_value.map(lambda v: json.dumps(v).encode()), st.binary(max_size=24),
                 st.text(max_size=24).map(str.encode))


def _one_line_value_error(call):
    try:
        return call()
    except ValueError as exc:
        assert "\n" not in str(exc).strip()
        return None


@given(st.lists(line, max_size=6), st.sampled_from(["data.txt", "data.jsonl"]), st.one_of(st.none(), st.just("text")))
def test_any_data_file_is_read_or_refused_in_one_line(tmp_path_factory, lines, name, field):
    path = tmp_path_factory.mktemp("data") / name
    path.write_bytes(b"\n".join(lines))
    text = _one_line_value_error(lambda: read_corpus(path, field))
    assert text is None or (isinstance(text, str) and text.strip())


@given(json_value.map(lambda v: json.dumps(v).encode()) | st.binary(max_size=40))
def test_any_config_json_is_classified_or_refused_in_one_line(tmp_path_factory, content):
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_bytes(content)
    found = _one_line_value_error(lambda: folder_kind(folder))
    assert found is None or found[0] in (None, "layerscale", "transformers", "timm")
