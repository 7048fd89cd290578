"""What the remote face makes of an answer of the wrong shape: a RemoteError naming the
request, never a crash further on (the JSON shapes are typed where they enter)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from toolkit.errors import RemoteError
from toolkit.remote.client import json_body, json_object, json_records


def _answer(json: object = None, content: bytes | None = None) -> httpx.Response:
    request = httpx.Request("GET", "http://127.0.0.1:1/api/json/item")
    return httpx.Response(200, request=request, json=json, content=content)


def test_an_object_and_records_pass_through() -> None:
    assert json_object(_answer(json={"id": 1})) == {"id": 1}
    assert json_records(_answer(json=[{"id": 1}, {"id": 2}])) == [{"id": 1}, {"id": 2}]
    assert json_body(_answer(json=1700000000)) == 1700000000


@pytest.mark.parametrize(
    ("reader", "answer", "message"),
    [
        (
            json_object,
            {"json": [1, 2]},
            "GET /api/json/item: the answer is a JSON list, not an object",
        ),
        (
            json_records,
            {"json": {"id": 1}},
            "GET /api/json/item: the answer is not a JSON array of objects",
        ),
        (
            json_records,
            {"json": [1]},
            "GET /api/json/item: the answer is not a JSON array of objects",
        ),
        (json_object, {"content": b"<html>"}, "GET /api/json/item: the answer is not JSON"),
    ],
)
def test_a_wrong_shape_is_a_remote_error_naming_the_request(
    reader: Callable[[httpx.Response], object], answer: dict[str, Any], message: str
) -> None:
    with pytest.raises(RemoteError) as caught:
        reader(_answer(**answer))
    assert str(caught.value) == message
    assert caught.value.status == 200
