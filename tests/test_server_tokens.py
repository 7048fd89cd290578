"""Token checks once a token's signature is remembered (toolkit.server.auth.TokenService)."""

from __future__ import annotations

import pytest

from toolkit.errors import AuthenticationError
from toolkit.server.auth import TokenService


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def test_a_remembered_token_is_still_checked_for_its_time_site_and_signature() -> None:
    clock = Clock()
    tokens = TokenService(clock, 3600, server_secret=b"s" * 40)
    alpha, beta = tokens.secret("alpha"), tokens.secret("beta")
    token = tokens.issue(alpha, "alpha", {"id": 7, "username": "ann"})
    first = tokens.verify(token, alpha, "alpha")
    first["sub"] = 99  # the caller's copy: what is remembered does not change
    again = tokens.verify(token, alpha, "alpha")
    assert (again["sub"], again["usr"], again["exp"]) == (7, "ann", 1_800_003_600)
    assert tokens.site_of(token) == tokens.site_of(token) == "alpha"
    # Another site's key, or a token whose signature was altered, are refused all the same.
    with pytest.raises(AuthenticationError, match="not valid for this site"):
        tokens.verify(token, beta, "beta")
    forged = token[:-2] + ("AA" if not token.endswith("AA") else "BB")
    with pytest.raises(AuthenticationError, match="not valid for this site"):
        tokens.verify(forged, alpha, "alpha")
    # Time goes on: the remembered token expires as any other.
    clock.now += 3600
    with pytest.raises(AuthenticationError, match="expired"):
        tokens.verify(token, alpha, "alpha")
    clock.now -= 3600 + 3600  # and one from the future is refused
    with pytest.raises(AuthenticationError, match="not valid yet"):
        tokens.verify(token, alpha, "alpha")
