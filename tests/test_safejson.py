"""The bounded JSON loader of request bodies and JSON parameters."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.errors import OptionError
from toolkit.query.filters import INT64_MAX, INT64_MIN
from toolkit.query.safejson import _NOT_QUICK, MAX_JSON_DEPTH, _quick, loads, standard_loads


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


# JSON values as request bodies hold them: whole numbers within 64 bits, finite floats, text
# with any characters but lone surrogates, nested arrays and objects.
TEXT = st.text(st.characters(exclude_categories=["Cs"]))
JSON_VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=INT64_MIN, max_value=INT64_MAX)
    | st.floats(allow_nan=False, allow_infinity=False)
    | TEXT,
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=30,
)


@given(value=JSON_VALUES, ascii_only=st.booleans())
@settings(max_examples=400, deadline=None)
def test_the_quick_reader_answers_as_the_standard_one(value: object, ascii_only: bool) -> None:
    raw = json.dumps(value, ensure_ascii=ascii_only).encode("utf-8")
    quick, standard = loads(raw, "the body"), standard_loads(raw, "the body")
    # repr: the same types too (1 is not 1.0), and -0.0 kept apart from 0.0
    assert repr(quick) == repr(standard)
    assert repr(loads(raw.decode("utf-8"), "the body")) == repr(standard)


def test_a_lookup_body_is_read_the_quick_way() -> None:
    """The quick reader is used for the bodies it is for (else the test above proves little)."""
    body = json.dumps(
        {
            "options": {"maxRank": 3},
            "query": [{"code": n, "str": f"{n} MAIN ST"} for n in range(1000)],
        }
    ).encode()
    assert _quick(body) == standard_loads(body, "the body")
    assert _quick(b"[" * MAX_JSON_DEPTH + b"]" * MAX_JSON_DEPTH) is not _NOT_QUICK
    assert _quick(b"[" * (MAX_JSON_DEPTH + 1) + b"]" * (MAX_JSON_DEPTH + 1)) is _NOT_QUICK
    # A run of 16 digits goes the standard way, even inside text.
    assert _quick(b'{"a": "1234567890123456"}') is _NOT_QUICK


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        # orjson reads these as a whole number and a float; the standard reader refuses both.
        (b'{"x": 18446744073709551615}', "$.x: the number 18446744073709551615 is out of range"),
        (b'{"x": [100000000000000000000]}', "$.x[0]: the number 100000000000000000000 is out"),
        (b'{"x": 0.' + b"1" * 120 + b"}", "$.x: the number 0.1111"),
        (b'\xef\xbb\xbf{"x": "\\ud800"}', "$.x holds a lone surrogate"),
    ],
)
def test_what_orjson_would_take_is_refused_as_before(raw: bytes, message: str) -> None:
    with pytest.raises(OptionError) as caught:
        loads(raw, "the body")
    assert message in str(caught.value)


def test_numbers_the_standard_reader_takes_are_read_alike() -> None:
    raw = b"[0.12345678901234567890, -9223372036854775808, 1e-400, 12345678901234567]"
    assert loads(raw, "the body") == [0.12345678901234568, -(2**63), 0.0, 12345678901234567]
