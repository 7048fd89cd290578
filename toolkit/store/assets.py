"""Assets and asset types of one site: bulk writes, reads, the spec's asset search."""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.gc_pause import collector_paused
from toolkit.lazy import lazy
from toolkit.query.filters import Page, TimeBound
from toolkit.store.arrow_read import ApartRead, apart_from
from toolkit.store.bulk_indexes import BULK_INDEX_ROWS, restore_indexes, set_aside_indexes
from toolkit.store.records import ASSET_KIND, Actor, RecordTable
from toolkit.store.sql import Where, add_time_bound, json_path, one_row, page_sql, read_id_keys

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd
    import pyarrow as pa
    import shapely
else:
    np = lazy("numpy")
    pd = lazy("pandas")
    pa = lazy("pyarrow")
    shapely = lazy("shapely")

ASSET_COLUMNS = {"id": "id", "code": "code", "name": "name", "type": "type"}
METRES_PER_DEGREE = 111_320.0
# Rows read at a time for an index (``AssetStore.columns``): few enough that a part's
# Python objects fit in the memory Python's allocator keeps when they are freed. Freed in
# parts of 50,000 rows (30 MB of objects), its arenas went back to the system every time
# and were faulted in afresh for the next: 180,000 page faults and 1.1-1.4 s of system
# CPU to read a million assets, against 13,000 and 0.3 s in parts of 2,000.
READ_ROWS = 2_000
# Every asset of the site, active or not: how many there are decides a read apart.
_SITE_ASSETS = "FROM asset WHERE site_id = ?"


@dataclass(frozen=True)
class NewAssets:
    """Columns of assets to insert, as plain Python lists (or, where the type allows, one
    value for all)."""

    type: Sequence[str] | str
    name: Sequence[str]
    code: Sequence[str | None] | None
    friendly: Sequence[str | None] | None
    region_id: Sequence[int | None] | int | None
    status: Sequence[int] | int
    extra_info: Sequence[str]
    geometry: Sequence[bytes | None]
    bounds: np.ndarray  # (n, 4) min_x, min_y, max_x, max_y; NaN where no geometry
    source: str | None = None
    tags: str = "[]"


def geometry_columns(geometry: np.ndarray) -> tuple[list[bytes | None], np.ndarray]:
    """WKB and bounds of a shapely geometry array, computed on the whole array."""
    # to_wkb gives bytes (or None) already: its list is the column, with no copy of each.
    wkb: list[bytes | None] = shapely.to_wkb(geometry, include_srid=False).tolist()
    return wkb, shapely.bounds(geometry)


def _bounds_lists(bounds: np.ndarray) -> dict[str, list[float | None]]:
    names = ("min_x", "min_y", "max_x", "max_y")
    out: dict[str, list[float | None]] = {}
    for position, name in enumerate(names):
        column = bounds[:, position] if len(bounds) else np.empty(0)
        values: list[float | None] = list(column.tolist())
        for missing in np.flatnonzero(np.isnan(column)).tolist():  # rows without geometry
            values[missing] = None
        out[name] = values
    return out


