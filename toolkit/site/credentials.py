"""Secrets of users: password and API key hashes, API key issue, TOTP (spec section 5).

Passwords and API keys are kept only as argon2id hashes (slow and salted). An
API key is ``tk_<prefix>_<secret>``: the prefix finds its one row, the hash of
the whole key proves it. TOTP codes are checked with pyotp, one 30-second step
either side accepted for clock drift; the step a code matched is returned so
the caller can refuse it a second time (a code logs in once).
"""

from __future__ import annotations

import functools
import hmac
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pyotp
from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

from toolkit.errors import OptionError

API_USER_POSITION = "API User"
KEY_SCHEME = "tk"
MIN_PASSWORD_LENGTH = 8
AUTH_FIELDS = ("uuid", "platform", "version", "name")
AUTH_SECRETS = ("password", "apiKey", "mfaCode")
AUTH_KNOWN = (*AUTH_FIELDS, "username", *AUTH_SECRETS)

_hasher = PasswordHasher()


# Verified when the username is unknown, so a wrong username costs as long as a wrong password.
@functools.cache
def dummy_hash() -> str:
    """A hash to verify against when the user has none, so both cases take as long.

    Made on first use: an argon2 hash takes a few hundred milliseconds, which every
    command paid at import before (issue 17, cold start). A server makes it at start
    (:func:`toolkit.server.create_app`), so even its first unknown username takes no
    longer than a wrong password."""
    return _hasher.hash(secrets.token_urlsafe(16))


def hash_secret(secret: str) -> str:
    return _hasher.hash(secret)


def verify_secret(stored_hash: str | None, secret: str) -> bool:
    """True when ``secret`` matches ``stored_hash``; always spends the time of a check."""
    try:
        return _hasher.verify(stored_hash or dummy_hash(), secret) and stored_hash is not None
    except (VerificationError, InvalidHashError):
        return False


def check_password_strength(password: str) -> None:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise OptionError(f"a password needs at least {MIN_PASSWORD_LENGTH} characters")


@dataclass(frozen=True)
class NewApiKey:
    """A freshly issued key: ``key`` is shown once and never stored."""

    key: str
    prefix: str
    key_hash: str


def new_api_key() -> NewApiKey:
    prefix = secrets.token_hex(6)
    key = f"{KEY_SCHEME}_{prefix}_{secrets.token_urlsafe(32)}"
    return NewApiKey(key, prefix, hash_secret(key))


def api_key_prefix(key: str) -> str | None:
    """The prefix of a key in our format, or None for anything else."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != KEY_SCHEME or not parts[1]:
        return None
    return parts[1]


def new_totp_secret() -> str:
    return pyotp.random_base32()


def totp_uri(secret: str, username: str, site: str) -> str:
    """The otpauth:// URI an authenticator app reads (as a QR code or pasted)."""
    return pyotp.TOTP(secret).provisioning_uri(name=username, issuer_name=f"toolkit {site}")


TOTP_WINDOW = 1  # steps either side of now that are accepted, for clock drift


def totp_step(secret: str, code: object, at_seconds: float) -> int | None:
    """The time step whose TOTP of ``secret`` is ``code`` (six digits), near the time; else None."""
    if not isinstance(code, str) or len(code) != 6 or not code.isdigit():
        return None
    totp = pyotp.TOTP(secret)
    now_step = totp.timecode(datetime.fromtimestamp(int(at_seconds), tz=UTC))
    for step in range(now_step - TOTP_WINDOW, now_step + TOTP_WINDOW + 1):
        # Compared in constant time, as pyotp's own verify does.
        if hmac.compare_digest(totp.generate_otp(step), code):
            return step
    return None


def verify_totp(secret: str, code: object, at_seconds: float) -> bool:
    """True when ``code`` is six digits and the TOTP of ``secret`` at (or next to) the time."""
    return totp_step(secret, code, at_seconds) is not None


def check_auth_body(body: Mapping[str, Any]) -> None:
    """The spec's auth body (section 5): the four device fields, and one way to log in.

    Raises :class:`OptionError` (HTTP 400) naming what is missing or unknown.
    """
    unknown = sorted(set(body) - set(AUTH_KNOWN))
    if unknown:
        raise OptionError(
            f"unknown auth field(s) {', '.join(unknown)}; known: {', '.join(AUTH_KNOWN)}"
        )
    missing = [n for n in AUTH_FIELDS if not isinstance(body.get(n), str) or not body[n].strip()]
    if missing:
        raise OptionError(f"auth needs {', '.join(missing)} (non-empty strings)")
    for name in ("username", *AUTH_SECRETS):
        if name in body and not isinstance(body[name], str):
            raise OptionError(f"auth field {name} must be a string")
    if "apiKey" in body:
        if "username" in body or "password" in body:
            raise OptionError("give either apiKey, or username and password, not both")
        return
    if not body.get("username") or not body.get("password"):
        raise OptionError("auth needs username and password (user-based), or apiKey")
