"""One route per path, so ``Allow`` names every method of the path, and ``OPTIONS`` answers it.

The route modules declare one ``Route`` per method. Starlette answers a method a
path lacks with 405 and the ``Allow`` of the *first* route whose path matched, so
``DELETE /api/json/item`` said ``Allow: GET, HEAD`` although POST is served there.
:func:`merge_routes` folds the routes of one path into one route that dispatches
on the method, answers ``OPTIONS`` with 204 and the ``Allow`` header (no token or
site needed: it tells only what the public document tells), and answers any other
method 405 ``{status, message}`` with the same, sorted ``Allow``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

Endpoint = Callable[[Request], Awaitable[Response]]


class PathRoute(Route):
    """A route serving every method of one path; 405 with a complete, sorted ``Allow``."""

    def __init__(self, path: str, handlers: dict[str, Endpoint]) -> None:
        self.handlers = dict(handlers)
        if "GET" in self.handlers:
            self.handlers.setdefault("HEAD", self.handlers["GET"])
        self.allow = ", ".join(sorted({*self.handlers, "OPTIONS"}))

        async def dispatch(request: Request) -> Response:
            if request.method == "OPTIONS":
                return Response(status_code=204, headers={"Allow": self.allow})
            return await self.handlers[request.method](request)

        super().__init__(path, dispatch, methods=[*self.handlers, "OPTIONS"])
        self.name = path

    async def handle(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] not in self.handlers and scope["method"] != "OPTIONS":
            raise HTTPException(status_code=405, headers={"Allow": self.allow})
        await self.app(scope, receive, send)


def merge_routes(routes: Iterable[Any]) -> list[Route]:
    """The routes of each path folded into one :class:`PathRoute`, in first-seen order."""
    by_path: dict[str, dict[str, Endpoint]] = {}
    for route in routes:
        handlers = by_path.setdefault(route.path, {})
        for method in sorted(route.methods or ()):
            if method == "HEAD":
                continue
            if method in handlers:
                raise ValueError(f"{method} {route.path} is routed twice")
            handlers[method] = route.endpoint
    return [PathRoute(path, handlers) for path, handlers in by_path.items()]
