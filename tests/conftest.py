"""Shared fixtures: a real site file, and rule files written the way users write them."""

from __future__ import annotations

from pathlib import Path

import pytest

from toolkit.store import Actor, Database, SiteStore

RULES = Path(__file__).resolve().parent / "fixtures_rules"


@pytest.fixture
def site(tmp_path: Path) -> SiteStore:
    """A new site with one event (id 1) in a fresh file."""
    db = Database(tmp_path / "site.sqlite")
    store = SiteStore(db, "demo")
    with db.transaction() as conn:
        store.events.insert(conn, {"name": "Flood 2026", "status": 1}, Actor(), db.clock())
    yield store
    db.close()
