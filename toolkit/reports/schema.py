"""The JSON Schema of report contents (spec 4.5), shipped with the package.

The embedded site points ``$schema`` at the packaged file; a server points it at
its own URL, where it serves the same file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCHEMA_NAME = "report-contents.v1.json"
SCHEMA_FILE = Path(__file__).resolve().parent.parent / "schemas" / SCHEMA_NAME
SERVER_PATH = f"/api/json/schemas/{SCHEMA_NAME}"


def schema_url(base_url: str | None = None) -> str:
    """``$schema`` of report contents: the packaged file, or the file as ``base_url`` serves it."""
    if base_url is None:
        return SCHEMA_FILE.as_uri()
    return base_url.rstrip("/") + SERVER_PATH


def load_schema() -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    return schema
