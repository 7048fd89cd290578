"""A geocoding service over HTTP (Nominatim or Pelias), as a ``Geocoder``.

This module and nothing else in ``toolkit.geocoding`` sends HTTP (import-linter contract
in pyproject.toml). Its requests are not the service API's (no token, no X-Site), so it
does not go through ``toolkit.remote.client``; it keeps that client's manners:

- Each distinct query text is asked once per run (a bounded cache, keyed by the text as
  the matcher would compare it and the required features; answers that a place exists
  or does not are cached, failures are not).
- Requests keep to ``rate_per_s`` (a shared spacing between request starts, whatever
  the number of worker threads).
- A timeout, a connection error, 429, 502, 503 or 504 is retried up to ``max_attempts``
  in all, waiting what ``Retry-After`` says (seconds or an HTTP date) or else an
  exponential backoff with jitter; a ``Retry-After`` longer than ``max_wait_s`` is not
  waited for.
- Once the service has failed a query that way, the rest of the batch is not sent: each
  gets the same error at once instead of a timeout each.
- Errors name the service by protocol and host only, never its full URL (it may carry
  a key).
"""

from __future__ import annotations

import email.utils
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx
import numpy as np
import pandas as pd

from toolkit import __version__
from toolkit.errors import OptionError
from toolkit.geocoding import result
from toolkit.geocoding.features import Feature, describe, required_features
from toolkit.geocoding.protocols import (
    PROTOCOLS,
    Place,
    Protocol,
    ProtocolError,
    best,
    places,
    search_request,
)

log = logging.getLogger(__name__)

RETRY_STATUSES = frozenset({429, 502, 503, 504})


@dataclass(frozen=True)
class _Answer:
    """One query's outcome: a place, or why not; ``final`` answers may be cached."""

    place: Place | None
    err: str | None
    final: bool


class RateLimit:
    """Request starts spaced at least ``1 / rate_per_s`` apart, across threads."""

    def __init__(
        self,
        rate_per_s: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if rate_per_s <= 0:
            raise OptionError(f"the geocoder's rate is {rate_per_s}; it must be more than 0")
        self.interval = 1.0 / rate_per_s
        self.clock = clock
        self.sleep = sleep
        self._lock = threading.Lock()
        self._next = 0.0

    def wait(self) -> None:
        with self._lock:
            now = self.clock()
            start = max(now, self._next)
            self._next = start + self.interval
        if start > now:
            self.sleep(start - now)


class AnswerCache:
    """Answers by key, least recently used dropped beyond ``size``, older than ``ttl_s``
    forgotten; shared by threads."""

    def __init__(
        self,
        size: int = 100_000,
        ttl_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.size = size
        self.ttl_s = ttl_s
        self.clock = clock
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[str, Any], tuple[float, _Answer]] = OrderedDict()

    def get(self, key: tuple[str, Any]) -> _Answer | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            if self.ttl_s is not None and self.clock() - entry[0] > self.ttl_s:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return entry[1]

    def put(self, key: tuple[str, Any], answer: _Answer) -> None:
        with self._lock:
            self._entries[key] = (self.clock(), answer)
            self._entries.move_to_end(key)
            while len(self._entries) > self.size:
                self._entries.popitem(last=False)

    def __len__(self) -> int:
        return len(self._entries)


def retry_after_s(response: httpx.Response, now: Callable[[], float] = time.time) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date), or None."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        try:
            moment = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, moment.timestamp() - now())


def service_name(url: str, protocol: Protocol) -> str:
    """``protocol:host[:port]``: how results and errors name the service (no path, no
    query, no credentials)."""
    parts = urlsplit(url)
    host = parts.hostname or "?"
    return f"{protocol}:{host}" + (f":{parts.port}" if parts.port else "")


