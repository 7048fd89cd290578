"""The HTTP client of the service's API (httpx): authentication, token renewal, retries.

This is the only module that sends HTTP. Credentials come from environment
variables or a config file profile, never from a command line, and never appear in
logs or errors.

- Auth: :class:`ServiceAuth` obtains a token from ``POST /api/json/auth`` (API key,
  or username, password and a TOTP code generated from the stored secret), renews it
  before it expires, and once more on a 401.
- Retries: connection errors, timeouts, 502/503/504 and 429 are retried with
  exponential backoff and full jitter, honouring ``Retry-After``; other 4xx never. A
  request that must not be repeated blindly (scheduling an import) is retried only
  when it certainly did not reach the server.
- Errors: a server error becomes :class:`~toolkit.errors.RemoteError` carrying the
  HTTP status and the server's message.
"""

from __future__ import annotations

import email.utils
import json as json_module
import logging
import os
import random
import socket
import stat
import time
import tomllib
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import jwt
import pyotp

from toolkit import __version__
from toolkit.errors import OptionError, RemoteError

log = logging.getLogger(__name__)

TOKEN_LIFETIME_S = 3600  # spec 8: an access token lives one hour
RENEW_MARGIN_S = 300  # renew this long before the token expires
TOTP_STEP_S = 30  # a TOTP code's time step (RFC 6238 default, as the service uses)
RETRY_STATUSES = frozenset({429, 502, 503, 504})
CONFIG_ENV = "TOOLKIT_CONFIG"
DEFAULT_CONFIG = Path("~/.config/toolkit/config.toml")


@dataclass(frozen=True, repr=False)
class Credentials:
    """An API key, or a username and password with an optional TOTP secret."""

    api_key: str | None = None
    username: str | None = None
    password: str | None = None
    totp_secret: str | None = None

    def __repr__(self) -> str:  # secrets never reach a log or a traceback
        kind = "api key" if self.api_key else f"user {self.username!r}"
        return f"Credentials({kind})"

    def auth_fields(self, at: float | None = None) -> dict[str, str]:
        """The auth body's credentials; a TOTP code is made for the time ``at`` (now)."""
        if self.api_key:
            return {"apiKey": self.api_key}
        if self.username and self.password:
            fields = {"username": self.username, "password": self.password}
            if self.totp_secret:
                totp = pyotp.TOTP(self.totp_secret)
                fields["mfaCode"] = totp.now() if at is None else totp.at(at)
            return fields
        raise OptionError(
            "no credentials: set TOOLKIT_API_KEY, or TOOLKIT_USERNAME and TOOLKIT_PASSWORD "
            "(and TOOLKIT_TOTP_SECRET for a user with a TOTP device), or use a config profile"
        )


@dataclass(frozen=True)
class Profile:
    """Where and as whom to connect."""

    base_url: str
    site: str
    credentials: Credentials


