"""The bounded JSON loader of request bodies and JSON parameters."""

from __future__ import annotations

import pytest

from toolkit.errors import OptionError
from toolkit.query.safejson import MAX_JSON_DEPTH, loads


def test_ordinary_json_is_read_as_json_loads_reads_it() -> None:
    body = (
        b'{"a": [1, -2.5, "t\\u00e9", {"b": null}], "c": true, '
        b'"\\ud83d\\ude00": 9223372036854775807}'
    )
    assert loads(body, "the body") == {
        "a": [1, -2.5, "té", {"b": None}],
        "c": True,
        "\U0001f600": 2**63 - 1,
    }
    assert loads(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH, "the body") is not None


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"a": {"b": [1, 9223372036854775808]}}', "$.a.b[1]: the number 9223372036854775808"),
        (b'{"a b": NaN}', '$["a b"]: the number NaN is not a number'),
        (b'{"x": -Infinity}', "$.x: the number -Infinity"),
        (b'{"x": 1e400}', "$.x: the number 1e400 is not a finite number"),
        (b'{"x": 1' + b"0" * 5000 + b"}", "$.x: the number 1000"),
        (b'{"x": ["ok", "\\udc00"]}', "$.x[1] holds a lone surrogate"),
        (b'{"\\ud800x": 1}', "member name holds a lone surrogate"),
        (b"[" * 65 + b"]" * 65, "nested more than 64 deep at $[0]"),
        (b"[" * 100_000 + b"]" * 100_000, "nested more than 64 deep"),
    ],
)
def test_refused_json_is_400_naming_the_json_path(raw: bytes, message: str) -> None:
    with pytest.raises(OptionError) as caught:
        loads(raw, "the body")
    assert str(caught.value).startswith("the body")
    assert message in str(caught.value) and len(str(caught.value)) < 200
