"""Profiles of the config file (``TOOLKIT_CONFIG``, else ``~/.config/toolkit/config.toml``,
tables ``[profiles.NAME]``): a profile names either a server of the API (``base_url``, read
by :func:`toolkit.remote.client.load_profile`) or a store (``store``: a PostgreSQL URL or a
SQLite file), with the site and the credentials to use.

A store profile's ``password`` goes to libpq beside the URL (never into its text, a command
line or the environment), and only from a config file that no other user may read.
No HTTP here: the commands working on a store never load the client.
"""

from __future__ import annotations

import logging
import os
import stat
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import OptionError
from toolkit.model.location import PostgresURL, StoreLocation, is_postgres, parse_location

log = logging.getLogger(__name__)

CONFIG_ENV = "TOOLKIT_CONFIG"
DEFAULT_CONFIG = Path("~/.config/toolkit/config.toml")
# The keys a store profile may hold (a server profile's are the client's).
STORE_KEYS = ("store", "site", "password", "geocoder")


def config_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    return Path(env.get(CONFIG_ENV) or DEFAULT_CONFIG).expanduser()


def others_may_read(config: Path) -> bool:
    return bool(config.stat().st_mode & (stat.S_IRWXG | stat.S_IRWXO))


def read_profile(
    name: str | None, environ: Mapping[str, str] | None = None
) -> tuple[Path, dict[str, Any]]:
    """The config file and the values of profile ``name`` (else ``TOOLKIT_PROFILE``, else
    the file's ``default_profile``); no values when none is chosen. A profile asked for by
    name that is not there (or no config file) is an :class:`OptionError`."""
    env = os.environ if environ is None else environ
    config = config_path(env)
    if not config.exists():
        if name is not None:
            raise OptionError(f"profile {name!r} asked for, but there is no config file {config}")
        return config, {}
    if others_may_read(config):
        log.warning("%s can be read by other users; it holds secrets: chmod 600 it", config)
    try:
        document = tomllib.loads(config.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise OptionError(f"{config}: not a readable TOML config file: {exc}") from exc
    profiles = document.get("profiles", {})
    chosen = name or env.get("TOOLKIT_PROFILE") or document.get("default_profile")
    if chosen is None:
        return config, {}
    if chosen not in profiles:
        raise OptionError(
            f"{config}: no profile {chosen!r}; profiles: {', '.join(profiles) or 'none'}"
        )
    values = profiles[chosen]
    if not isinstance(values, Mapping):
        raise OptionError(f"{config}: profile {chosen!r} is not a table ([profiles.{chosen}])")
    return config, dict(values)


@dataclass(frozen=True)
class StoreProfile:
    """A profile naming a store: where it is (a PostgreSQL URL carrying the profile's
    password beside its text, or a SQLite file) and the site to work in."""

    store: StoreLocation
    site: str | None


def store_profile(name: str, environ: Mapping[str, str] | None = None) -> StoreProfile | None:
    """Profile ``name`` when it names a store (``store = ...``); None when it names a server.

    A profile holding a ``password`` is refused when other users may read its file; a
    password goes with a PostgreSQL store only.
    """
    config, values = read_profile(name, environ)
    if "store" not in values:
        return None
    where = f"{config}: profile {name!r}"
    if "base_url" in values:
        raise OptionError(
            f"{where} names a server (base_url) and a store; a profile names one of them"
        )
    unknown = sorted(set(values) - set(STORE_KEYS))
    if unknown:
        raise OptionError(
            f"{where}: unknown key(s) {', '.join(unknown)} for a store profile; known: "
            f"{', '.join(STORE_KEYS)}"
        )
    store, password, site = values["store"], values.get("password"), values.get("site")
    if not isinstance(store, str) or not store:
        raise OptionError(f"{where}: store must be a postgresql:// URL or a site file's path")
    if site is not None and not isinstance(site, str):
        raise OptionError(f"{where}: site must be text")
    if password is None:
        return StoreProfile(parse_location(store), site)
    if not isinstance(password, str):
        raise OptionError(f"{where}: password must be text")
    if not is_postgres(store):
        raise OptionError(f"{where}: a password goes with a postgresql:// store only")
    if others_may_read(config):
        # The file holds a password: read it only while nobody else can.
        raise OptionError(
            f"{config} holds a store's password and other users may read it; chmod 600 {config}"
        )
    return StoreProfile(PostgresURL(store, password=password, profile=(str(config), name)), site)