def load_profile(
    name: str | None = None,
    *,
    base_url: str | None = None,
    site: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Profile:
    """A profile from the config file (``TOOLKIT_CONFIG`` or ``~/.config/toolkit/config.toml``,
    table ``[profiles.NAME]``), with environment variables and the given values on top."""
    env = os.environ if environ is None else environ
    values: dict[str, Any] = {}
    config = Path(env.get(CONFIG_ENV) or DEFAULT_CONFIG).expanduser()
    if config.exists():
        mode = config.stat().st_mode
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("%s can be read by other users; it holds secrets: chmod 600 it", config)
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise OptionError(f"{config}: not a readable TOML config file: {exc}") from exc
        profiles = document.get("profiles", {})
        chosen = name or env.get("TOOLKIT_PROFILE") or document.get("default_profile")
        if chosen is not None:
            if chosen not in profiles:
                raise OptionError(
                    f"{config}: no profile {chosen!r}; profiles: {', '.join(profiles) or 'none'}"
                )
            values = dict(profiles[chosen])
    elif name is not None:
        raise OptionError(f"profile {name!r} asked for, but there is no config file {config}")
    credentials = Credentials(
        api_key=env.get("TOOLKIT_API_KEY") or values.get("api_key"),
        username=env.get("TOOLKIT_USERNAME") or values.get("username"),
        password=env.get("TOOLKIT_PASSWORD") or values.get("password"),
        totp_secret=env.get("TOOLKIT_TOTP_SECRET") or values.get("totp_secret"),
    )
    url = base_url or values.get("base_url") or env.get("TOOLKIT_URL")
    if not url:
        raise OptionError("no server: pass --url, set TOOLKIT_URL, or give a profile base_url")
    return Profile(
        base_url=str(url).rstrip("/"),
        site=site or values.get("site") or env.get("TOOLKIT_SITE") or "default",
        credentials=credentials,
    )


def device_uuid(base_url: str) -> str:
    """A stable id of this client for the auth body: this host and the server it talks to."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"toolkit://{socket.gethostname()}/{base_url}"))


class ServiceAuth(httpx.Auth):
    """Bearer tokens from the service's ``auth`` command, renewed before they expire."""

    requires_response_body = True

    def __init__(self, profile: Profile, clock: Callable[[], float] = time.time) -> None:
        self.profile = profile
        self.clock = clock
        self.token: str | None = None
        self.expires_at = 0.0
        self._totp_step = -1  # the TOTP time step of our last login

    def _auth_request(self) -> httpx.Request:
        at = None
        if self.profile.credentials.totp_secret:
            # The server takes a code once: a second login in the same 30 s waits for the next.
            now = time.time()
            step = int(now // TOTP_STEP_S)
            if step <= self._totp_step:
                step = self._totp_step + 1
                time.sleep(max(0.0, step * TOTP_STEP_S - now))
            self._totp_step = step
            at = step * TOTP_STEP_S
        body = {
            "uuid": device_uuid(self.profile.base_url),
            "platform": "toolkit (python)",
            "version": __version__,
            "name": "toolkit",
            **self.profile.credentials.auth_fields(at),
        }
        return httpx.Request(
            "POST",
            f"{self.profile.base_url}/api/json/auth",
            json=body,
            headers={"X-Site": self.profile.site, "Accept": "application/json"},
        )

    def _take(self, response: httpx.Response) -> None:
        if response.status_code != 200:
            raise RemoteError(
                f"authentication at {self.profile.base_url} failed: {_server_message(response)}",
                response.status_code,
            )
        token = response.json().get("token")
        if not token:
            raise RemoteError("authentication answered without a token", response.status_code)
        self.token = token
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
            self.expires_at = float(claims["exp"])
        except (jwt.PyJWTError, KeyError, TypeError, ValueError):
            self.expires_at = self.clock() + TOKEN_LIFETIME_S

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        if self.token is None or self.clock() > self.expires_at - RENEW_MARGIN_S:
            self._take((yield self._auth_request()))
        request.headers["Authorization"] = f"Bearer {self.token}"
        response = yield request
        if response.status_code == 401:
            # The token was refused (expired early, server restarted with a new key): once more.
            self._take((yield self._auth_request()))
            request.headers["Authorization"] = f"Bearer {self.token}"
            yield request


def _server_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return f"HTTP {response.status_code} {response.reason_phrase}"
    if isinstance(body, dict) and body.get("message"):
        return f"HTTP {response.status_code}: {body['message']}"
    return f"HTTP {response.status_code} {response.reason_phrase}"


def retry_after_s(response: httpx.Response) -> float | None:
    """Seconds to wait from a ``Retry-After`` header (seconds or an HTTP date)."""
    value = response.headers.get("Retry-After")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, moment.timestamp() - time.time()) if moment else None


class ApiClient:
    """Requests to one site of one server, authenticated and retried."""

    def __init__(
        self,
        profile: Profile,
        *,
        timeout_s: float = 60.0,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.profile = profile
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.sleep = sleep
        self.auth = ServiceAuth(profile, clock)
        self.http = httpx.Client(
            base_url=profile.base_url,
            timeout=timeout_s,
            transport=transport,
            headers={
                "X-Site": profile.site,
                "Accept": "application/json",
                "User-Agent": f"toolkit/{__version__}",
            },
        )

    def close(self) -> None:
        self.http.close()

    def __enter__(self) -> ApiClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _wait(self, attempt: int, response: httpx.Response | None) -> None:
        delay = retry_after_s(response) if response is not None else None
        if delay is None:
            # Full jitter: many clients retrying together do not march in step.
            delay = random.uniform(0, min(self.max_backoff_s, self.backoff_s * 2**attempt))
        self.sleep(min(delay, self.max_backoff_s * 4))

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        json: Any = None,
        files: Any = None,
        data: Any = None,
        authenticated: bool = True,
        repeatable: bool = True,
    ) -> httpx.Response:
        """Send a request, retrying what is safe to retry; non-2xx raises RemoteError.

        ``repeatable`` False marks a request whose repetition could do the work twice:
        it is retried only on errors that prove it never reached the server.
        """
        content: bytes | None = None
        headers: dict[str, str] = {}
        if json is not None:
            # UTF-8 as it is, not \uXXXX escapes: the size a push planned is the size sent.
            text = json_module.dumps(json, ensure_ascii=False, separators=(",", ":"))
            content = text.encode("utf-8")
            headers["Content-Type"] = "application/json;charset=UTF-8"
        last_error: Exception | None = None
        for attempt in range(self.max_attempts):
            try:
                response = self.http.request(
                    method,
                    path,
                    params=params,
                    content=content,
                    files=files,
                    data=data,
                    headers=headers,
                    auth=self.auth if authenticated else None,
                )
            except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
                last_error = exc  # never reached the server: always safe to try again
            except RemoteError as exc:
                # The auth request itself met a busy server before this request was sent.
                if exc.status not in RETRY_STATUSES or attempt == self.max_attempts - 1:
                    raise
                last_error = exc
            except (
                httpx.ReadTimeout,
                httpx.WriteTimeout,
                httpx.RemoteProtocolError,
                httpx.ReadError,
                httpx.WriteError,
                httpx.PoolTimeout,
            ) as exc:
                if not repeatable:
                    raise RemoteError(
                        f"{method} {path}: the connection failed after the request was sent "
                        f"({type(exc).__name__}); it may or may not have been done"
                    ) from exc
                last_error = exc
            else:
                retryable = response.status_code in RETRY_STATUSES and (
                    repeatable or response.status_code in (429, 503)
                )
                if not retryable or attempt == self.max_attempts - 1:
                    if response.is_success:
                        return response
                    raise RemoteError(
                        f"{method} {path}: {_server_message(response)}", response.status_code
                    )
                log.info("%s %s: %s, retrying", method, path, response.status_code)
                self._wait(attempt, response)
                continue
            log.info("%s %s: %s, retrying", method, path, type(last_error).__name__)
            if attempt < self.max_attempts - 1:
                self._wait(attempt, None)
        raise RemoteError(
            f"{method} {path}: cannot reach {self.profile.base_url} "
            f"({type(last_error).__name__}: {last_error})"
        ) from last_error

    def get_object(self, path: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        return json_object(self.request("GET", path, params=params))

    def get_records(self, path: str) -> list[dict[str, Any]]:
        return json_records(self.request("GET", path))

    def post_object(self, path: str, body: Any, *, repeatable: bool = True) -> dict[str, Any]:
        return json_object(self.request("POST", path, json=body, repeatable=repeatable))


def json_body(response: httpx.Response) -> Any:
    """The answer's JSON (any shape), or a RemoteError when it is not JSON at all."""
    try:
        return response.json()
    except ValueError:
        raise RemoteError(
            f"{_what(response)}: the answer is not JSON", response.status_code
        ) from None


def json_object(response: httpx.Response) -> dict[str, Any]:
    """The answer as a JSON object, or a RemoteError saying what came instead."""
    body = json_body(response)
    if not isinstance(body, dict):
        raise RemoteError(
            f"{_what(response)}: the answer is a JSON {type(body).__name__}, not an object",
            response.status_code,
        )
    return body


def json_records(response: httpx.Response) -> list[dict[str, Any]]:
    """The answer as a JSON array of objects, or a RemoteError saying what came instead."""
    body = json_body(response)
    if not isinstance(body, list) or not all(isinstance(record, dict) for record in body):
        raise RemoteError(
            f"{_what(response)}: the answer is not a JSON array of objects", response.status_code
        )
    return body


def _what(response: httpx.Response) -> str:
    return f"{response.request.method} {response.request.url.path}"
