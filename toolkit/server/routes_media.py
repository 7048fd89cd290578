"""Media files (spec 4.10): multipart upload, and download by id (DESIGN.md's path)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from starlette.responses import Response
from starlette.routing import Route

from toolkit.server.calls import Call, endpoint


def upload(call: Call) -> Any:
    """``POST /api/binary/file`` with parts ``name`` and ``file``: the stored file's id."""
    form = call.body
    return call.local.upload_media(form["name"], form["content"], form["content_type"])


def download(call: Call) -> Response:
    """The file's bytes with its stored content type."""
    media_id = call.path_int()
    meta = call.local.get_media(media_id)
    return Response(
        call.local.media_content(media_id),
        headers={
            # Exactly the stored type: Starlette would add a charset to text types.
            "Content-Type": meta["contentType"],
            "Content-Disposition": f"attachment; filename*=UTF-8''{quote(meta['name'])}",
            "X-Content-Type-Options": "nosniff",
        },
    )


ROUTES = [
    Route("/api/binary/file", endpoint(upload, body="form"), methods=["POST"]),
    Route("/api/binary/file/id/{id}", endpoint(download), methods=["GET"]),
]
