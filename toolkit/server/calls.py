"""One request, from the wire to a ``LocalSite`` method and back.

:func:`endpoint` turns a plain function of a :class:`Call` into a Starlette
endpoint: it reads and parses the JSON body (400 when malformed), checks the
rate limit, then in a worker thread opens the thread's site, checks the token
and the account, and runs the function. What the function returns is sent as
JSON; a ``Response`` is sent as it is; any exception becomes ``{status, message}``.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolkit.errors import AuthenticationError, OptionError, PermissionDeniedError
from toolkit.filters import INT64_MAX, INT64_MIN, parse_int
from toolkit.server.auth import bearer_token
from toolkit.server.errors import ApiError, response_for
from toolkit.server.state import ServerState
from toolkit.site import LocalSite


@dataclass
class Call:
    """What an endpoint function gets: the request's parts, its site and its user."""

    request: Request
    state: ServerState
    site_name: str | None
    body: Any = None
    site: LocalSite | None = None
    user: dict[str, Any] | None = None
    _duty: set[int] | None = field(default=None, repr=False)

    @property
    def params(self) -> dict[str, str]:
        """GET parameters as text; a repeated parameter is an error, never silently dropped."""
        items = self.request.query_params.multi_items()
        names = [name for name, _ in items]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise OptionError(f"parameter(s) given more than once: {', '.join(repeated)}")
        return dict(items)

    def path_int(self, name: str = "id") -> int:
        return parse_int(name, str(self.request.path_params[name]), minimum=0)

    @property
    def local(self) -> LocalSite:
        assert self.site is not None
        return self.site

    def duty(self) -> set[int]:
        """The events the user is on duty in (spec 5, rule 5)."""
        if self._duty is None:
            assert self.user is not None
            self._duty = self.local.duty_events(self.user["id"])
        return self._duty

    def require_duty(self, event_id: object, name: str = "eventId") -> int:
        """The event id (checked as ``name``: missing or malformed is 400), once on duty."""
        if event_id in (None, ""):
            raise OptionError(f"{name} is required: register data is kept within events")
        number = parse_int(name, event_id, minimum=0)
        if number not in self.duty():
            raise PermissionDeniedError(
                f"reading or writing register data of event {number} needs duty in that event"
            )
        return number


Handler = Callable[[Call], Any]


def endpoint(
    handler: Handler, *, authenticated: bool = True, body: str = "json", site: bool = True
) -> Callable[[Request], Awaitable[Response]]:
    """A Starlette endpoint running ``handler`` in a worker thread.

    ``body``: ``json`` (parse the body as JSON), ``form`` (multipart, parsed by the
    handler's ``form`` step) or ``none``. ``site``: the call needs ``X-Site``.
    """

    async def run(request: Request) -> Response:
        state: ServerState = request.app.state.server
        try:
            site_name = request.headers.get("x-site")
            if site and not site_name:
                raise ApiError(400, "the X-Site header is required: the site (tenancy) to use")
            call = Call(request, state, site_name)
            if body == "json" and request.method in ("POST", "PUT", "PATCH"):
                call.body = parse_json(await request.body())
            elif body == "form":
                call.body = await read_form(request)
            token = bearer_token(request.headers.get("authorization"))
            if authenticated:
                if token is None:
                    raise AuthenticationError(
                        "an access token is required: POST /api/json/auth, then send "
                        "Authorization: Bearer <token>"
                    )
                state.limiter.check("token:" + token)
            result = await run_in_threadpool(_in_thread, handler, call, token, authenticated)
        except Exception as exc:  # every failure answers {status, message}
            return response_for(exc, f"{request.method} {request.url.path}")
        if isinstance(result, Response):
            return result
        return JSONResponse(result)

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run


def _in_thread(handler: Handler, call: Call, token: str | None, authenticated: bool) -> Any:
    state = call.state
    if call.site_name:
        if authenticated:
            assert token is not None
            if state.tokens.site_of(token) != call.site_name:
                raise AuthenticationError("the access token is not valid for this site")
        call.site = state.sites.get(call.site_name)
        if authenticated:
            assert token is not None
            secret = state.tokens.secret(call.site_name, call.site.store.auth.secret)
            claims = state.tokens.verify(token, secret, call.site_name)
            call.user = call.site.api_user(claims["sub"], claims.get("key"))
    site = call.site
    if site is None:
        return handler(call)
    # The thread's site is used by one request at a time; writes are audited as the user.
    site.user_id = call.user["username"] if call.user else None
    try:
        return handler(call)
    finally:
        site.user_id = None


