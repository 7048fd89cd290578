"""Access tokens (spec section 5): HS256 JWTs naming the user and the site, 1 hour long.

Claims: ``sub`` (user id), ``usr`` (username), ``site``, ``iat``, ``exp`` and,
for machine logins, ``key`` (the API key id, so revoking the key ends its
tokens). Each site signs with its own key, derived from the server's secret and
the site's name, so a token of one site is refused by another twice over. The
server's secret is never in the site file, so a copied site file cannot mint
tokens: it is ``TOOLKIT_SERVER_SECRET`` when set (several servers of one file
share it), else a key file beside the site file, made once with mode 0600. The
clock is injectable so that tests can expire tokens without waiting an hour.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import secrets
import stat
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jwt

from toolkit.errors import AuthenticationError, OptionError
from toolkit.model.location import PostgresURL
from toolkit.query.filters import parse_int

TOKEN_TTL_S = 3600
ALGORITHM = "HS256"
CLOCK_SKEW_S = 60
SERVER_SECRET_ENV = "TOOLKIT_SERVER_SECRET"
MIN_SERVER_SECRET = 32  # characters
KEY_FILE_SUFFIX = ".token-key"
VERIFIED_KEPT = 10_000  # tokens whose signature a server remembers having checked


@functools.lru_cache(maxsize=1024)
def _site_key(server_secret: bytes, site: str) -> str:
    message = b"toolkit token-signing-key\0" + site.encode("utf-8")
    return hmac.new(server_secret, message, hashlib.sha256).hexdigest()


def key_file(store_path: Path | PostgresURL) -> Path:
    """Where the server's secret is kept when the environment gives none: beside the file;
    for a PostgreSQL store (no file) in the user's config folder, one per database (servers
    on several machines sharing one database set TOOLKIT_SERVER_SECRET alike instead)."""
    if isinstance(store_path, PostgresURL):
        digest = hashlib.sha256(store_path.display.encode("utf-8")).hexdigest()[:16]
        folder = Path("~/.config/toolkit/server-keys").expanduser()
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        return folder / f"postgresql-{digest}{KEY_FILE_SUFFIX}"
    return store_path.with_name(store_path.name + KEY_FILE_SUFFIX)


def server_secret(
    store_path: Path | PostgresURL, environ: Mapping[str, str] | None = None
) -> bytes:
    """The secret every site's signing key derives from; never read from the site file."""
    environ = os.environ if environ is None else environ
    given = environ.get(SERVER_SECRET_ENV)
    if given:
        if len(given) < MIN_SERVER_SECRET:
            raise OptionError(
                f"{SERVER_SECRET_ENV} is too short: at least {MIN_SERVER_SECRET} random characters"
            )
        return given.encode("utf-8")
    path = key_file(store_path)
    try:
        # O_EXCL: of two servers starting at once, one writes and both read the same key.
        handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        pass
    else:
        with os.fdopen(handle, "w", encoding="ascii") as out:
            out.write(secrets.token_urlsafe(48) + "\n")
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise OptionError(
            f"{path}: the token key file may be read by others; chmod 600 it "
            f"(or set {SERVER_SECRET_ENV})"
        )
    secret = path.read_text(encoding="ascii").strip()
    if len(secret) < MIN_SERVER_SECRET:
        raise OptionError(f"{path}: the token key file holds no key; remove it to make a new one")
    return secret.encode("ascii")


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

    def __init__(
        self, clock_s: Callable[[], float], ttl_s: int = TOKEN_TTL_S, *, server_secret: bytes
    ) -> None:
        self.clock_s = clock_s
        self.ttl_s = ttl_s
        self._server_secret = server_secret
        # Every request of a client sends the same token: its signature is checked once
        # and its claims kept (the times are checked again each time). Keyed by the
        # token and the key that verified it; at most VERIFIED_KEPT, then forgotten whole.
        self._verified: dict[tuple[str, str], dict[str, Any]] = {}
        self._sites: dict[str, str] = {}  # token -> the site it claims (not yet a proof)

    def secret(self, site: str) -> str:
        """The site's signing key: an HMAC of its name under the server's secret."""
        return _site_key(self._server_secret, site)

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

    def site_of(self, token: str) -> str:
        """The site a token claims, before its signature is checked (to find the secret)."""
        site = self._sites.get(token)
        if site is None:
            site = self._claimed_site(token)
            if len(self._sites) >= VERIFIED_KEPT:
                self._sites.clear()
            self._sites[token] = site
        return site

    @staticmethod
    def _claimed_site(token: str) -> str:
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
        claims = self._verified.get((token, secret))
        if claims is None:
            claims = self._signed_claims(token, secret, site)
            if len(self._verified) >= VERIFIED_KEPT:
                self._verified.clear()
            self._verified[(token, secret)] = claims
        now = self.clock_s()
        if claims["exp"] <= now:
            raise AuthenticationError("the access token has expired; authenticate again")
        if claims["iat"] > now + CLOCK_SKEW_S:
            raise AuthenticationError("the access token is not valid yet")
        return dict(claims)

    @staticmethod
    def _signed_claims(token: str, secret: str, site: str) -> dict[str, Any]:
        """The claims of a token signed by ``secret`` for ``site``, in our types (times
        not checked)."""
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
            # As whole numbers, compared with the clock on every use.
            times = {"exp": parse_int("exp", claims["exp"]), "iat": parse_int("iat", claims["iat"])}
        except OptionError:
            raise AuthenticationError("the access token is not valid for this site") from None
        return {**claims, **times}
