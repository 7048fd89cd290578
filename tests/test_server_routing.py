"""OPTIONS and Allow: every path names all of its methods, whichever method was refused."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest
from serving import running

from toolkit.server import ServerSettings, create_app, openapi_document
from toolkit.site import LocalSite


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("routing") / "site.sqlite"
    LocalSite(path, "alpha").close()
    with running(create_app(path, settings=ServerSettings())) as base:
        yield base


def _documented_allow(path: str) -> set[str]:
    methods = {m.upper() for m in openapi_document()["paths"][path]}
    return methods | ({"HEAD"} if "GET" in methods else set())


@pytest.mark.parametrize("path", sorted(openapi_document()["paths"]))
def test_options_answers_every_method_of_the_path(url: str, path: str) -> None:
    concrete = path.replace("{id}", "1")
    with httpx.Client(base_url=url) as client:
        answer = client.options(concrete)
        refused = client.request("DELETE", concrete, headers={"X-Site": "alpha"})
    assert answer.status_code == 204 and answer.content == b""
    allow = answer.headers["allow"]
    assert allow == ", ".join(sorted(_documented_allow(path)))
    assert refused.status_code == 405
    assert refused.headers["allow"] == allow
    assert refused.json() == {"status": 405, "message": "Method Not Allowed"}


def test_a_path_with_get_and_post_allows_both(url: str) -> None:
    with httpx.Client(base_url=url) as client:
        refused = client.put("/api/json/item", headers={"X-Site": "alpha"}, json={})
    assert refused.status_code == 405
    assert refused.headers["allow"] == "GET, HEAD, OPTIONS, POST"
