"""Where a site store lives: a SQLite file (a path) or a PostgreSQL database (a libpq URL).

A URL names the server and database only: the password comes from libpq's own sources
(``PGPASSWORD``, ``~/.pgpass``, a service file), and :func:`display_name` strips any
password a URL holds all the same, so no message, log line or summary repeats it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# Query parameters of a libpq URL that are secrets.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


class PostgresURL(str):
    """A ``postgresql://`` location, kept as the user gave it (libpq reads it), shown by
    :attr:`display` without any password."""

    __slots__ = ()

    @property
    def display(self) -> str:
        return display_name(self)

    def exists(self) -> bool:
        """A server store "exists" as far as a path would: whether the site is in it is
        for the store to say when opened."""
        return True


StoreLocation = Path | PostgresURL


def is_postgres(location: object) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def parse_location(value: str | Path) -> StoreLocation:
    """A ``--store`` value as a location: a PostgreSQL URL or a file path."""
    if isinstance(value, PostgresURL):
        return value
    if is_postgres(value):
        return PostgresURL(str(value))
    return Path(value)


def display_name(location: str | Path) -> str:
    """The location as it may be shown: a URL without its password."""
    text = str(location)
    if not is_postgres(text):
        return text
    parts = urlsplit(text)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, host = netloc.rsplit("@", 1)
        netloc = f"{userinfo.split(':', 1)[0]}@{host}"
    query = urlencode(
        [(k, v) for k, v in parse_qsl(parts.query) if k.lower() not in _SECRET_PARAMETERS],
        safe="/",
    )
    # Not urlunsplit: it drops the '//' of an empty host (a socket named in the query).
    return f"{parts.scheme}://{netloc}{parts.path}" + (f"?{query}" if query else "")
