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
  HTTP status and the server's message; every failure of httpx (a refused connection,
  a name that does not resolve, a timeout, a TLS handshake, a broken answer, an answer
  that is not JSON) becomes one too, saying what happened at which server (never with
  a credential: a URL holding a user name or password is refused). A URL that is not
  ``http://`` or ``https://`` is an :class:`~toolkit.errors.OptionError` before any
  request. ``TOOLKIT_TIMEOUT`` (seconds) bounds each request (default 60).
"""

from __future__ import annotations

import email.utils
import json as json_module
import logging
import math
import os
import random
import socket
import ssl
import time
import uuid
from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import jwt
import pyotp

from toolkit import __version__
from toolkit.errors import OptionError, RemoteError
from toolkit.remote.profiles import read_profile

log = logging.getLogger(__name__)
_T = TypeVar("_T")

TOKEN_LIFETIME_S = 3600  # spec 8: an access token lives one hour
RENEW_MARGIN_S = 300  # renew this long before the token expires
TOTP_STEP_S = 30  # a TOTP code's time step (RFC 6238 default, as the service uses)
RETRY_STATUSES = frozenset({429, 502, 503, 504})
TIMEOUT_ENV = "TOOLKIT_TIMEOUT"
DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 24 * 3600.0
SCHEMES = ("http", "https")


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
    timeout_s: float = DEFAULT_TIMEOUT_S


def check_base_url(url: str) -> str:
    """``url`` when it can name a server of the API: ``http://`` or ``https://``, a host,
    a port that exists, and no user name or password (secrets never go in a URL, which
    ends up in shells' histories and in messages). Else an :class:`OptionError`."""
    try:
        parsed = httpx.URL(url)
        port = parsed.port
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise OptionError(f"server URL {url!r} is not a URL: {exc}") from exc
    if parsed.userinfo:
        raise OptionError(
            "the server URL holds a user name or password; give only http(s)://HOST[:PORT] "
            "and the credentials in TOOLKIT_API_KEY, or TOOLKIT_USERNAME and "
            "TOOLKIT_PASSWORD, or a config profile"
        )
    if parsed.scheme in SCHEMES and not parsed.host:
        raise OptionError(f"server URL {url!r} names no host; e.g. https://HOST[:PORT]")
    if "://" not in url:
        raise OptionError(
            f"server URL {url!r} does not start with http:// or https://; "
            "e.g. https://HOST or http://HOST:PORT"
        )
    if parsed.scheme not in SCHEMES:
        raise OptionError(
            f"server URL {url!r}: the API is served over http:// or https://, not "
            f"{parsed.scheme}://"
        )
    if not parsed.host:
        raise OptionError(f"server URL {url!r} names no host; e.g. https://HOST[:PORT]")
    if port is not None and not 0 < port < 65536:
        raise OptionError(f"server URL {url!r}: port {port} does not exist (1 to 65535)")
    return url


def timeout_from(value: object, where: str) -> float:
    """Seconds a request may take, from ``TOOLKIT_TIMEOUT`` or a profile's ``timeout``."""
    try:
        seconds = float(str(value).strip())
    except ValueError:
        seconds = math.nan
    if not (0 < seconds <= MAX_TIMEOUT_S):
        raise OptionError(
            f"{where} {value!r} is not a number of seconds from more than 0 to {MAX_TIMEOUT_S:.0f}"
        )
    return seconds


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
    config, values = read_profile(name, env)
    if "store" in values:
        # Its password is the store's: never sent to a server.
        raise OptionError(
            f"{config}: the profile names a store, not a server of the API; give either "
            "the profile or --url (TOOLKIT_URL), not both"
        )
    credentials = Credentials(
        api_key=env.get("TOOLKIT_API_KEY") or values.get("api_key"),
        username=env.get("TOOLKIT_USERNAME") or values.get("username"),
        password=env.get("TOOLKIT_PASSWORD") or values.get("password"),
        totp_secret=env.get("TOOLKIT_TOTP_SECRET") or values.get("totp_secret"),
    )
    url = base_url or values.get("base_url") or env.get("TOOLKIT_URL")
    if not url:
        raise OptionError("no server: pass --url, set TOOLKIT_URL, or give a profile base_url")
    if env.get(TIMEOUT_ENV):
        timeout_s = timeout_from(env[TIMEOUT_ENV], TIMEOUT_ENV)
    elif values.get("timeout") is not None:
        timeout_s = timeout_from(values["timeout"], f"{config}: timeout")
    else:
        timeout_s = DEFAULT_TIMEOUT_S
    return Profile(
        base_url=check_base_url(str(url)).rstrip("/"),
        site=site or values.get("site") or env.get("TOOLKIT_SITE") or "default",
        credentials=credentials,
        timeout_s=timeout_s,
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
        try:
            answer = response.json()
        except ValueError:
            answer = None
        token = answer.get("token") if isinstance(answer, dict) else None
        if not token:
            raise RemoteError(
                f"authentication at {self.profile.base_url} answered without a token; is it "
                "a server of the API?",
                response.status_code,
            )
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
        timeout_s: float | None = None,
        max_attempts: int = 5,
        backoff_s: float = 0.5,
        max_backoff_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.profile = profile
        self.base_url = check_base_url(profile.base_url)
        self.timeout_s = profile.timeout_s if timeout_s is None else timeout_s
        self.max_attempts = max_attempts
        self.backoff_s = backoff_s
        self.max_backoff_s = max_backoff_s
        self.sleep = sleep
        self.auth = ServiceAuth(profile, clock)
        self.http = httpx.Client(
            base_url=profile.base_url,
            timeout=self.timeout_s,
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
        it is retried only on errors that prove it never reached the server. Whatever
        httpx raises leaves here as a :class:`RemoteError` saying what happened.
        """
        content: bytes | None = None
        headers: dict[str, str] = {}
        if json is not None:
            # UTF-8 as it is, not \uXXXX escapes: the size a push planned is the size sent.
            text = json_module.dumps(json, ensure_ascii=False, separators=(",", ":"))
            content = text.encode("utf-8")
            headers["Content-Type"] = "application/json;charset=UTF-8"
        where = f"{method} {path}"
        last_error: Exception | None = None
        attempts = 0
        for attempt in range(self.max_attempts):
            attempts = attempt + 1
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
                # Never reached the server: safe to try again, unless trying cannot help.
                if _is_tls(exc) or _is_unknown_host(exc):
                    raise RemoteError(f"{self._describe(exc)} ({where})") from exc
                last_error = exc
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
                        f"{self._describe(exc)}, after the request was sent: it may or may "
                        f"not have been done ({where})"
                    ) from exc
                last_error = exc
            except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
                # Nothing a retry mends (a URL httpx refuses, a redirect loop, a bad encoding).
                raise RemoteError(f"{self._describe(exc)} ({where})") from exc
            else:
                if response.is_redirect:
                    # Never followed: a token is not sent on to wherever a server points.
                    location = response.headers.get("Location", "elsewhere")
                    raise RemoteError(
                        f"{where}: {self.base_url} answered HTTP {response.status_code}, a "
                        f"redirect to {location}; give that address as --url",
                        response.status_code,
                    )
                retryable = response.status_code in RETRY_STATUSES and (
                    repeatable or response.status_code in (429, 503)
                )
                if not retryable or attempt == self.max_attempts - 1:
                    if response.is_success:
                        return response
                    raise RemoteError(f"{where}: {_server_message(response)}", response.status_code)
                log.info("%s: %s, retrying", where, response.status_code)
                self._wait(attempt, response)
                continue
            log.info("%s: %s, retrying", where, type(last_error).__name__)
            if attempt < self.max_attempts - 1:
                self._wait(attempt, None)
        assert last_error is not None
        tries = f"{attempts} attempts" if attempts > 1 else "1 attempt"
        if isinstance(last_error, RemoteError):
            raise last_error
        raise RemoteError(f"{self._describe(last_error)} ({where}, {tries})") from last_error

    def _describe(self, exc: Exception) -> str:
        """What went wrong with the server at ``base_url``, in words (never a credential)."""
        url = self.base_url
        seconds = f"{self.timeout_s:g} s"
        if isinstance(exc, httpx.ConnectTimeout):
            return f"connecting to {url} timed out after {seconds} (TOOLKIT_TIMEOUT sets it)"
        if isinstance(exc, httpx.ReadTimeout):
            return f"{url} did not answer within {seconds} (TOOLKIT_TIMEOUT sets how long to wait)"
        if isinstance(exc, httpx.WriteTimeout):
            return f"sending to {url} timed out after {seconds}"
        if isinstance(exc, httpx.PoolTimeout):
            return f"no connection to {url} came free within {seconds}"
        if isinstance(exc, httpx.ConnectError):
            if _is_tls(exc):
                return (
                    f"the TLS handshake with {url} failed ({_reason(exc)}); check http:// "
                    "against https:// and the server's certificate (SSL_CERT_FILE names a "
                    "CA bundle to trust)"
                )
            dns = _dns_error(exc)
            if dns is not None or _is_unknown_host(exc):
                host = httpx.URL(url).host
                why = f": {dns.strerror}" if dns is not None and dns.strerror else ""
                return f"cannot reach {url}: the host name {host!r} does not resolve (DNS{why})"
            if _caused_by(exc, ConnectionRefusedError) or "refused" in str(exc).lower():
                return (
                    f"cannot reach {url}: the connection was refused (is the server running, "
                    "and is the port right?)"
                )
            return f"cannot reach {url}: {_reason(exc)}"
        if isinstance(exc, httpx.RemoteProtocolError):
            return f"{url} broke off or did not answer in HTTP ({_reason(exc)})"
        if isinstance(exc, httpx.ReadError | httpx.WriteError):
            return f"the connection to {url} was cut ({_reason(exc)})"
        if isinstance(exc, httpx.UnsupportedProtocol):
            return f"{url} is not an http:// or https:// URL"
        if isinstance(exc, httpx.TooManyRedirects):
            return f"{url} redirected too many times"
        if isinstance(exc, httpx.DecodingError):
            return f"the answer of {url} could not be decoded ({_reason(exc)})"
        return f"the request to {url} failed ({type(exc).__name__}: {_reason(exc)})"

    def json_of(self, response: httpx.Response) -> Any:
        """The JSON of an answer; an error naming the server when it is not JSON."""
        try:
            return response.json()
        except (ValueError, UnicodeDecodeError) as exc:
            kind = response.headers.get("Content-Type") or "no content type"
            raise RemoteError(
                f"{response.request.method} {response.request.url.path}: {self.base_url} "
                f"answered HTTP {response.status_code} with {kind}, not JSON; is it a server "
                "of the API?",
                response.status_code,
            ) from exc

    def request_json(self, method: str, path: str, **kwargs: Any) -> Any:
        """:meth:`request`, then the answer's JSON."""
        return self.json_of(self.request(method, path, **kwargs))

    def request_object(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """:meth:`request`, then the answer's JSON object (anything else is an error)."""
        return _expect(self.request_json(method, path, **kwargs), dict, method, path)

    def request_list(self, method: str, path: str, **kwargs: Any) -> list[Any]:
        """:meth:`request`, then the answer's JSON array (anything else is an error)."""
        return _expect(self.request_json(method, path, **kwargs), list, method, path)

    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.request_json("GET", path, params=params)

    def post_json(self, path: str, body: Any, *, repeatable: bool = True) -> Any:
        return self.request_json("POST", path, json=body, repeatable=repeatable)


def _expect(value: Any, kind: type[_T], method: str, path: str) -> _T:
    if not isinstance(value, kind):
        wanted = "an object" if kind is dict else "an array"
        raise RemoteError(
            f"{method} {path}: the server answered {type(value).__name__} where the API has "
            f"{wanted}"
        )
    return value


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and what caused it, outermost first (httpx wraps httpcore wraps the OS)."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and current not in seen:
        seen.append(current)
        current = current.__cause__ or current.__context__
    return seen


def _caused_by(exc: BaseException, kind: type[BaseException]) -> bool:
    return any(isinstance(e, kind) for e in _chain(exc))


def _is_tls(exc: BaseException) -> bool:
    """A TLS failure: no retry mends a certificate or a scheme that does not match."""
    return _caused_by(exc, ssl.SSLError) or any(
        "SSL" in str(e) or "CERTIFICATE" in str(e) for e in _chain(exc)
    )


def _dns_error(exc: BaseException) -> socket.gaierror | None:
    """The resolver's error behind ``exc``, if a host name did not resolve."""
    for error in _chain(exc):
        if isinstance(error, socket.gaierror):
            return error
    return None


def _is_unknown_host(exc: BaseException) -> bool:
    """A name the resolver does not know: asking again cannot help (a resolver's temporary
    failure, ``EAI_AGAIN``, is retried)."""
    error = _dns_error(exc)
    if error is not None:
        return error.errno != socket.EAI_AGAIN
    text = str(exc)
    return "Name or service not known" in text or "nodename nor servname" in text


def _reason(exc: BaseException) -> str:
    """The innermost message of ``exc``, cut short."""
    messages = [str(e) for e in _chain(exc) if str(e)]
    text = messages[-1] if messages else type(exc).__name__
    return text if len(text) <= 200 else text[:197] + "..."
