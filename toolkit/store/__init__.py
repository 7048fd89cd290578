"""The embedded site's storage: the only package that opens the database or writes SQL."""

from __future__ import annotations

from toolkit.store.database import Database, now_ms
from toolkit.store.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "Database", "now_ms"]
