"""The ASGI app of ``toolkit serve``: the spec's API over the sites of one site file."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from functools import cache
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from toolkit.model.location import parse_location
from toolkit.server import routes_media, routes_records, routes_rpc
from toolkit.server.errors import (
    error_response,
    http_exception_handler,
    unexpected_exception_handler,
)
from toolkit.server.limits import AccessLogMiddleware, BodyLimitMiddleware
from toolkit.server.routing import merge_routes
from toolkit.server.state import ServerSettings, ServerState
from toolkit.server.tables import SharedFile
from toolkit.site.credentials import dummy_hash
from toolkit.store import Database

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"
OPENAPI_FILE = SCHEMAS / "openapi.json"
REPORT_SCHEMA_NAME = "report-contents.v1.json"


@cache
def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the API, shipped as data in the package."""
    document: dict[str, Any] = json.loads(OPENAPI_FILE.read_text(encoding="utf-8"))
    return document


async def openapi(_request: Request) -> Response:
    return JSONResponse(openapi_document())


async def report_schema(_request: Request) -> Response:
    path = SCHEMAS / REPORT_SCHEMA_NAME
    if not path.exists():
        return error_response(404, f"{REPORT_SCHEMA_NAME} is not shipped with this build")
    return FileResponse(path, media_type="application/schema+json")


def create_app(
    store_path: str | Path,
    *,
    settings: ServerSettings | None = None,
    shared_limits: SharedFile | None = None,
) -> Starlette:
    """The app serving every site of the file at ``store_path`` (which must exist);
    ``shared_limits``: the limits' counts shared with the server's other processes."""
    settings = settings or ServerSettings()
    path = parse_location(store_path)
    # Open (and migrate) the file once up front, so a bad path fails at start, not per call;
    # a server never makes a site file of its own.
    Database(path, create=False).close()
    dummy_hash()  # made now, not on the first login of an unknown username (its timing)
    state = ServerState(path, settings, shared_limits)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            state.shutdown()

    routes = merge_routes(
        [
            *routes_rpc.ROUTES,
            *routes_records.ROUTES,
            *routes_media.ROUTES,
            Route("/api/json/openapi.json", openapi, methods=["GET"]),
            Route(f"/api/json/schemas/{REPORT_SCHEMA_NAME}", report_schema, methods=["GET"]),
        ]
    )
    app = Starlette(
        routes=routes,
        middleware=[
            Middleware(AccessLogMiddleware),
            Middleware(BodyLimitMiddleware, max_bytes=settings.max_body_bytes),
        ],
        exception_handlers={
            HTTPException: http_exception_handler,
            Exception: unexpected_exception_handler,
        },
        lifespan=lifespan,
    )
    app.state.server = state
    return app
