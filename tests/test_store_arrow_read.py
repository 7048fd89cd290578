"""Asset columns read in a process apart (the ADBC driver's read into Arrow) are those the
sqlite3 module reads; what that read cannot give is read the plain way, and a caller's
open transaction is read in, not beside."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import shapely

from toolkit.store import Database
from toolkit.store.arrow_read import ApartRead, read_apart
from toolkit.store.assets import AssetStore, NewAssets, geometry_columns
from toolkit.store.items import ItemStore, NewItems
from toolkit.store.records import Actor

ROWS = 3_000


def _assets(path: Path) -> tuple[Database, AssetStore]:
    """A site file of 3,000 assets whose first 1,500 have no code, friendly name, region
    or geometry (the driver's first batches would take those columns for integers), with
    names and extraInfo outside ASCII, and a few retired."""
    db = Database(path)
    site_id = db.site_id("demo", create=True)
    assets = AssetStore(db.connection, site_id, path=path)
    later = np.arange(ROWS) >= ROWS // 2
    west = 143.85 + np.arange(ROWS) * 1e-4
    boxes = shapely.box(west, -37.56, west + 1e-4, -37.5599)
    wkb, bounds = geometry_columns(np.where(later, boxes, None))
    with db.transaction() as conn:
        assets.insert_many(
            conn,
            NewAssets(
                type="Property",
                name=[f"{i} Ōtaki Street, Māngere 街" for i in range(ROWS)],
                code=[str(i) if on else None for i, on in enumerate(later)],
                friendly=[f"parcel {i}" if on else None for i, on in enumerate(later)],
                region_id=[i % 3 if on else None for i, on in enumerate(later)],
                status=[0 if i % 97 == 0 else 1 for i in range(ROWS)],
                extra_info=[json.dumps({"propnum": f"{i:06d}", "note": "é"}) for i in range(ROWS)],
                geometry=wkb,
                bounds=bounds,
            ),
            Actor(user_id="officer"),
            1000,
        )
    return db, assets


@pytest.fixture
def apart(monkeypatch: pytest.MonkeyPatch) -> list[pa.Table | None]:
    """Reads apart from the first row on; what each read apart gave."""
    monkeypatch.setattr("toolkit.store.arrow_read.APART_ROWS", 1)
    given: list[pa.Table | None] = []
    real: Callable[..., pa.Table | None] = ApartRead.table

    def spy(self: ApartRead, schema: pa.Schema) -> pa.Table | None:
        given.append(real(self, schema))
        return given[-1]

    # Asset columns, and (through read_apart) the keys of an import's plan.
    monkeypatch.setattr(ApartRead, "table", spy)
    return given


def test_columns_read_apart_are_those_the_sqlite3_module_reads(
    tmp_path: Path, apart: list[pa.Table | None]
) -> None:
    db, assets = _assets(tmp_path / "site.sqlite")
    with db:
        plain = AssetStore(db.connection, assets.site_id)  # no path: the sqlite3 module
        for active_only in (True, False):
            read = assets.columns(bounds=True, active_only=active_only)
            expected = plain.columns(bounds=True, active_only=active_only)
            assert apart[-1] is not None  # read apart, not fallen back
            assert read.schema == expected.schema
            assert read.combine_chunks().equals(expected.combine_chunks())
        assert read.num_rows == ROWS
        active = assets.columns(names=("id", "friendly", "geometry", "min_x"))
        assert active.num_rows == ROWS - len(range(0, ROWS, 97))
        friendly = active.column("friendly").to_pylist()
        assert friendly[0] is None and friendly[-1] == f"parcel {ROWS - 1}"
        assert active.column("geometry").null_count == len([i for i in range(ROWS // 2) if i % 97])
        assert active.column("min_x").to_pylist()[-1] == pytest.approx(143.85 + (ROWS - 1) * 1e-4)
        # An asset import's keys: a column, and an extraInfo field.
        for key in ("code", "propnum"):
            keys = assets.active_keys(key, locked=True)
            assert apart[-1] is not None
            pd.testing.assert_frame_equal(keys, plain.active_keys(key))
        assert keys["key"].iloc[0] == "000001"
    assert len(apart) == 5


def test_few_assets_are_read_the_plain_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apart: list[pa.Table | None]
) -> None:
    db, assets = _assets(tmp_path / "site.sqlite")
    with db:
        monkeypatch.setattr("toolkit.store.arrow_read.APART_ROWS", ROWS + 1)
        assert assets.columns(names=("id",)).num_rows == ROWS - len(range(0, ROWS, 97))
        assert apart == []
        monkeypatch.setattr("toolkit.store.arrow_read.APART_ROWS", ROWS)
        assets.columns(names=("id",))
        assert len(apart) == 1 and apart[0] is not None


def test_a_caller_in_a_transaction_reads_its_own_uncommitted_assets(
    tmp_path: Path, apart: list[pa.Table | None]
) -> None:
    db, assets = _assets(tmp_path / "site.sqlite")
    with db:
        with db.transaction(commit=False) as conn:  # rolled back
            conn.execute("UPDATE asset SET name = 'RENAMED' WHERE id = (SELECT max(id) FROM asset)")
            names = assets.columns(names=("id", "name")).column("name").to_pylist()
            assert names[-1] == "RENAMED"
            assert apart == []  # a process apart would have read the committed name
        assert (
            assets.columns(names=("name",))
            .column("name")
            .to_pylist()[-1]
            .startswith(f"{ROWS - 1} Ōtaki")
        )
        assert len(apart) == 1


def test_what_cannot_be_read_apart_is_read_the_plain_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, apart: list[pa.Table | None]
) -> None:
    db, assets = _assets(tmp_path / "site.sqlite")
    with db:
        plain = AssetStore(db.connection, assets.site_id).columns(bounds=True)
        # The child cannot start its work (as when the driver is not installed).
        monkeypatch.setattr("toolkit.store.arrow_read.CHILD", tmp_path / "missing.py")
        read = assets.columns(bounds=True)
        assert apart == [None]
        assert read.combine_chunks().equals(plain.combine_chunks())
        # No interpreter to start (a program embedding Python).
        monkeypatch.setattr("toolkit.store.arrow_read.sys.executable", "")
        assert assets.columns(bounds=True).combine_chunks().equals(plain.combine_chunks())
        assert apart == [None, None]


def test_read_apart_gives_none_for_a_failed_query_or_other_types(tmp_path: Path) -> None:
    db, _assets_store = _assets(tmp_path / "site.sqlite")
    db.close()
    path = tmp_path / "site.sqlite"
    number = pa.schema([("x", pa.float64())])
    assert read_apart(path, "SELECT x FROM no_such_table", [], number) is None
    # Text where a number is wanted: the caller's own read reports it.
    assert read_apart(path, "SELECT 'abc' AS x", [], number) is None
    both = read_apart(path, "SELECT 2.5 AS x UNION ALL SELECT NULL", [], number)
    assert both is not None and both.column("x").to_pylist() == [2.5, None]
    # An empty result still has the columns asked for.
    empty = read_apart(path, "SELECT id AS x FROM asset WHERE 0", [], number)
    assert empty is not None and empty.num_rows == 0 and empty.schema == number


def test_read_apart_binds_its_parameters_by_position(tmp_path: Path) -> None:
    db, _assets_store = _assets(tmp_path / "site.sqlite")
    db.close()
    schema = pa.schema([("id", pa.int64()), ("name", pa.string())])
    # A quote, a question mark and text outside ASCII travel as values, never as SQL.
    named = "7 Ōtaki Street, Māngere 街' OR '1'='1 ?"
    read = read_apart(
        tmp_path / "site.sqlite",
        "SELECT id, name FROM asset WHERE (name = ? OR name LIKE ?) AND id > ? ORDER BY id",
        [named, "12 Ō%", 0.5],
        schema,
    )
    assert read is not None
    assert read.column("name").to_pylist() == ["12 Ōtaki Street, Māngere 街"]


def _items(db: Database, site_id: int, path: Path) -> ItemStore:
    """3,000 items of one register and event: references outside ASCII, with quotes, or
    missing (the first 1,500 have none), a few retired; 10 of another event."""
    items = ItemStore(db.connection, site_id, path=path)
    fields = [
        json.dumps({"reference": f"DA-{i:05d} «Ō'»"} if i >= ROWS // 2 else {"note": "none"})
        for i in range(ROWS)
    ]
    with db.transaction() as conn:
        n = ROWS
        items.insert_many(
            conn, NewItems("damage", 1, None, [None] * n, [1] * n, [0] * n, "[]", fields),
            Actor(), 2000,
        )  # fmt: skip
        items.insert_many(
            conn, NewItems("damage", 2, None, [None] * 10, [1] * 10, [0] * 10, "[]", ["{}"] * 10),
            Actor(), 2000,
        )  # fmt: skip
        conn.execute("UPDATE item SET status = 0 WHERE id % 101 = 0")
    return items


@pytest.mark.parametrize("key", ["reference", "event_id"])
def test_item_keys_read_apart_are_those_the_sqlite3_module_reads(
    tmp_path: Path, apart: list[pa.Table | None], key: str
) -> None:
    db, assets = _assets(tmp_path / "site.sqlite")
    with db:
        items = _items(db, assets.site_id, tmp_path / "site.sqlite")
        plain = ItemStore(db.connection, assets.site_id).active_keys("damage", 1, key)
        read = items.active_keys("damage", 1, key)
        assert apart[-1] is not None
        pd.testing.assert_frame_equal(read, plain)
        assert len(read) == ROWS - len(range(101, ROWS + 1, 101))
        if key == "reference":
            assert read["key"].isna().sum() == len([i for i in range(1, ROWS // 2 + 1) if i % 101])
            assert read["key"].iloc[-1] == f"DA-{ROWS - 1:05d} «Ō'»"
        # In a transaction that has changed no item yet (an import's plan, under the
        # write lock), and in one that has: the changed one is read the plain way.
        with db.transaction(commit=False) as conn:
            assert len(items.active_keys("damage", 1, key, locked=True)) == len(read)
            assert apart[-1] is not None and len(apart) == 2
            conn.execute("UPDATE item SET status = 0 WHERE id = 2")
            assert len(items.active_keys("damage", 1, key)) == len(read) - 1
            assert len(apart) == 2
        assert len(items.active_keys("damage", 2, key)) == 10


def test_an_import_plans_against_keys_read_apart_as_against_those_read_plainly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolkit.importing.pipeline import ImportRequest
    from toolkit.site import LocalSite

    sample = Path(__file__).resolve().parent.parent / "sample_data"
    counts = {}
    for mode in ("plain", "apart"):
        reads: list[pa.Table | None] = []

        def spy(*args: Any, reads: list[pa.Table | None] = reads) -> pa.Table | None:
            reads.append(read_apart(*args))
            return reads[-1]

        monkeypatch.setattr("toolkit.store.sql.read_apart", spy)
        monkeypatch.setattr("toolkit.store.arrow_read.APART_ROWS", 1 if mode == "apart" else 10**9)
        with LocalSite(tmp_path / f"{mode}.sqlite", "default") as site:
            site.run_import(ImportRequest("asset", "property-assets", sample / "parcels.zip"))
            event = site.create_event({"name": "Storm"})["id"]
            jobs = [
                site.run_import(
                    ImportRequest(
                        "item",
                        "damage-assessments",
                        sample / "damage_assessments.csv",
                        event_id=event,
                        region_id=1,
                    )
                )
                for _ in range(2)
            ]
        counts[mode] = [job["summary"]["counts"] for job in jobs]
        # The second import's plan read the items' keys apart (the first found none).
        assert len(reads) == (1 if mode == "apart" else 0)
        assert all(read is not None for read in reads)
    assert counts["apart"] == counts["plain"]
    first, again = counts["apart"]
    assert first["inserted"] > 900 and again["inserted"] == 0
    assert again["unchanged"] == first["inserted"]


def test_columns_begun_are_read_apart_while_the_caller_reads_on(
    tmp_path: Path, apart: list[pa.Table | None]
) -> None:
    db, assets = _assets(tmp_path / "site.sqlite")
    with db:
        with assets.columns_begun(names=("id", "name", "geometry")) as begun:
            # The store's connection is the caller's meanwhile (an index build reads the
            # names while the other columns are read apart).
            names = assets.columns(names=("id", "name"))
            read = begun.result()
        assert len(apart) == 2 and all(table is not None for table in apart)
        expected = AssetStore(db.connection, assets.site_id).columns(
            names=("id", "name", "geometry")
        )
        assert read.combine_chunks().equals(expected.combine_chunks())
        assert read.column("name").equals(names.column("name"))


def test_a_read_begun_and_never_taken_stops_its_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = _assets(tmp_path / "site.sqlite")
    db.close()
    started: list[subprocess.Popen[bytes]] = []
    popen = subprocess.Popen

    def spy(*args: Any, **kwargs: Any) -> subprocess.Popen[bytes]:
        started.append(popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr("toolkit.store.arrow_read.subprocess.Popen", spy)
    # Every row many times over: more than the pipe holds, so the child waits to write.
    query = "SELECT a.name FROM asset a CROSS JOIN asset b LIMIT 2000000"
    with ApartRead(tmp_path / "site.sqlite", query, []) as read:
        assert started[0].poll() is None  # reading
    assert started[0].returncode is not None and started[0].stdout is not None
    assert started[0].stdout.closed
    assert read.table(pa.schema([("name", pa.large_string())])) is None  # closed: no table