# Bounds of a request body's JSON: deeper nesting, longer numbers, numbers the site cannot
# hold (non-finite, outside signed 64-bit) and lone surrogates (not storable as UTF-8) are 400.
MAX_JSON_DEPTH = 64
MAX_NUMBER_CHARS = 100
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class _Refused:
    """A number ``json.loads`` met that is refused; the walk reports it with its path."""

    text: str
    reason: str


def _json_int(text: str) -> int | _Refused:
    # Checked before int(): Python refuses over 4,300 digits with a ValueError of its own.
    number = int(text) if len(text) <= 20 else INT64_MAX + 1
    if not INT64_MIN <= number <= INT64_MAX:
        return _Refused(text, "is out of range (whole numbers from -2^63 to 2^63-1)")
    return number


def _json_float(text: str) -> float | _Refused:
    if len(text) > MAX_NUMBER_CHARS:
        return _Refused(text, f"is longer than {MAX_NUMBER_CHARS} characters")
    number = float(text)
    if not math.isfinite(number):
        return _Refused(text, "is not a finite number")
    return number


def _json_constant(text: str) -> _Refused:
    return _Refused(text, "is not a number (JSON has no NaN or Infinity)")


def _member(path: str, key: str) -> str:
    # ensure_ascii: a path (and so a message) never carries a lone surrogate.
    if _NAME.fullmatch(key):
        return f"{path}.{key[:40]}"
    return f"{path}[{json.dumps(key[:40])}]"


def _cut(path: str) -> str:
    # A path 64 levels deep is long; its start says where the trouble begins.
    return path if len(path) <= 80 else path[:77] + "..."


def _check_text(text: str, path: str) -> None:
    if not text.isascii():
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise OptionError(
                f"the request body's {_cut(path)} holds a lone surrogate (\\ud800 to \\udfff "
                "without its pair), which is not Unicode text"
            ) from None


def check_json(value: Any) -> Any:
    """``value`` (from :func:`parse_json`'s ``json.loads``) once every part is acceptable.

    One walk without recursion: nesting up to :data:`MAX_JSON_DEPTH`, no refused
    number, no lone surrogate in a string or a member name; errors name the JSON path.
    """
    stack: list[tuple[Any, str, int]] = [(value, "$", 0)]
    while stack:
        node, path, depth = stack.pop()
        if isinstance(node, str):
            _check_text(node, path)
        elif isinstance(node, _Refused):
            number = node.text[:40]
            raise OptionError(f"the request body's {_cut(path)}: the number {number} {node.reason}")
        elif isinstance(node, dict | list):
            if depth >= MAX_JSON_DEPTH:
                raise OptionError(
                    f"the request body is nested more than {MAX_JSON_DEPTH} deep at {_cut(path)}"
                )
            if isinstance(node, dict):
                for key, item in node.items():
                    _check_text(key, f"{path} member name")
                    stack.append((item, _member(path, key), depth + 1))
            else:
                stack.extend((item, f"{path}[{i}]", depth + 1) for i, item in enumerate(node))
    return value


def parse_json(raw: bytes) -> Any:
    """The request body as JSON, within the bounds :func:`check_json` sets (else 400)."""
    if not raw.strip():
        raise OptionError("the request body is empty; a JSON object is expected")
    try:
        value = json.loads(
            raw,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
        )
    except UnicodeDecodeError:
        raise OptionError("the request body is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise OptionError(
            f"the request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        # The decoder's own guard, far beyond MAX_JSON_DEPTH, which the walk enforces.
        raise OptionError(f"the request body is nested more than {MAX_JSON_DEPTH} deep") from None
    return check_json(value)


async def read_form(request: Request) -> dict[str, Any]:
    """A multipart upload's parts: ``name`` (text) and ``file`` (bytes, content type)."""
    content_type = request.headers.get("content-type", "")
    if not content_type.startswith("multipart/form-data"):
        raise OptionError("a file upload is multipart/form-data with parts name and file")
    async with request.form(max_files=1, max_fields=10) as form:
        upload = form.get("file")
        if upload is None or isinstance(upload, str):
            raise OptionError("the upload has no part 'file' holding the file")
        name = form.get("name")
        return {
            "name": name if isinstance(name, str) else upload.filename or "",
            "content": await upload.read(),
            "content_type": upload.content_type,
        }
