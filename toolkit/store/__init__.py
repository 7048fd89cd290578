"""The embedded site's storage: the only package that opens the database or writes SQL."""

from __future__ import annotations

from toolkit.store.database import Database, now_ms
from toolkit.store.records import Actor
from toolkit.store.schema import SCHEMA_VERSION
from toolkit.store.site_store import SiteStore

__all__ = ["SCHEMA_VERSION", "Actor", "Database", "SiteStore", "now_ms"]
