"""Copying one site from one store to another (SQLite to PostgreSQL and back), whole.

Ids are kept as they are (audit entries, links and reports name records by id), so the
target store must not hold the site yet, nor any record whose id the site's records use.
Everything is written in one transaction of the target and each table's count is checked
against the source before it commits: a copy is whole or not there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from toolkit.errors import StoreError
from toolkit.store.database import Database

BATCH_ROWS = 10_000

# Each table of a site, parents first, with the rows that are the site's (``?`` its id).
SITE_TABLES: tuple[tuple[str, str], ...] = (
    ("site", "id = ?"),
    ("event", "site_id = ?"),
    ("register", "site_id = ?"),
    ("asset_type", "site_id = ?"),
    ("asset", "site_id = ?"),
    ("item", "site_id = ?"),
    ("user", "site_id = ?"),
    ("duty", "user_id IN (SELECT id FROM user WHERE site_id = ?)"),
    ("api_key", "user_id IN (SELECT id FROM user WHERE site_id = ?)"),
    ("site_secret", "site_id = ?"),
    ("audit_log", "site_id = ?"),
    ("media", "site_id = ?"),
    ("import_job", "site_id = ?"),
    ("import_link", "job_id IN (SELECT id FROM import_job WHERE site_id = ?)"),
    ("report_instance", "site_id = ?"),
    ("report_snapshot", "instance_id IN (SELECT id FROM report_instance WHERE site_id = ?)"),
    ("match_decision", "site_id = ?"),
    ("asset_index_cache", "site_id = ?"),
    ("asset_index_part", "site_id = ?"),
    ("gazetteer", "site_id = ?"),
    ("gazetteer_part", "gazetteer_id IN (SELECT id FROM gazetteer WHERE site_id = ?)"),
)
# Tables whose ids are unique across the whole store (asset ids are per site).
_STORE_WIDE_IDS = (
    "event",
    "item",
    "user",
    "api_key",
    "audit_log",
    "media",
    "import_job",
    "report_instance",
    "gazetteer",
)
_SITE_ROWS = dict(SITE_TABLES)


@dataclass(frozen=True)
class CopyResult:
    site: str
    counts: dict[str, int]


def copy_site(
    source: Database,
    target: Database,
    name: str,
    *,
    on_table: Callable[[str, int], None] | None = None,
) -> CopyResult:
    """Copy the site ``name`` of ``source`` into ``target``; the rows copied per table."""
    site_id = source.site_id(name)
    if site_id is None:
        raise StoreError(f"{source.display} holds no site {name!r}; its sites: "
                         f"{', '.join(source.sites()) or 'none'}")  # fmt: skip
    if target.site_id(name) is not None:
        raise StoreError(f"{target.display} holds a site {name!r} already; nothing copied")
    _refuse_clashes(source, target, site_id)
    counts: dict[str, int] = {}
    with target.transaction() as out:
        for table, where in SITE_TABLES:
            columns = _columns(source, table)
            select = ", ".join(_readable(source, table, c) for c in columns)
            rows = source.connection.execute(
                f"SELECT {select} FROM {table} WHERE {where}", (site_id,)
            )
            insert = (
                f"INSERT INTO {table} ({', '.join(columns)}) "
                f"VALUES ({', '.join('?' * len(columns))})"
            )
            copied = 0
            while batch := rows.fetchmany(BATCH_ROWS):
                out.executemany(insert, [tuple(r) for r in batch])
                copied += len(batch)
            there = out.execute(
                f"SELECT count(*) FROM {table} WHERE {where}", (site_id,)
            ).fetchone()
            if there is None or int(there[0]) != copied:
                raise StoreError(
                    f"copying {table}: {copied} rows read but {there[0] if there else 0} "
                    "in the target; nothing copied"
                )
            counts[table] = copied
            if on_table is not None:
                on_table(table, copied)
    target.sync_ids()
    return CopyResult(name, counts)


def _refuse_clashes(source: Database, target: Database, site_id: int) -> None:
    """Ids are kept, so the target may hold none of the site's."""
    if target.connection.execute("SELECT 1 FROM site WHERE id = ?", (site_id,)).fetchone():
        raise StoreError(
            f"{target.display} has another site with id {site_id}; copy into a new store"
        )
    for table in _STORE_WIDE_IDS:
        span = source.connection.execute(
            f"SELECT min(id), max(id) FROM {table} WHERE {_SITE_ROWS[table]}", (site_id,)
        ).fetchone()
        if span is None or span[0] is None:
            continue
        clash = target.connection.execute(
            f"SELECT count(*) FROM {table} WHERE id BETWEEN ? AND ?", (span[0], span[1])
        ).fetchone()
        if clash is not None and int(clash[0]):
            raise StoreError(
                f"{target.display} holds {table} records with the ids of this site's "
                "(ids are kept by a copy); copy into a new store"
            )


def _columns(db: Database, table: str) -> list[str]:
    cursor = db.connection.execute(f"SELECT * FROM {table} WHERE 1 = 0")
    return [str(d[0]) for d in cursor.description]


def _readable(db: Database, table: str, column: str) -> str:
    """A column as the other store takes it: PostGIS geometry as WKB bytes."""
    if db.dialect == "postgresql" and table == "asset" and column == "geometry":
        return "ST_AsBinary(geometry) AS geometry"
    return column
