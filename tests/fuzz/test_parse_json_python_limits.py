"""What Python's JSON reader cannot hold (nesting past its recursion, an integer literal past its int-string
limit) is one :class:`UntrustedFileError` from :func:`parse_json` naming the file, of a kind callers can tell apart
from a record cut short (:class:`NotJSONError`)."""

import sys

import pytest

from layerscale.untrusted_files import JSONTooDeepError, NotJSONError, UntrustedFileError, parse_json

DEEP = "[" * 200_000 + "]" * 200_000
BIG_INT = '{"a": ' + "7" * 100_000 + "}"


@pytest.mark.parametrize("data", [DEEP, DEEP.encode()])
def test_nesting_past_the_recursion_limit_is_too_deep(data):
    with pytest.raises(JSONTooDeepError, match=r"^f\.json: refused \(nested too deep\); expected at most 32 levels$"):
        parse_json(data, "f.json", expected=object)


@pytest.mark.parametrize("finite", [True, False])
def test_an_integer_past_the_int_string_limit_is_named_not_advised(finite):
    with pytest.raises(UntrustedFileError) as info:
        parse_json(BIG_INT.encode(), "f.json", finite=finite)
    text = str(info.value)
    assert text.startswith("f.json: refused (an integer of more than ") and "int-string limit" in text, text
    assert str(sys.get_int_max_str_digits()) in text and "set_int_max_str_digits" not in text and "\n" not in text
    assert not isinstance(info.value, (NotJSONError, JSONTooDeepError))


def test_what_is_no_json_text_is_not_json_and_a_number_json_lacks_is_not():
    with pytest.raises(NotJSONError, match=r"^f\.json: not valid JSON \("):
        parse_json('{"a": 1', "f.json")
    with pytest.raises(NotJSONError):
        parse_json(b"\xff{}", "f.json")
    with pytest.raises(UntrustedFileError, match="NaN is not a JSON number") as info:
        parse_json('{"a": NaN}', "f.json")
    assert not isinstance(info.value, NotJSONError)


def test_text_and_bytes_parse_alike():
    assert parse_json('{"a": [1, NaN]}', "f", finite=False)["a"][0] == 1
    assert parse_json(b'{"a": 1}', "f") == parse_json('{"a": 1}', "f") == {"a": 1}
