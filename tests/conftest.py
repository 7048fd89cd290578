"""Shared fixtures: a real site file, and rule files written the way users write them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_cluster import Cluster, ClusterUnavailable, start_cluster

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


@pytest.fixture(scope="session")
def pg_cluster() -> Iterator[Cluster]:
    """One throwaway PostgreSQL cluster per test session (per xdist worker), started on
    first use; where PostgreSQL cannot be had the tests that need it are skipped with the
    reason, except on CI (``CI`` set), where `.ci/run` installs it and a skip would hide
    a broken set-up."""
    try:
        cluster = start_cluster()
    except ClusterUnavailable as exc:
        if os.environ.get("CI"):
            pytest.fail(f"PostgreSQL tests cannot run on CI: {exc}")
        pytest.skip(f"PostgreSQL not available: {exc}")
    yield cluster
    cluster.stop()


@pytest.fixture
def pg_url(pg_cluster: Cluster) -> Iterator[str]:
    """The URL of a new, empty database of the test cluster (PostGIS, fuzzystrmatch and
    pg_trgm installed), dropped after the test."""
    url = pg_cluster.new_database()
    yield url
    pg_cluster.drop_database(url)
