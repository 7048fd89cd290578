"""Where the geocoding service is configured: ``toolkit serve --geocoder URL``, the
environment, or the config file.

The config file is the toolkit's (``TOOLKIT_CONFIG``, else
``~/.config/toolkit/config.toml``). The service is read from the chosen profile's
``geocoder`` (the profile named by ``--profile``/``TOOLKIT_PROFILE``, else
``default_profile``), else from a top-level ``[geocoder]`` table; ``TOOLKIT_GEOCODER``
(a URL) overrides the URL of either::

    [geocoder]
    url = "https://nominatim.example.org"
    protocol = "nominatim"     # or "pelias"; default: pelias when the path ends in /v1
    rate = 5                   # requests per second at most
    timeout = 10               # seconds to wait for one answer
    attempts = 3               # tries per query (429, 503, timeouts...)

    [profiles.staging]
    geocoder = "https://pelias.example.org/v1"   # a URL, or a table as above

A URL may hold a key in its query string: it is never printed; results and errors name
the service by protocol and host only.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from toolkit.errors import OptionError
from toolkit.geocoding.protocols import PROTOCOLS, Protocol, guess_protocol

if TYPE_CHECKING:
    from toolkit.geocoding.http import HttpGeocoder

CONFIG_ENV = "TOOLKIT_CONFIG"
DEFAULT_CONFIG = Path("~/.config/toolkit/config.toml")
URL_ENV = "TOOLKIT_GEOCODER"
KEYS = ("url", "protocol", "rate", "timeout", "attempts")


@dataclass(frozen=True)
class ServiceSettings:
    """A geocoding service and how hard it may be asked."""

    url: str
    protocol: Protocol
    rate_per_s: float = 5.0
    timeout_s: float = 10.0
    max_attempts: int = 3

    @classmethod
    def of(
        cls,
        url: str,
        protocol: str | None = None,
        *,
        rate_per_s: float | None = None,
        timeout_s: float | None = None,
        max_attempts: int | None = None,
    ) -> ServiceSettings:
        """Checked settings; ``protocol`` None takes it from the URL (``guess_protocol``)."""
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OptionError(
                "the geocoder must be an http:// or https:// URL with a host (e.g. "
                "https://nominatim.example.org or http://localhost:4000/v1)"
            )
        chosen = protocol or guess_protocol(parts.path)
        if chosen not in PROTOCOLS:
            raise OptionError(f"geocoder protocol {chosen!r} is not one of: {', '.join(PROTOCOLS)}")
        values = {
            "rate_per_s": rate_per_s,
            "timeout_s": timeout_s,
            "max_attempts": max_attempts,
        }
        for name, value in values.items():
            if value is not None and not value > 0:
                raise OptionError(f"geocoder {name} is {value!r}; it must be more than 0")
        given = {k: v for k, v in values.items() if v is not None}
        # ``given`` holds only rate/timeout/attempts, checked above; mypy cannot tie the
        # dict's keys to the dataclass's fields.
        return cls(url=url, protocol=chosen, **given)  # type: ignore[arg-type]

    @property
    def name(self) -> str:
        """The service as messages name it: protocol and host, never the whole URL."""
        from toolkit.geocoding.http import service_name

        return service_name(self.url, self.protocol)

    def open(self, *, cache_ttl_s: float | None = None) -> HttpGeocoder:
        """The ``HttpGeocoder`` these settings describe; its answers are kept for the run,
        or ``cache_ttl_s`` seconds at most (a server's run is long)."""
        from toolkit.geocoding.http import HttpGeocoder

        return HttpGeocoder(
            self.url,
            self.protocol,
            rate_per_s=self.rate_per_s,
            timeout_s=self.timeout_s,
            max_attempts=self.max_attempts,
            cache_ttl_s=cache_ttl_s,
        )


def service_from_config(
    profile: str | None = None, environ: Mapping[str, str] | None = None
) -> ServiceSettings | None:
    """The service the environment or config file names, or None when neither does."""
    env = os.environ if environ is None else environ
    config = Path(env.get(CONFIG_ENV) or DEFAULT_CONFIG).expanduser()
    table: dict[str, Any] = {}
    if config.is_file():
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise OptionError(f"{config}: not a readable TOML config file: {exc}") from exc
        chosen = profile or env.get("TOOLKIT_PROFILE") or document.get("default_profile")
        profiles = document.get("profiles") or {}
        in_profile = (profiles.get(chosen) or {}).get("geocoder") if chosen else None
        table = _table(in_profile if in_profile is not None else document.get("geocoder"), config)
    url = env.get(URL_ENV) or table.get("url")
    if not url:
        return None
    return ServiceSettings.of(
        str(url),
        table.get("protocol"),
        rate_per_s=_number(table, "rate", config),
        timeout_s=_number(table, "timeout", config),
        max_attempts=_whole(table, "attempts", config),
    )


def _table(value: Any, config: Path) -> dict[str, Any]:
    if value is None:
        return {}
    if isinstance(value, str):
        return {"url": value}
    if not isinstance(value, Mapping):
        raise OptionError(f"{config}: geocoder must be a URL or a table with url = ...")
    unknown = sorted(set(value) - set(KEYS))
    if unknown:
        raise OptionError(
            f"{config}: unknown geocoder key(s) {', '.join(unknown)}; known: {', '.join(KEYS)}"
        )
    return dict(value)


def _number(table: Mapping[str, Any], key: str, config: Path) -> float | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise OptionError(f"{config}: geocoder {key} is {value!r}; it must be a number")
    return float(value)


def _whole(table: Mapping[str, Any], key: str, config: Path) -> int | None:
    value = table.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise OptionError(f"{config}: geocoder {key} is {value!r}; it must be a whole number")
    return value
