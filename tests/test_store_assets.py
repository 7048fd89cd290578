"""Assets in a real site file: writes with geometry, the spec's search filters, impact."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import shapely

from toolkit.query.filters import Page
from toolkit.site.index_cache import site_asset_index
from toolkit.store import Database, SiteStore
from toolkit.store.assets import AssetStore, NewAssets, geometry_columns
from toolkit.store.items import ItemStore, NewItems
from toolkit.store.records import Actor

# Two parcels in Ballarat sharing an edge, ~88 m wide, and one asset without geometry.
WEST = shapely.box(143.850, -37.561, 143.851, -37.560)
EAST = shapely.box(143.851, -37.561, 143.852, -37.560)


@pytest.fixture
def site(store_location: str | Path) -> tuple[Database, AssetStore]:
    """On each store in turn (SQLite, PostgreSQL): the contract holds on both."""
    db = Database(store_location)
    site_id = db.site_id("demo", create=True)
    assets = AssetStore(db.connection, site_id)  # type: ignore[arg-type]
    wkb, bounds = geometry_columns(np.array([WEST, EAST, None]))
    with db.transaction() as conn:
        ids = assets.insert_many(
            conn,
            NewAssets(
                type=["Property", "Property", "Bridge"],
                name=["12 SMITH STREET BALLARAT", "14 SMITH STREET BALLARAT", "SMYTHE BRIDGE"],
                code=["201", "202", "B1"],
                friendly=[None, None, "Smythe bridge over the creek"],
                region_id=None,
                status=1,
                extra_info=['{"propnum":"005123"}', '{"propnum":"005124"}', "{}"],
                geometry=wkb,
                bounds=bounds,
            ),
            Actor(user_id="officer"),
            1000,
            ids=[100001, 100002, 100003],
        )
    assert ids == [100001, 100002, 100003]
    return db, assets


def _ids(result: tuple[list, int]) -> tuple[list[int], int]:
    rows, total = result
    return [r["id"] for r in rows], total


def test_assets_keep_given_ids_geometry_and_types(site) -> None:  # type: ignore[no-untyped-def]
    _db, assets = site
    row = assets.get(100001)
    assert shapely.equals(shapely.from_wkb(row["geometry"]), WEST)
    assert (row["min_x"], row["max_y"]) == (143.850, -37.560)
    assert assets.get(100003)["geometry"] is None
    assert [tuple(t) for t in assets.types()] == [("Bridge", "Bridge"), ("Property", "Property")]
    assert assets.ids_taken([100002, 5]) == {100002}
    keys = assets.active_keys("propnum")
    assert keys["key"].fillna("-").tolist() == ["005123", "005124", "-"]
    frame = assets.columns().to_pandas()
    assert frame["id"].tolist() == [100001, 100002, 100003]
    assert json.loads(frame["extra_info"][0]) == {"propnum": "005123"}


def test_the_frame_for_an_index_holds_every_column_and_the_stored_boxes(site) -> None:  # type: ignore[no-untyped-def]
    _db, assets = site
    frame = assets.columns(bounds=True).to_pandas()
    rows = assets.connection.execute(
        f"SELECT {', '.join(assets.FRAME_COLUMNS)} FROM asset ORDER BY id"
    ).fetchall()
    for i, name in enumerate(assets.FRAME_COLUMNS):
        expected = [r[i] for r in rows]
        got = [None if v is None or v is pd.NA or v != v else v for v in frame[name].tolist()]
        if name == "geometry":  # PostGIS gives hex WKB, kept as its bytes: the same shapes
            assert shapely.equals(shapely.from_wkb(got[:2]), [WEST, EAST]).all()
            assert got[2] is None
        else:
            assert got == expected, name
    boxes = frame[list(assets.BOUNDS_COLUMNS)].to_numpy(dtype=np.float64)
    np.testing.assert_array_equal(boxes, shapely.bounds(np.array([WEST, EAST, None])))
    empty = assets.columns(active_only=True, bounds=True).to_pandas().iloc[:0]
    assert list(empty.columns) == [*assets.FRAME_COLUMNS, *assets.BOUNDS_COLUMNS]


def test_the_columns_read_in_parts_are_those_read_at_once(site, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    _db, assets = site
    whole = assets.columns(bounds=True)
    # Two rows a part: three rows make two parts, joined into the same columns.
    monkeypatch.setattr("toolkit.store.assets.READ_ROWS", 2)
    parts = assets.columns(bounds=True)
    assert parts.column("id").num_chunks == 2
    assert parts.combine_chunks().equals(whole.combine_chunks())
    assert parts.column("id").to_pylist() == [100001, 100002, 100003]
    # Only the columns asked for, of active assets.
    some = assets.columns(names=("id", "geometry"))
    assert some.column_names == ["id", "geometry"] and some.num_rows == 3
    monkeypatch.setattr("toolkit.store.assets.READ_ROWS", 1)
    assert assets.columns(names=("id",)).column("id").to_pylist() == [100001, 100002, 100003]


def test_search_filters(site) -> None:  # type: ignore[no-untyped-def]
    _db, assets = site
    page = Page()
    assert _ids(assets.query(page=page)) == ([100001, 100002, 100003], 3)
    assert _ids(assets.query(page=page, code="202")) == ([100002], 1)
    assert _ids(assets.query(page=page, asset_type="Bridge")) == ([100003], 1)
    assert _ids(assets.query(page=page, fulltext="creek")) == ([100003], 1)
    assert _ids(assets.query(page=page, fulltext="005124")) == ([100002], 1)
    assert _ids(assets.query(page=page, soundex="smith")) == ([100001, 100002, 100003], 3)
    assert _ids(assets.query(page=Page(limit=1, offset=1))) == ([100002], 3)


def test_near_a_location_measures_metres(site) -> None:  # type: ignore[no-untyped-def]
    _db, assets = site
    # A point 50 m west of the west parcel: about 50 m from WEST, 138 m from EAST.
    lon = 143.850 - 50 / (111_320 * np.cos(np.radians(-37.5605)))
    assert _ids(assets.query(page=Page(), near=(-37.5605, lon, 60))) == ([100001], 1)
    assert _ids(assets.query(page=Page(), near=(-37.5605, lon, 150))) == ([100001, 100002], 2)
    assert _ids(assets.query(page=Page(), near=(-37.5605, lon, 40))) == ([], 0)


def test_an_asset_with_an_active_item_is_impacted(site) -> None:  # type: ignore[no-untyped-def]
    db, assets = site
    items = ItemStore(db.connection, assets.site_id)
    with db.transaction() as conn:
        ids = items.insert_many(
            conn,
            NewItems("damage", 1, None, [100002, 100001], [1, 1], [0, 0], "[]", ["{}", "{}"]),
            Actor(),
            2000,
        )
        items.retire_many(conn, [ids[1]], Actor(), 2001)
    assert _ids(assets.query(page=Page(), is_impacted=True)) == ([100002], 1)
    assert _ids(assets.query(page=Page(), is_impacted=False)) == ([100001, 100003], 2)
    assert assets.get(100002)["impacted"] == 1


def test_updates_and_retirements_are_audited(site) -> None:  # type: ignore[no-untyped-def]
    db, assets = site
    with db.transaction() as conn:
        assets.update_many(
            conn,
            [100001],
            ['{"propnum":null,"lot":"7"}'],
            {"name": ["12 SMITH ST"]},
            Actor(message="fix"),
            3000,
        )
        assets.retire_many(conn, [100003], Actor(), 3000)
    row = assets.get(100001)
    assert (row["name"], json.loads(row["extra_info"])) == ("12 SMITH ST", {"lot": "7"})
    assert _ids(assets.query(page=Page(), active=False)) == ([100003], 1)
    actions = db.connection.execute(
        "SELECT action, record_type, record_id, message FROM audit_log ORDER BY id"
    ).fetchall()
    assert [tuple(a) for a in actions][-2:] == [
        ("update", "asset", 100001, "fix"),
        ("retire", "asset", 100003, None),
    ]


@pytest.mark.parametrize("given", [[300, 7, 250], [500, 501, 502, 503]])
def test_given_ids_in_any_order_each_get_a_creation_entry(site, given) -> None:  # type: ignore[no-untyped-def]
    """Consecutive ascending ids are audited by range, others through the id table: either
    way one creation entry per new asset, none for the assets already there."""
    db, assets = site
    n = len(given)
    assert assets.ids_taken(given) == set()
    with db.transaction() as conn:
        ids = assets.insert_many(
            conn,
            NewAssets(
                type="Property",
                name=[f"PARCEL {i}" for i in given],
                code=[None] * n,
                friendly=[None] * n,
                region_id=None,
                status=1,
                extra_info=["{}"] * n,
                geometry=[None] * n,
                bounds=np.full((n, 4), np.nan),
            ),
            Actor(import_job_id=None, user_id="officer"),
            2000,
            ids=given,
        )
    assert ids == given
    created = db.connection.execute(
        "SELECT record_id FROM audit_log WHERE action = 'create' AND date_created = 2000 "
        "ORDER BY record_id"
    ).fetchall()
    assert [r[0] for r in created] == sorted(given)
    assert assets.ids_taken([given[0], 100002, 99]) == {given[0], 100002}


def test_every_write_of_assets_makes_the_cached_index_stale(site) -> None:  # type: ignore[no-untyped-def]
    """The cached matching index is keyed by the site's asset version, which each write
    raises in its own transaction: a change made in the same millisecond as the import
    (which counting the assets missed when the count did not change) is seen, and a write
    rolled back changes nothing."""
    db, _assets = site
    store = SiteStore(db, "demo", create=False)
    first = site_asset_index(store)
    stamp = store.assets.stamp()
    assert site_asset_index(store).assets.equals(first.assets)  # from the cache
    assert store.index_cache.get(stamp) is not None

    with db.transaction() as conn:  # same clock as the insert, same number of assets
        store.assets.update_many(conn, [100002], ["{}"], {"name": ["16 SMITH ST"]}, Actor(), 1000)
    assert store.assets.stamp() != stamp
    renamed = site_asset_index(store)
    assert renamed.assets["name"].tolist()[1] == "16 SMITH ST"

    stamp = store.assets.stamp()
    with pytest.raises(RuntimeError), db.transaction() as conn:
        store.assets.retire_many(conn, [100001], Actor(), 1000)
        raise RuntimeError("the write fails")
    assert store.assets.stamp() == stamp
    assert len(site_asset_index(store)) == 3

    with db.transaction() as conn:
        store.assets.retire_many(conn, [100001], Actor(), 1000)
    assert store.assets.stamp() != stamp
    assert site_asset_index(store).assets["id"].tolist() == ["100002", "100003"]
    # Another site's writes leave this site's version alone.
    stamp = store.assets.stamp()
    other = SiteStore(db, "other")
    with db.transaction() as conn:
        other.assets.retire_many(conn, [100002], Actor(), 1000)
    assert store.assets.stamp() == stamp
