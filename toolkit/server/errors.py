"""Errors as HTTP answers: ``{status, message}`` with the statuses of DESIGN.md.

400 bad input, 401 no or bad token or credentials, 403 authenticated but not
allowed, 404 not found (another site's record too), 405 no such method, 413
over the request size limit, 429 rate limited (with ``Retry-After``), 500
anything unexpected (a generic message; the traceback goes only to the log).
"""

from __future__ import annotations

import logging
import math

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from toolkit.errors import (
    AuthenticationError,
    DiskFullError,
    MatchingError,
    NotFoundError,
    OptionError,
    PermissionDeniedError,
    SourceError,
    StoreError,
    ToolkitError,
)
from toolkit.server.encoding import JsonResponse

log = logging.getLogger("toolkit.server")

INTERNAL_MESSAGE = "internal error; the server's log has the details"


class ApiError(Exception):
    """An answer other than 200, raised anywhere in a request."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class BodyTooLarge(ApiError):
    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request is larger than the limit of {limit} bytes; split an import into "
            "several jobs",
        )


class RateLimited(ApiError):
    def __init__(
        self, retry_after_s: float, message: str = "rate limit reached; retry after {seconds} s"
    ) -> None:
        seconds = max(1, math.ceil(retry_after_s))
        super().__init__(429, message.format(seconds=seconds), {"Retry-After": str(seconds)})


def status_of(exc: ToolkitError) -> int:
    """The HTTP status of a library error."""
    if isinstance(exc, AuthenticationError):
        return 401
    if isinstance(exc, PermissionDeniedError):
        return 403
    if isinstance(exc, NotFoundError):
        return 404
    if isinstance(exc, OptionError | SourceError | MatchingError):
        return 400
    if isinstance(exc, StoreError):
        return 500
    return 400


def error_response(status: int, message: str, headers: dict[str, str] | None = None) -> Response:
    return JsonResponse({"status": status, "message": message}, status_code=status, headers=headers)


def response_for(exc: BaseException, where: str = "") -> Response:
    """The answer for any exception raised while handling a request."""
    if isinstance(exc, ApiError):
        return error_response(exc.status, exc.message, exc.headers)
    if isinstance(exc, ToolkitError):
        status = status_of(exc)
        if status == 500:
            log.error("%s: %s: %s", where, type(exc).__name__, exc)
            # A full disk is worth telling the client (its message names no path).
            message = str(exc) if isinstance(exc, DiskFullError) else INTERNAL_MESSAGE
            return error_response(500, message)
        headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
        return error_response(status, str(exc), headers)
    if isinstance(exc, HTTPException):
        return error_response(exc.status_code, str(exc.detail), dict(exc.headers or {}))
    if isinstance(exc, ClientDisconnect):
        # The client went away, or was cut off for sending its body too slowly: not our fault,
        # no traceback, and nobody reads this answer (the access log records the 408).
        return error_response(408, "the request body did not arrive")
    log.error("%s: unexpected %s", where, type(exc).__name__, exc_info=exc)
    return error_response(500, INTERNAL_MESSAGE)


async def http_exception_handler(_request: Request, exc: Exception) -> Response:
    """Starlette's own 404 (no such path) and 405 (no such method) in our shape."""
    return response_for(exc)


async def unexpected_exception_handler(request: Request, exc: Exception) -> Response:
    return response_for(exc, f"{request.method} {request.url.path}")