class AssetStore:
    """The assets of one site."""

    def __init__(
        self, connection: sqlite3.Connection, site_id: int, *, path: Path | None = None
    ) -> None:
        """``path``: the SQLite file ``connection`` is open on, whose large reads may then
        be made in a process apart (:func:`read_apart`); None for PostgreSQL."""
        self.connection = connection
        self.site_id = site_id
        self.path = path
        self.table = RecordTable(ASSET_KIND, site_id)

    def insert_many(
        self,
        conn: sqlite3.Connection,
        assets: NewAssets,
        actor: Actor,
        now: int,
        *,
        ids: Sequence[int] | None = None,
        on_rows: Callable[[int], None] | None = None,
    ) -> list[int]:
        """Insert assets, audited; ``ids`` keeps ids a master system gave them;
        ``on_rows`` hears how many are in so far."""
        columns: dict[str, object] = {
            "type": assets.type,
            "name": assets.name,
            "code": assets.code,
            "friendly": assets.friendly,
            "region_id": assets.region_id,
            "source": assets.source,
            "status": assets.status,
            "extra_info": assets.extra_info,
            "geometry": assets.geometry,
            **_bounds_lists(assets.bounds),
            "tags": assets.tags,
        }
        self.changing(conn)
        self.ensure_types(conn, {assets.type} if isinstance(assets.type, str) else set(assets.type))
        return self.table.insert_many(
            conn, columns, len(assets.name), actor, now, ids=ids, on_rows=on_rows
        )

    def set_aside_indexes(self, conn: sqlite3.Connection, adding: int) -> list[str]:
        """Before ``adding`` new assets are inserted in ``conn``'s transaction: the asset
        table's indexes set aside (``bulk_indexes.set_aside_indexes``), the statements
        that make them again returned for :meth:`restore_indexes`. A new asset's code and
        box go to random places of those indexes: at a million parcels into an empty
        table, keeping them as rows came took ~2.5 s more CPU than one sorted build of
        each after."""
        return set_aside_indexes(conn, "asset", adding, least=BULK_INDEX_ROWS)

    def restore_indexes(self, conn: sqlite3.Connection, statements: Sequence[str]) -> None:
        """Make again the indexes :meth:`set_aside_indexes` dropped."""
        restore_indexes(conn, statements)

    def update_many(
        self,
        conn: sqlite3.Connection,
        ids: Sequence[int],
        extra_info_patches: Sequence[str],
        columns: dict[str, Sequence[object]],
        actor: Actor,
        now: int,
    ) -> int:
        """Patch ``extraInfo`` and set the columns given (None leaves a value alone)."""
        self.changing(conn)
        if "type" in columns:
            self.ensure_types(conn, {str(t) for t in columns["type"] if t is not None})
        return self.table.update_many(conn, ids, extra_info_patches, columns, actor, now)

    def retire_many(
        self, conn: sqlite3.Connection, ids: Sequence[int], actor: Actor, now: int
    ) -> int:
        self.changing(conn)
        return self.table.retire_many(conn, ids, actor, now)

    def changing(self, conn: sqlite3.Connection) -> None:
        """Raise the site's asset version in ``conn``'s transaction, which writes assets.

        First, before any asset is written: on PostgreSQL this holds the site's row until
        the transaction ends, so two that write the same site's assets take it (and then
        the lock on its asset ids) in the same order, and neither waits for the other's."""
        conn.execute(
            "UPDATE site SET asset_version = asset_version + 1 WHERE id = ?", (self.site_id,)
        )

    def ensure_types(self, conn: sqlite3.Connection, names: set[str]) -> None:
        conn.executemany(
            "INSERT OR IGNORE INTO asset_type (site_id, name, friendly) VALUES (?, ?, ?)",
            [(self.site_id, n, n) for n in sorted(names) if n],
        )

    def types(self) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT name, friendly FROM asset_type WHERE site_id = ? ORDER BY name",
            (self.site_id,),
        ).fetchall()

    def ids_taken(self, ids: Sequence[int]) -> set[int]:
        """Which of ``ids`` are already used by an asset of this site (ids are per site)."""
        taken: set[int] = set()
        if len(ids) == 0:
            return taken
        # One range count first: an import of new ids (the usual case) is answered by it
        # instead of a query per 500 ids.
        low, high = min(ids), max(ids)
        if not self.connection.execute(
            "SELECT EXISTS (SELECT 1 FROM asset WHERE site_id = ? AND id BETWEEN ? AND ?)",
            (self.site_id, low, high),
        ).fetchone()[0]:
            return taken
        for start in range(0, len(ids), 500):
            chunk = list(ids[start : start + 500])
            rows = self.connection.execute(
                f"SELECT id FROM asset WHERE site_id = ? AND id IN ({', '.join('?' * len(chunk))})",
                [self.site_id, *chunk],
            )
            taken.update(r[0] for r in rows)
        return taken

    def active_keys(self, key: str, *, locked: bool = False) -> pd.DataFrame:
        """``id`` and ``key`` of the site's active assets, for planning an import.

        ``locked``: the caller's transaction holds the write lock and has changed no asset
        yet, so what is committed is what it would read: many are read in a process apart."""
        params: list[object] = []
        if key in ASSET_COLUMNS:
            key_sql = f"CAST({ASSET_COLUMNS[key]} AS TEXT)"
        else:
            key_sql = "CAST(json_extract(extra_info, ?) AS TEXT)"
            params.append(json_path(key))
        select = (
            f"SELECT id, {key_sql} AS key FROM asset WHERE site_id = ? AND status > 0 ORDER BY id"
        )
        apart = apart_from(self.connection, self.path, _SITE_ASSETS, [self.site_id], locked=locked)
        return read_id_keys(self.connection, apart, select, [*params, self.site_id])

    def ids_by_source_code(
        self, conn: sqlite3.Connection, asset_type: str, source: str, key: str
    ) -> dict[str, int]:
        """Active assets of ``asset_type`` from ``source``: the extraInfo ``key`` -> id
        (the oldest asset where several share a value), e.g. the places a geocoder's
        results were made into."""
        rows = conn.execute(
            "SELECT CAST(json_extract(extra_info, ?) AS TEXT), min(id) FROM asset "
            "WHERE site_id = ? AND status > 0 AND type = ? AND source = ? "
            "AND json_extract(extra_info, ?) IS NOT NULL GROUP BY 1",
            (json_path(key), self.site_id, asset_type, source, json_path(key)),
        )
        return {str(value): int(asset_id) for value, asset_id in rows}

    def get(self, asset_id: int) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                f"SELECT *, {_IMPACTED} AS impacted FROM asset WHERE id = ? AND site_id = ?",
                (asset_id, self.site_id),
            )
        )

    def stamp(self) -> str:
        """Changes whenever the site's assets do (every write raises the site's asset
        version, :meth:`changing`); keys a cached matching index. One row read, where
        counting the active assets read the whole table."""
        row = self.connection.execute(
            "SELECT asset_version FROM site WHERE id = ?", (self.site_id,)
        ).fetchone()
        return f"version-{0 if row is None else int(row[0])}"

    FRAME_COLUMNS = (
        "id",
        "type",
        "code",
        "name",
        "friendly",
        "region_id",
        "source",
        "status",
        "extra_info",
        "geometry",
    )
    BOUNDS_COLUMNS = ("min_x", "min_y", "max_x", "max_y")

    def columns(
        self,
        *,
        active_only: bool = True,
        bounds: bool = False,
        names: Sequence[str] | None = None,
    ) -> pa.Table:
        """The columns ``names`` (default: :data:`FRAME_COLUMNS`, and the boxes with
        ``bounds``) of every asset of the site as an Arrow table, by id: what an index is
        built from, without a pandas copy of each WKB (a million Python bytes objects)."""
        with self.columns_begun(active_only=active_only, bounds=bounds, names=names) as begun:
            return begun.result()

    def columns_begun(
        self,
        *,
        active_only: bool = True,
        bounds: bool = False,
        names: Sequence[str] | None = None,
    ) -> BegunColumns:
        """:meth:`columns`, begun: many assets are read in a process apart while the
        caller goes on (on this thread: :meth:`BegunColumns.result` reads on the store's
        connection where the process apart cannot)."""
        status = "AND status > 0" if active_only else ""
        if names is None:
            names = self.FRAME_COLUMNS + (self.BOUNDS_COLUMNS if bounds else ())
        select = f"SELECT {', '.join(names)} FROM asset WHERE site_id = ? {status} ORDER BY id"
        apart = apart_from(self.connection, self.path, _SITE_ASSETS, [self.site_id])
        read = None if apart is None else ApartRead(apart, select, [self.site_id])
        return BegunColumns(self, select, tuple(names), read)

    def _columns_here(self, select: str, names: tuple[str, ...]) -> pa.Table:
        """The rows of ``select`` (``names``) read on the store's connection."""
        # A million rows make a million tuples, each of which would set off the cyclic
        # collector's scans of everything tracked (a third of the read's CPU); they hold
        # no cycles.
        cursor: Any = self.connection
        if isinstance(cursor, sqlite3.Connection):
            # Plain tuples, which Arrow reads as structs (the site's rows are mappings).
            cursor = cursor.cursor()
            cursor.row_factory = None
        chunks = []
        with collector_paused():
            result = cursor.execute(select, (self.site_id,))
            # A part at a time: the rows' Python objects (1.6 GiB at a million parcels,
            # the build's peak) are let go once Arrow holds their values.
            while rows := result.fetchmany(READ_ROWS):
                chunks.append(_rows_array(rows, names))
                del rows
        return _rows_table(chunks, names)

    def query(
        self,
        *,
        page: Page,
        asset_id: int | None = None,
        fulltext: str | None = None,
        soundex: str | None = None,
        active: bool | None = None,
        asset_type: str | None = None,
        code: str | None = None,
        is_impacted: bool | None = None,
        near: tuple[float, float, float] | None = None,
        since: TimeBound | None = None,
        until: TimeBound | None = None,
    ) -> tuple[list[sqlite3.Row], int]:
        """One page of the spec's asset search (4.7) and the size of the whole result.

        ``near`` is (latitude, longitude, range in metres): assets whose geometry
        comes within that distance of the point.
        """
        where = Where()
        where.add("site_id = ?", self.site_id)
        if asset_id is not None:
            where.add("id = ?", asset_id)
        if fulltext:
            where.add(
                "instr(lower(name || ' ' || coalesce(friendly, '') || ' ' || coalesce(code, '') "
                "|| ' ' || extra_info), ?) > 0",
                fulltext.lower(),
            )
        if soundex:
            where.add("sounds_like(name, ?) = 1", soundex)
        if active is not None:
            where.add("status > 0" if active else "status <= 0")
        if asset_type is not None:
            where.add("type = ?", asset_type)
        if code is not None:
            where.add("code = ?", code)
        if is_impacted is not None:
            where.add(f"{_IMPACTED} = ?", int(is_impacted))
        add_time_bound(where, since)
        add_time_bound(where, until)
        select = f"SELECT *, {_IMPACTED} AS impacted FROM asset WHERE "
        if near is None:
            total = self.connection.execute(
                f"SELECT count(*) FROM asset WHERE {where.sql()}", where.params
            ).fetchone()[0]
            tail, tail_params = page_sql(page)
            rows = self.connection.execute(
                select + where.sql() + tail, [*where.params, *tail_params]
            ).fetchall()
            return rows, total
        # Near a location: a bounding-box range scan in SQL, then exact distances on the
        # candidates as one array, then the page.
        latitude, longitude, range_m = near
        dlat = range_m / METRES_PER_DEGREE
        dlon = range_m / (METRES_PER_DEGREE * max(math.cos(math.radians(latitude)), 1e-6))
        where.add(
            "max_x >= ? AND min_x <= ? AND max_y >= ? AND min_y <= ?",
            longitude - dlon,
            longitude + dlon,
            latitude - dlat,
            latitude + dlat,
        )
        candidates = self.connection.execute(
            select + where.sql() + " ORDER BY id", where.params
        ).fetchall()
        if not candidates:
            return [], 0
        distances = distance_m(
            np.array(shapely.from_wkb([r["geometry"] for r in candidates])), latitude, longitude
        )
        kept = [r for r, d in zip(candidates, distances, strict=True) if d <= range_m]
        key = {"id": "id", "dateCreated": "date_created", "dateModified": "date_modified"}[
            page.order
        ]
        kept.sort(key=lambda r: (r[key], r["id"]), reverse=page.direction == "desc")
        return kept[page.offset : page.offset + page.limit], len(kept)


