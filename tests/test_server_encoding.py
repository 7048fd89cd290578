"""The server's JSON answers (toolkit.server.encoding): orjson, the standard encoder's values."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolkit.server.encoding import JsonResponse, dumps

VALUES = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(st.characters(exclude_categories=["Cs"])),
    lambda inner: (
        st.lists(inner, max_size=5)
        | st.dictionaries(st.text(st.characters(exclude_categories=["Cs"])) | st.integers(), inner)
    ),
    max_leaves=30,
)


def standard(value: object) -> bytes:
    """Starlette's JSONResponse's encoding, which the server used before."""
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return text.encode("utf-8")


@given(value=VALUES)
@settings(max_examples=400, deadline=None)
def test_answers_hold_the_values_the_standard_encoder_wrote(value: object) -> None:
    encoded = dumps(value)
    assert json.loads(encoded) == json.loads(standard(value))
    # Text and member names alike: UTF-8 as it is, \\u escapes only where the standard had.
    assert encoded.count(b"\\u") == standard(value).count(b"\\u")


def test_bytes_are_the_standard_encoders_but_for_small_floats() -> None:
    value = {1: "é", "list": [1, 2.5, None, True, 1e16, 0.0001], "nested": {"a": []}}
    assert (
        dumps(value)
        == standard(value)
        == '{"1":"é","list":[1,2.5,null,true,1e+16,0.0001],"nested":{"a":[]}}'.encode()
    )
    assert dumps(1e-7) == b"1e-7" and standard(1e-7) == b"1e-07"


def test_what_orjson_refuses_goes_the_standard_way() -> None:
    assert dumps({"big": 2**70}) == standard({"big": 2**70}) == b'{"big":1180591620717411303424}'
    # A lone surrogate cannot be UTF-8: an error, as before (the server answers 500).
    with pytest.raises(UnicodeEncodeError):
        dumps({"x": "\ud800"})
    with pytest.raises(TypeError):
        dumps({"x": {1, 2}})


def test_a_response_is_json_with_its_length() -> None:
    response = JsonResponse({"status": 200, "name": "Ōtautahi"}, status_code=201)
    assert response.status_code == 201
    assert response.headers["content-type"] == "application/json"
    assert response.body == '{"status":200,"name":"Ōtautahi"}'.encode()
    assert response.headers["content-length"] == str(len(response.body))
