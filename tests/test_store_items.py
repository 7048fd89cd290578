"""Register items in a real site file: bulk writes with their audit trail, keys, queries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.errors import StoreError
from toolkit.query.cql import parse_cql
from toolkit.query.filters import Page, TimeBound
from toolkit.store import Database
from toolkit.store.audit import AuditStore
from toolkit.store.items import ItemChanges, ItemStore, NewItems
from toolkit.store.records import Actor


@pytest.fixture
def store(store_location: str | Path) -> tuple[Database, ItemStore]:
    """On each store in turn (SQLite, PostgreSQL): the contract holds on both."""
    db = Database(store_location)
    site = db.site_id("demo", create=True)
    assert site is not None
    return db, ItemStore(db.connection, site)


def _insert(
    db: Database,
    items: ItemStore,
    fields: list[dict[str, object]],
    now: int = 1000,
    event_id: int | None = 1,
) -> range:
    with db.transaction() as conn:
        return items.insert_many(
            conn,
            NewItems(
                register_id="damage",
                event_id=event_id,
                region_id=None,
                asset_id=[None] * len(fields),
                status=[1] * len(fields),
                is_template=[0] * len(fields),
                tags="[]",
                fields=[json.dumps(f) for f in fields],
            ),
            Actor(user_id="officer", message="first load", import_job_id=7),
            now,
        )


def test_insert_many_writes_records_and_one_audit_entry_each(store) -> None:  # type: ignore[no-untyped-def]
    db, items = store
    ids = _insert(db, items, [{"reference": "A"}, {"reference": "B", "level": "Minor"}])
    assert list(ids) == [1, 2]
    row = items.get(2)
    assert row is not None
    assert json.loads(row["fields"]) == {"reference": "B", "level": "Minor"}
    assert (row["status"], row["import_job_id"], row["date_created"]) == (1, 7, 1000)
    audit = db.connection.execute(
        "SELECT action, record_id, item_id, user_id, message, import_job_id, changes "
        "FROM audit_log ORDER BY id"
    ).fetchall()
    assert [tuple(a)[:6] for a in audit] == [
        ("create", 1, 1, "officer", "first load", 7),
        ("create", 2, 2, "officer", "first load", 7),
    ]
    # An import's entries do not copy the record (issue 17); read, they show it as made.
    assert [a["changes"] for a in audit] == [None, None]
    entries, total = AuditStore(db.connection, items.site_id).query(page=Page(10, 0, "id", "asc"))
    assert total == 2
    assert json.loads(entries[1]["changes"]) == {
        "fields": {"reference": "B", "level": "Minor"},
        "assetId": None,
        "status": 1,
    }


def test_update_many_patches_fields_and_audits_the_before_state(store) -> None:  # type: ignore[no-untyped-def]
    db, items = store
    _insert(db, items, [{"reference": "A", "notes": "old", "level": "Minor"}])
    with db.transaction() as conn:
        items.update_many(
            conn,
            ItemChanges(
                ids=[1],
                fields_patch=['{"level":"Severe","notes":null}'],
                asset_id=[55],
                status=[None],
            ),
            Actor(user_id="officer", message="second pass", import_job_id=8),
            2000,
        )
    row = items.get(1)
    assert json.loads(row["fields"]) == {"reference": "A", "level": "Severe"}
    assert (row["asset_id"], row["status"], row["date_modified"], row["date_created"]) == (
        55,
        1,
        2000,
        1000,
    )
    changes = json.loads(
        db.connection.execute("SELECT changes FROM audit_log WHERE action = 'update'").fetchone()[0]
    )
    assert changes["before"]["fields"] == {"reference": "A", "notes": "old", "level": "Minor"}
    assert changes["patch"]["fields"] == {"level": "Severe", "notes": None}


def test_retired_items_stay_stored_but_drop_out_of_the_active_keys(store) -> None:  # type: ignore[no-untyped-def]
    db, items = store
    _insert(db, items, [{"reference": "A"}, {"reference": "B"}])
    with db.transaction() as conn:
        assert items.retire_many(conn, [1], Actor(), 3000) == 1
    keys = items.active_keys("damage", 1, "reference")
    assert keys.to_dict("list") == {"id": [2], "key": ["B"]}
    assert items.get(1)["status"] == 0
    assert items.active_keys("damage", 2, "reference").empty
    assert items.active_keys("damage", 1, "id")["key"].tolist() == ["2"]


def test_a_failed_transaction_keeps_no_item_and_no_audit(store) -> None:  # type: ignore[no-untyped-def]
    db, items = store
    with pytest.raises(ValueError), db.transaction() as conn:
        items.insert_many(
            conn,
            NewItems("damage", 1, None, [None], [1], [0], "[]", ['{"a":1}']),
            Actor(),
            1,
        )
        raise ValueError("crash after the insert")
    counts = db.connection.execute(
        "SELECT (SELECT count(*) FROM item), (SELECT count(*) FROM audit_log)"
    ).fetchone()
    assert tuple(counts) == (0, 0)


def test_query_filters_pages_and_counts_the_whole_set(store) -> None:  # type: ignore[no-untyped-def]
    db, items = store
    _insert(db, items, [{"reference": "A", "inspector": "Jon Smith"}], now=1000)
    _insert(
        db, items, [{"reference": "B", "inspector": "John Smyth", "notes": "flooded"}], now=2000
    )
    _insert(db, items, [{"reference": "C", "inspector": "Ann Lee"}], now=3000, event_id=2)

    def refs(**kwargs: object) -> tuple[list[str], int]:
        rows, total = items.query(page=kwargs.pop("page", Page()), register_id="damage", **kwargs)  # type: ignore[arg-type]
        return [json.loads(r["fields"])["reference"] for r in rows], total

    assert refs() == (["A", "B", "C"], 3)
    assert refs(event_id=2) == (["C"], 1)
    assert refs(since=TimeBound("gt", 1000)) == (["B", "C"], 2)
    assert refs(until=TimeBound("lte", 2000), since=TimeBound("gte", 2000)) == (["B"], 1)
    assert refs(page=Page(limit=1, offset=1, order="dateModified", direction="desc")) == (
        ["B"],
        3,
    )
    assert refs(cql=parse_cql('inspector:~"jon smith"')) == (["A", "B"], 2)
    assert refs(cql=parse_cql("inspector:*SM* AND NOT reference:a")) == (["B"], 1)
    assert refs(cql=parse_cql("flooded OR reference:c")) == (["B", "C"], 2)
    assert refs(cql=parse_cql("is:active eventId:1")) == (["A", "B"], 2)
    assert refs(cql=parse_cql('inspector:"ann lee"')) == (["C"], 1)
    _insert(
        db,
        items,
        [{"reference": "D", "habitable": False}, {"reference": "E", "habitable": True}],
        now=4000,
    )
    assert refs(cql=parse_cql("habitable:false")) == (["D"], 1)
    assert refs(cql=parse_cql("habitable:TRUE OR reference:a")) == (["A", "E"], 2)


def _patch(db: Database, items: ItemStore, patches: list[str], now: int = 2000) -> int:
    with db.transaction() as conn:
        return items.update_many(
            conn,
            ItemChanges(
                ids=list(range(1, len(patches) + 1)),
                fields_patch=patches,
                asset_id=[None] * len(patches),
                status=[None] * len(patches),
            ),
            Actor(user_id="officer", message="again", import_job_id=8),
            now,
        )


def test_update_many_leaves_alone_what_it_would_not_change(store) -> None:  # type: ignore[no-untyped-def]
    """The stored text again, the same object in another key order, or fewer of its keys:
    nothing changes, no audit entry, no new dateModified. A stored explicit null given
    again is removed, as the merge patch removes it (the byte comparison must not call
    that unchanged)."""
    db, items = store
    stored = [
        {"reference": "A", "level": "Minor", "note": "Zoë's"},
        {"reference": "B", "level": "Severe"},
        {"reference": "C", "level": "Minor"},
        {"reference": "D", "level": None},
    ]
    _insert(db, items, stored)
    texts = [items.get(i)["fields"] for i in range(1, 5)]
    reordered = json.dumps({"level": "Severe", "reference": "B"})
    changed = _patch(db, items, [texts[0], reordered, '{"level":"Minor"}', texts[3]])
    assert changed == 1
    assert json.loads(items.get(4)["fields"]) == {"reference": "D"}
    rows = db.connection.execute(
        "SELECT record_id FROM audit_log WHERE action = 'update' ORDER BY record_id"
    ).fetchall()
    assert [r[0] for r in rows] == [4]
    assert [items.get(i)["date_modified"] for i in range(1, 5)] == [1000, 1000, 1000, 2000]
    assert [json.loads(items.get(i)["fields"]) for i in range(1, 4)] == stored[:3]
    # A patch that is the stored text with one value changed is a change.
    assert _patch(db, items, [texts[0].replace("Minor", "Major")], now=3000) == 1
    assert json.loads(items.get(1)["fields"])["level"] == "Major"


def test_sqlite_numbers_new_items_itself_as_the_ids_returned(tmp_path: Path) -> None:
    """On SQLite an item's id is the rowid: new items go in without one and take the
    largest id + 1 each, which are the ids returned and audited (after items of another
    site too: ids are numbered across the file)."""
    db = Database(tmp_path / "site.sqlite")
    first_site, second_site = db.site_id("one", create=True), db.site_id("two", create=True)
    assert first_site is not None and second_site is not None
    statements: list[str] = []
    db.connection.set_trace_callback(statements.append)
    first = _insert(db, ItemStore(db.connection, first_site), [{"reference": "A"}] * 3)
    second = ItemStore(db.connection, second_site)
    ids = _insert(db, second, [{"reference": f"B{i}"} for i in range(4)])
    db.connection.set_trace_callback(None)
    assert (list(first), list(ids)) == ([1, 2, 3], [4, 5, 6, 7])
    inserts = [s for s in statements if s.startswith("INSERT INTO item ")]
    assert len(inserts) == 7 and all(s.startswith("INSERT INTO item (site_id, ") for s in inserts)
    stored = db.connection.execute("SELECT id, site_id, fields FROM item ORDER BY id").fetchall()
    assert [(r[0], r[1]) for r in stored][3:] == [(i, second_site) for i in ids]
    assert [json.loads(r[2])["reference"] for r in stored][3:] == ["B0", "B1", "B2", "B3"]
    audited = db.connection.execute(
        "SELECT record_id FROM audit_log WHERE site_id = ? ORDER BY id", (second_site,)
    ).fetchall()
    assert [r[0] for r in audited] == list(ids)


def test_new_items_numbered_other_than_returned_are_refused(tmp_path: Path) -> None:
    """Should SQLite number the new rows otherwise than the ids the store reckoned (here a
    trigger's row takes id 100 while they go in), the insert fails and its transaction
    is rolled back, rather than return the ids of other rows."""
    db = Database(tmp_path / "site.sqlite")
    site = db.site_id("one", create=True)
    assert site is not None
    items = ItemStore(db.connection, site)
    _insert(db, items, [{"reference": "A"}])
    db.connection.execute(
        "CREATE TEMP TRIGGER jump AFTER INSERT ON main.item WHEN NEW.id = 2 BEGIN "
        "INSERT INTO item (id, site_id, register_id, date_created, date_modified) "
        "VALUES (100, NEW.site_id, 'other', 0, 0); END"
    )
    with pytest.raises(StoreError, match=r"the new item records were numbered up to 102, not 4"):
        _insert(db, items, [{"reference": "B"}] * 3)
    stored = db.connection.execute("SELECT id, fields FROM item ORDER BY id").fetchall()
    assert [(r[0], json.loads(r[1])) for r in stored] == [(1, {"reference": "A"})]
    assert db.connection.execute("SELECT count(*) FROM audit_log").fetchone()[0] == 1


def test_one_status_for_every_item_is_stored_as_a_list_of_them_would_be(tmp_path: Path) -> None:
    """A status and template flag given once for every row (written into the statement,
    as ``_literals`` does for any such column) store what a list of them stores."""
    db = Database(tmp_path / "site.sqlite")
    site = db.site_id("one", create=True)
    assert site is not None
    items = ItemStore(db.connection, site)
    actor = Actor(user_id="officer", message=None, import_job_id=3)
    with db.transaction() as conn:
        common = NewItems("damage", 1, None, [None, 5], 2, 1, "[]", ['{"a":1}', '{"a":2}'])
        items.insert_many(conn, common, actor, 10)
        each = NewItems("damage", 1, None, [None, 5], [2, 2], [1, 1], "[]", ["{}", "{}"])
        items.insert_many(conn, each, actor, 10)
    stored = db.connection.execute("SELECT asset_id, status, is_template FROM item ORDER BY id")
    assert [tuple(r) for r in stored] == [(None, 2, 1), (5, 2, 1)] * 2