def distance_m(geometries: np.ndarray, latitude: float, longitude: float) -> np.ndarray:
    """Distances in metres from a point, on a local equirectangular plane (fine within km)."""
    scale_x = METRES_PER_DEGREE * math.cos(math.radians(latitude))

    def to_plane(coords: np.ndarray) -> np.ndarray:
        return np.column_stack(
            ((coords[:, 0] - longitude) * scale_x, (coords[:, 1] - latitude) * METRES_PER_DEGREE)
        )

    planar = shapely.transform(geometries, to_plane)
    return shapely.distance(planar, shapely.Point(0, 0))


# An asset is impacted when it has an active register item (spec 2.2).
# 1 or 0 (not a boolean: PostgreSQL's EXISTS is one, and compares with no integer).
_IMPACTED = (
    "CASE WHEN EXISTS (SELECT 1 FROM item WHERE item.asset_id = asset.id "
    "AND item.site_id = asset.site_id AND item.status > 0) THEN 1 ELSE 0 END"
)


# The Arrow type of each column ``AssetStore.frame`` reads: the rows become one struct
# array in one pass of Arrow's converter over the tuples (0.9 s of CPU at a million
# assets, against 1.6 s for an object grid of them and then each of its columns).
_FRAME_TYPES = {
    "id": "int64",
    "region_id": "int64",
    "status": "int64",
    "geometry": "binary",
    **dict.fromkeys(AssetStore.BOUNDS_COLUMNS, "float64"),
}