class HttpGeocoder:
    """A Nominatim- or Pelias-compatible service at ``url``, as a ``Geocoder``."""

    def __init__(
        self,
        url: str,
        protocol: Protocol,
        *,
        timeout_s: float = 10.0,
        max_attempts: int = 3,
        rate_per_s: float = 5.0,
        workers: int = 4,
        backoff_s: float = 0.5,
        max_wait_s: float = 30.0,
        cache_size: int = 100_000,
        cache_ttl_s: float | None = None,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if protocol not in PROTOCOLS:
            raise OptionError(f"geocoder protocol {protocol!r}; allowed: {', '.join(PROTOCOLS)}")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise OptionError(
                f"the geocoder URL must be http:// or https:// with a host, not "
                f"{parts.scheme or 'no scheme'}://{parts.hostname or ''}"
            )
        if max_attempts < 1:
            raise OptionError(f"max_attempts is {max_attempts}; it must be 1 or more")
        base = url.rstrip("/")
        if protocol == "pelias" and base.endswith("/v1"):
            base = base[: -len("/v1")]  # the request paths name the API root themselves
        self.protocol: Protocol = protocol
        self.source = service_name(url, protocol)
        self.timeout_s = timeout_s
        self.max_attempts = max_attempts
        self.workers = max(1, workers)
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self.sleep = sleep
        self.rate = RateLimit(rate_per_s, clock, sleep)
        self.cache = AnswerCache(cache_size, cache_ttl_s, clock)
        self.requests = 0  # sent, retries included (for tests and the summary)
        self._count_lock = threading.Lock()
        self.http = httpx.Client(
            base_url=base + "/",
            timeout=timeout_s,
            transport=transport,
            follow_redirects=False,
            headers={"Accept": "application/json", "User-Agent": f"toolkit/{__version__}"},
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> HttpGeocoder:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    # --- the Geocoder protocol ------------------------------------------------------------

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        """Each query's best place of a required feature, or why none."""
        features = required_features(options)
        text = queries.astype("str").fillna("").str.strip().str.split().str.join(" ")
        keys = text.str.casefold()
        codes, distinct = pd.factorize(keys)
        _, first = np.unique(codes, return_index=True)
        first_text = text.to_numpy(dtype=object)[first]
        answers: dict[int, _Answer] = {}
        to_ask: list[int] = []
        for code, key in enumerate(distinct):
            cached = self.cache.get((key, features))
            if not key:
                answers[code] = _Answer(None, "the query is empty", True)
            elif cached is not None:
                answers[code] = cached
            else:
                to_ask.append(code)
        down = _Breaker()

        def ask(code: int) -> tuple[int, _Answer]:
            return code, self._ask(str(first_text[code]), features, down)

        if to_ask:
            with ThreadPoolExecutor(min(self.workers, len(to_ask))) as pool:
                for code, answer in pool.map(ask, to_ask):
                    answers[code] = answer
                    if answer.final:
                        self.cache.put((distinct[code], features), answer)
        rows = [_row(answers[code], self.source) for code in range(len(distinct))]
        frame = result.from_rows(pd.RangeIndex(len(distinct)), rows)
        out = frame.iloc[codes].set_axis(queries.index)
        return out

    # --- one query ------------------------------------------------------------------------

    def _ask(self, text: str, features: tuple[Feature, ...] | None, down: _Breaker) -> _Answer:
        if down.reason is not None:
            return _Answer(None, down.reason, False)
        path, params = search_request(self.protocol, text, features)
        problem = "no answer"
        for attempt in range(self.max_attempts):
            if down.reason is not None:
                return _Answer(None, down.reason, False)
            self.rate.wait()
            with self._count_lock:
                self.requests += 1
            try:
                response = self.http.get(path, params=params)
            except httpx.TimeoutException:
                problem = f"no answer within {self.timeout_s:g} s"
                wait = None
            except httpx.TransportError as exc:
                problem = f"cannot reach it ({type(exc).__name__})"
                wait = None
            else:
                if response.status_code in RETRY_STATUSES:
                    problem = f"HTTP {response.status_code}"
                    wait = retry_after_s(response)
                    if wait is not None and wait > self.max_wait_s:
                        return down.trip(
                            f"{self.source}: HTTP {response.status_code}, asked to wait "
                            f"{wait:g} s (Retry-After), more than the {self.max_wait_s:g} s "
                            "allowed"
                        )
                elif not response.is_success:
                    return _Answer(
                        None, f"{self.source}: HTTP {response.status_code} for this query", False
                    )
                else:
                    return self._read(response, features)
            if attempt < self.max_attempts - 1:
                log.info("%s: %s, retrying", self.source, problem)
                self.sleep(wait if wait is not None else self._backoff(attempt))
        return down.trip(f"{self.source}: {problem} after {self.max_attempts} attempts")

    def _backoff(self, attempt: int) -> float:
        # Full jitter: many clients retrying together do not march in step.
        return random.uniform(0, min(self.max_wait_s, self.backoff_s * 2**attempt))

    def _read(self, response: httpx.Response, features: tuple[Feature, ...] | None) -> _Answer:
        try:
            found = places(self.protocol, response.json())
        except (ValueError, ProtocolError) as exc:
            return _Answer(
                None, f"{self.source}: the answer is not {self.protocol} JSON ({exc})", False
            )
        place = best(found, features)
        if place is not None:
            return _Answer(place, None, True)
        if not found:
            return _Answer(None, f"{self.source}: no place found", True)
        kinds = sorted({p.feature or "unknown" for p in found})
        return _Answer(
            None,
            f"{self.source}: {len(found)} places found, none a {describe(features)} "
            f"(found: {', '.join(kinds)})",
            True,
        )


class _Breaker:
    """A batch's circuit: once the service fails for good, the rest is not sent."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self._lock = threading.Lock()

    def trip(self, reason: str) -> _Answer:
        with self._lock:
            if self.reason is None:
                self.reason = reason
        return _Answer(None, reason, False)


def _row(answer: _Answer, source: str) -> dict[str, Any]:
    place = answer.place
    if place is None:
        return {"err": answer.err}
    return {
        "longitude": place.longitude,
        "latitude": place.latitude,
        "label": place.label,
        "accuracy": place.accuracy,
        "err": None,
        "source": source,
        "place_id": place.place_id,
        "feature": place.feature,
        "name": place.name,
    }
