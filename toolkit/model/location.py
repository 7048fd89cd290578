"""Where a site store lives: a SQLite file (a path) or a PostgreSQL database (a libpq URL).

A URL names the server and database only: the password comes from libpq's own sources
(``PGPASSWORD``, ``~/.pgpass``, a service file) or from a config profile, which hands it to
libpq beside the URL (:attr:`PostgresURL.password`), never inside its text. :func:`display_name`
strips any password a URL holds all the same, so no message, log line or summary repeats it.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
# Query parameters of a libpq URL that are secrets.
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})


class PostgresURL(str):
    """A ``postgresql://`` location, kept as the user gave it (libpq reads it), shown by
    :attr:`display` without any password.

    A config profile's store also carries the profile's ``password`` (handed to libpq as a
    connection parameter, so it is in no URL text, command line or environment) and where
    that profile is (``profile``: config file and name), so that a worker process the
    toolkit starts opens the store by reading the same profile.
    """

    password: str | None
    profile: tuple[str, str] | None

    def __new__(
        cls,
        value: str,
        *,
        password: str | None = None,
        profile: tuple[str, str] | None = None,
    ) -> PostgresURL:
        url = super().__new__(cls, value)
        url.password = password
        url.profile = profile
        return url

    @classmethod
    def of(cls, value: object) -> PostgresURL:
        """``value`` when it is a PostgresURL already (keeping its password), else one."""
        return value if isinstance(value, PostgresURL) else cls(str(value))

    def worker_environment(self) -> dict[str, str]:
        """What a worker process's environment needs to open this store as this process
        does: the URL, and the profile holding its password (never the password)."""
        environment = {"TOOLKIT_STORE": str(self)}
        if self.profile is not None:
            environment["TOOLKIT_CONFIG"], environment["TOOLKIT_PROFILE"] = self.profile
        return environment

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
        return value  # with the password a profile gave it
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
