"""The store's bulk asset insert in a real site file: columns of one value for every row
are written into the statement (SQLite) and read back exactly as bound values; a bulk
insert into a (nearly) empty asset table drops the table's secondary indexes and makes them
again in the same transaction, leaving the same indexes, and a rollback keeps them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pytest
import shapely

from toolkit.store import Database
from toolkit.store.assets import AssetStore, NewAssets, geometry_columns
from toolkit.store.items import ItemStore
from toolkit.store.records import Actor, _literals

TRICKY = [
    "O'Brien's ? file.zip",  # a quote and a placeholder mark inside the text
    "ünïcödé — 'x' \"y\"",
    "",
]


def _assets(count: int, **one: object) -> NewAssets:
    """``count`` boxes; ``one`` sets columns to one value for all."""
    wkb, bounds = geometry_columns(
        np.array([shapely.box(i, -37.0, i + 0.5, -36.5) for i in range(count)])
    )
    columns: dict[str, object] = {
        "type": "Property",
        "name": [f"ASSET {i}" for i in range(count)],
        "code": [f"C{i}" for i in range(count)],
        "friendly": None,
        "region_id": None,
        "status": 1,
        "extra_info": ["{}"] * count,
        "geometry": wkb,
        "bounds": bounds,
    }
    columns.update(one)
    return NewAssets(**columns)  # type: ignore[arg-type]  # the test's own columns


def _stored(db: Database, site_id: int) -> list[tuple[object, ...]]:
    return [
        tuple(r)
        for r in db.connection.execute(
            "SELECT type, code, name, friendly, region_id, source, status, extra_info, "
            "min_x, max_y, tags, import_job_id, date_created FROM asset WHERE site_id = ? "
            "ORDER BY id",
            (site_id,),
        )
    ]


@pytest.mark.parametrize("text", TRICKY)
def test_one_value_for_every_row_is_stored_as_each_row_bound_would_be(
    store_location: str | Path, text: str
) -> None:
    _same_as_bound(Database(store_location), text)


def test_text_holding_a_nul_is_bound_and_kept_whole(tmp_path: Path) -> None:
    # SQL text holds no NUL, so that value is bound on each row (SQLite keeps it whole;
    # PostgreSQL's text holds none at all).
    _same_as_bound(Database(tmp_path / "site.sqlite"), "a\x00b")


def _same_as_bound(db: Database, text: str) -> None:
    one_site, each_site = db.site_id("one", create=True), db.site_id("each", create=True)
    assert one_site is not None and each_site is not None
    big = 2**62 + 7
    actor = Actor(user_id="officer", import_job_id=None)
    with db.transaction() as conn:
        AssetStore(conn, one_site).insert_many(
            conn,
            _assets(3, type=text or "T", friendly=text, region_id=big, status=0, source=text),
            actor,
            1234,
        )
        AssetStore(conn, each_site).insert_many(
            conn,
            _assets(
                3,
                type=[text or "T"] * 3,
                friendly=[text] * 3,
                region_id=[big] * 3,
                status=[0] * 3,
                source=text,
            ),
            actor,
            1234,
        )
    one, each = _stored(db, one_site), _stored(db, each_site)
    assert one == each
    assert one[0][3] == text and one[0][4] == big and one[0][5] == text
    db.close()


def test_literals_are_whole_numbers_none_and_text_only() -> None:
    literals = _literals(
        {"a": None, "b": 7, "c": "it's", "d": True, "e": 1.5, "f": 2**63, "g": "a\x00", "h": [1]}
    )
    assert literals == {"a": "NULL", "b": "7", "c": "'it''s'"}


def _indexes(conn: sqlite3.Connection) -> list[tuple[str, str]]:
    return sorted(
        (str(name), str(sql))
        for name, sql in conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'asset' "
            "AND sql IS NOT NULL"
        )
    )


def test_a_bulk_insert_into_an_empty_table_builds_its_indexes_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolkit.store.assets.BULK_INDEX_ROWS", 3)
    db = Database(tmp_path / "site.sqlite")
    site_id = db.site_id("demo", create=True)
    assert site_id is not None
    assets = AssetStore(db.connection, site_id)
    before = _indexes(db.connection)
    assert [name for name, _ in before] == ["asset_site_code", "asset_site_x"]
    with db.transaction() as conn:
        assert assets.set_aside_indexes(conn, 2) == []  # too few to be worth it
        statements = assets.set_aside_indexes(conn, 4)
        assert sorted(statements) == [sql for _, sql in before]
        assert _indexes(conn) == []
        assets.insert_many(conn, _assets(4), Actor(), 1)
        assets.restore_indexes(conn, statements)
    assert _indexes(db.connection) == before
    assert db.connection.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # The index is used and holds every row.
    plan = db.connection.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM asset WHERE site_id = ? AND code = 'C2'", (site_id,)
    ).fetchall()
    assert "asset_site_code" in str([tuple(r) for r in plan])
    assert (
        db.connection.execute(
            "SELECT count(*) FROM asset INDEXED BY asset_site_x WHERE site_id = ? AND min_x >= 0",
            (site_id,),
        ).fetchone()[0]
        == 4
    )
    with pytest.raises(RuntimeError), db.transaction() as conn:
        # 4 assets held: 3 more are kept in the indexes as they go.
        assert assets.set_aside_indexes(conn, 3) == []
        assert assets.set_aside_indexes(conn, 4) != []  # as many as held: built after
        assert _indexes(conn) == []
        raise RuntimeError("the import failed")  # rolled back: the indexes are as they were
    assert _indexes(db.connection) == before
    db.close()


def test_postgresql_keeps_its_indexes(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("toolkit.store.assets.BULK_INDEX_ROWS", 1)
    monkeypatch.setattr("toolkit.store.items.BULK_INDEX_ROWS", 1)
    db = Database(pg_url)
    site_id = db.site_id("demo", create=True)
    assert site_id is not None
    with db.transaction() as conn:
        assert AssetStore(conn, site_id).set_aside_indexes(conn, 1_000_000) == []
        assert ItemStore(conn, site_id).set_aside_indexes(conn, 1_000_000) == []
    db.close()
