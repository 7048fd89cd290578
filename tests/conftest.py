"""Shared fixtures: a real site file, and rule files written the way users write them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_cluster import Cluster, ClusterUnavailable, start_cluster

from toolkit.store import Actor, Database, SiteStore

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def _site_with_an_event(location: str | Path) -> SiteStore:
    db = Database(location)
    store = SiteStore(db, "demo")
    with db.transaction() as conn:
        store.events.insert(conn, {"name": "Flood 2026", "status": 1}, Actor(), db.clock())
    return store


@pytest.fixture(autouse=True)
def _report_definitions_stay_in_the_test() -> Iterator[None]:
    """`report --reports DIR` hands its folders on in TOOLKIT_REPORTS (for background
    workers), in this process when run through CliRunner: each test starts without and
    leaves none behind, or a later test's catalogue holds another test's definitions."""
    before = os.environ.pop("TOOLKIT_REPORTS", None)
    yield
    os.environ.pop("TOOLKIT_REPORTS", None)
    if before is not None:
        os.environ["TOOLKIT_REPORTS"] = before


@pytest.fixture
def site(tmp_path: Path) -> Iterator[SiteStore]:
    """A new site with one event (id 1) in a fresh file."""
    store = _site_with_an_event(tmp_path / "site.sqlite")
    yield store
    store.db.close()


@pytest.fixture
def sqlite_site(tmp_path: Path) -> Iterator[SiteStore]:
    """``site``, by a name a module that runs ``site`` on both stores can still ask for."""
    store = _site_with_an_event(tmp_path / "site.sqlite")
    yield store
    store.db.close()


@pytest.fixture(params=["sqlite", "postgresql"])
def store_location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Each store in turn: a new SQLite file, then a new PostgreSQL database (the
    contract tests that take it run on both)."""
    if request.param == "sqlite":
        return tmp_path / "site.sqlite"
    url: str = request.getfixturevalue("pg_url")
    return url


@pytest.fixture
def any_site(store_location: str | Path) -> Iterator[SiteStore]:
    """Like ``site``, on each store in turn."""
    store = _site_with_an_event(store_location)
    yield store
    store.db.close()


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
