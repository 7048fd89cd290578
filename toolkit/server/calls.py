"""One request, from the wire to a ``LocalSite`` method and back.

:func:`endpoint` turns a plain function of a :class:`Call` into a Starlette
endpoint: it reads the body, then in a worker thread parses it as JSON (400 when
malformed), opens the thread's site, checks the token, the user's rate limit and
the account, and runs the function. What the function returns is sent as
JSON (encoded in the thread, by :mod:`toolkit.server.encoding`); a ``Response`` is
sent as it is; any exception becomes ``{status, message}``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from toolkit.errors import AuthenticationError, OptionError, PermissionDeniedError
from toolkit.model.visibility import Visibility
from toolkit.query import safejson
from toolkit.query.filters import parse_int
from toolkit.server.auth import bearer_token
from toolkit.server.encoding import JsonResponse
from toolkit.server.errors import ApiError, response_for
from toolkit.server.limits import client_key
from toolkit.server.state import ServerState
from toolkit.site import LocalSite
from toolkit.site.admin import NO_CALLER


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
        """The request's site; a call without a token (``auth``) opens it on first use."""
        if self.site is None:
            assert self.site_name is not None
            self.site = self.state.sites.get(self.site_name)
        return self.site

    def duty(self) -> set[int]:
        """The events the user is on duty in (spec 5, rule 5)."""
        if self._duty is None:
            assert self.user is not None
            self._duty = self.local.duty_events(self.user["id"])
        return self._duty

    def visibility(self) -> Visibility:
        """What the user may see in bulk reads (reports, import jobs): the events on duty
        in, and only the user's own report instances."""
        assert self.user is not None
        return Visibility.of_user(self.user["username"], self.duty())

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
            if authenticated:
                # An address sending refused tokens is stopped before any work is done for it.
                state.refused_tokens.peek(client_of(request))
            site_name = request.headers.get("x-site")
            if site and not site_name:
                raise ApiError(400, "the X-Site header is required: the site (tenancy) to use")
            call = Call(request, state, site_name)
            raw: bytes | None = None
            if body == "json" and request.method in ("POST", "PUT", "PATCH"):
                raw = await request.body()
            elif body == "form":
                call.body = await read_form(request)
            token = bearer_token(request.headers.get("authorization"))
            # Parsing, the handler and encoding the answer run in the thread: CPU work on
            # the event loop would hold up every other connection's reads and writes.
            return await run_in_threadpool(_in_thread, handler, call, raw, token, authenticated)
        except Exception as exc:  # every failure answers {status, message}
            if authenticated and isinstance(exc, AuthenticationError):
                state.refused_tokens.count(client_of(request))
            return response_for(exc, f"{request.method} {request.url.path}")

    run.__name__ = handler.__name__
    run.__doc__ = handler.__doc__
    return run


def _in_thread(
    handler: Handler, call: Call, raw: bytes | None, token: str | None, authenticated: bool
) -> Response:
    """The checks of the request in their order (body, token, site, rate, user), the handler,
    and its answer encoded (a ``Response`` it returns is sent as it is)."""
    if raw is not None:
        call.body = parse_json(raw)
    if authenticated and token is None:
        raise AuthenticationError(
            "an access token is required: POST /api/json/auth, then send "
            "Authorization: Bearer <token>"
        )
    result = _run_handler(handler, call, token, authenticated)
    return result if isinstance(result, Response) else JsonResponse(result)


def _run_handler(handler: Handler, call: Call, token: str | None, authenticated: bool) -> Any:
    state = call.state
    if call.site_name and authenticated:
        assert token is not None
        if state.tokens.site_of(token) != call.site_name:
            raise AuthenticationError("the access token is not valid for this site")
        call.site = state.sites.get(call.site_name)
        secret = state.tokens.secret(call.site_name)
        claims = state.tokens.verify(token, secret, call.site_name)
        # Per user and site, not per token string: a fresh token is not a fresh budget.
        state.limiter.check(f"user:{call.site_name}:{claims['sub']}")
        call.user = call.site.api_user(claims["sub"], claims.get("key"))
    site = call.site
    if site is None:
        return handler(call)
    # The thread's site is used by one request at a time; writes are audited as the user.
    site.user_id = call.user["username"] if call.user else None
    site.caller = call.user or NO_CALLER
    try:
        return handler(call)
    finally:
        site.user_id = None
        site.caller = NO_CALLER


def client_of(request: Request) -> str:
    """The client's address as limits count it (the TCP peer, or a trusted proxy's word)."""
    return client_key(request.client.host if request.client else "-")


def parse_json(raw: bytes) -> Any:
    """The request body as JSON, within the bounds of :mod:`toolkit.query.safejson` (else 400)."""
    if not raw.strip():
        raise OptionError("the request body is empty; a JSON object is expected")
    return safejson.loads(raw, "the request body")


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
