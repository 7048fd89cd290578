"""Access tokens (spec section 5): HS256 JWTs naming the user and the site, 1 hour long.

Claims: ``sub`` (user id), ``usr`` (username), ``site``, ``iat``, ``exp`` and,
for machine logins, ``key`` (the API key id, so revoking the key ends its
tokens). Each site signs with its own secret, generated once and kept in the
site file, so a token of one site is refused by another twice over. The clock
is injectable so that tests can expire tokens without waiting an hour.
"""

from __future__ import annotations

import secrets
import threading
from collections.abc import Callable, Mapping
from typing import Any

import jwt

from toolkit.errors import AuthenticationError, OptionError
from toolkit.filters import parse_int

TOKEN_TTL_S = 3600
SECRET_NAME = "token-signing-key"
ALGORITHM = "HS256"
CLOCK_SKEW_S = 60


def bearer_token(header: str | None) -> str | None:
    """The token of an ``Authorization`` header: ``Bearer <token>`` or the bare token."""
    if not header:
        return None
    scheme, _, rest = header.strip().partition(" ")
    if rest and scheme.lower() == "bearer":
        return rest.strip() or None
    return header.strip() if not rest else None


class TokenService:
    """Issues and checks the tokens of every site of one site file."""

    def __init__(self, clock_s: Callable[[], float], ttl_s: int = TOKEN_TTL_S) -> None:
        self.clock_s = clock_s
        self.ttl_s = ttl_s
        self._secrets: dict[str, str] = {}
        self._lock = threading.Lock()

    def secret(self, site: str, load: Callable[[str, str], str]) -> str:
        """The site's signing secret; ``load(name, new)`` reads it from the store (or keeps new)."""
        with self._lock:
            known = self._secrets.get(site)
        if known is None:
            known = load(SECRET_NAME, secrets.token_urlsafe(48))
            with self._lock:
                self._secrets[site] = known
        return known

    def issue(self, secret: str, site: str, user: Mapping[str, Any]) -> str:
        now = int(self.clock_s())
        claims: dict[str, Any] = {
            "sub": str(user["id"]),
            "usr": user["username"],
            "site": site,
            "iat": now,
            "exp": now + self.ttl_s,
        }
        if user.get("keyId") is not None:
            claims["key"] = int(user["keyId"])
        return jwt.encode(claims, secret, algorithm=ALGORITHM)

    @staticmethod
    def site_of(token: str) -> str:
        """The site a token claims, before its signature is checked (to find the secret)."""
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            raise AuthenticationError("the access token is not a valid token") from None
        site = claims.get("site")
        if not isinstance(site, str):
            raise AuthenticationError("the access token names no site")
        return site

    def verify(self, token: str, secret: str, site: str) -> dict[str, Any]:
        """The claims of a token signed by ``secret`` for ``site`` and not expired."""
        try:
            claims = jwt.decode(
                token,
                secret,
                algorithms=[ALGORITHM],
                # Times are checked against our clock below, so tests can move time.
                options={
                    "require": ["sub", "site", "iat", "exp"],
                    "verify_exp": False,
                    "verify_iat": False,
                    "verify_nbf": False,
                },
            )
        except jwt.PyJWTError:
            raise AuthenticationError("the access token is not valid for this site") from None
        if claims["site"] != site:
            raise AuthenticationError("the access token is not valid for this site")
        # Claims we did not issue the way we issue them are a bad token (401), never a 500:
        # ``sub`` and ``key`` are whole numbers, ``iat`` and ``exp`` numeric dates.
        try:
            claims["sub"] = parse_int("sub", claims["sub"], minimum=1)
            if "key" in claims:
                claims["key"] = parse_int("key", claims["key"], minimum=1)
            exp = parse_int("exp", claims["exp"])
            iat = parse_int("iat", claims["iat"])
        except OptionError:
            raise AuthenticationError("the access token is not valid for this site") from None
        now = self.clock_s()
        if exp <= now:
            raise AuthenticationError("the access token has expired; authenticate again")
        if iat > now + CLOCK_SKEW_S:
            raise AuthenticationError("the access token is not valid yet")
        return claims