@dataclass
class BegunColumns:
    """Asset columns being read (:meth:`AssetStore.columns_begun`)."""

    store: AssetStore
    select: str
    names: tuple[str, ...]
    apart: ApartRead | None

    def result(self) -> pa.Table:
        """The columns: as the process apart read them, else read now on the store's
        connection (call it on the store's thread)."""
        if self.apart is not None:
            read = self.apart.table(pa.schema(list(_struct_type(self.names))))
            if read is not None:
                return read
        return self.store._columns_here(self.select, self.names)

    def close(self) -> None:
        """Stop a read apart whose result was not taken."""
        if self.apart is not None:
            self.apart.close()

    def __enter__(self) -> BegunColumns:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


def _struct_type(names: tuple[str, ...]) -> pa.StructType:
    """The row type of the columns ``names``: each column's Arrow type as a struct field."""
    return pa.struct([(n, getattr(pa, _FRAME_TYPES.get(n, "string"))()) for n in names])


def _rows_array(rows: list[Any], names: tuple[str, ...]) -> pa.StructArray:
    """Result rows of ``names`` as one struct array."""
    array: pa.StructArray = pa.array(rows, type=_struct_type(names))
    return array


def _rows_table(chunks: list[pa.StructArray], names: tuple[str, ...]) -> pa.Table:
    """Parts of the result rows of ``names`` as an Arrow table, one column each."""
    if not chunks:
        return pa.schema(list(_struct_type(names))).empty_table()
    return pa.Table.from_struct_array(pa.chunked_array(chunks, type=_struct_type(names)))
