"""An asset import read in parts is inserted part by part as it is read (the next part read
in a thread meanwhile), in one transaction: it gives exactly what the import read as one
part gives. Counts, rejects with their rows, stored assets, ids and audit entries, for a
first import, a re-import of updates with keys repeated across parts, deleteAndInsert, a
dry run, a rolled-back run with a bad row in a late part, and ids given by only some rows."""

from __future__ import annotations

import contextlib
import csv
import errno
import inspect
import io
import json
import pickle
import sqlite3
import threading
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pyogrio
import pytest
from click.testing import CliRunner
from set_aside import counted_set_aside

from toolkit.cli import cli
from toolkit.importing import parts as parts_module
from toolkit.importing.pipeline import ImportRequest, ImportRunner
from toolkit.importing.streamed import read_ahead, read_in_turn
from toolkit.store import SiteStore
from toolkit.store.assets import AssetStore

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
RULES = SAMPLE.parent / "pipelines"
ASSETS = "SELECT * FROM asset ORDER BY id"
AUDIT = (
    "SELECT id, action, record_type, record_id, changes, message, import_job_id "
    "FROM audit_log ORDER BY id"
)
# 36 assets in parts of 5 rows: 8 parts.
PARTS = {"TOOLKIT_CHUNK_ROWS": "5"}
ONE_PART = {"TOOLKIT_CHUNK_ROWS": "100000"}


def _rows() -> list[dict[str, str]]:
    with (SAMPLE / "assets.csv").open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def _write(path: Path, rows: list[dict[str, str]]) -> Path:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=list(rows[0]))
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _files(folder: Path) -> dict[str, Path]:
    rows = _rows()
    changed = [dict(r) for r in rows]
    for row in changed[:10]:
        row["name"] = row["name"] + " (renamed)"
    changed[29]["code"] = changed[1]["code"]  # repeats row 2, in another part: refused
    changed[32]["name"] = ""  # required: refused, in the last part but one
    changed.extend(
        {**rows[0], "id": str(990_000 + i), "code": f"NEW-{i}", "name": f"NEW {i}"}
        for i in range(1, 4)
    )
    some_ids = [dict(r) for r in rows]
    for row in some_ids[31:]:
        row["id"] = ""  # a late part gives no ids: every row gets a new one
    no_ids = [{**r, "id": ""} for r in rows]
    return {
        "no ids": _write(folder / "no_ids.csv", no_ids),
        "first": _write(folder / "first.csv", rows),
        "changed": _write(folder / "changed.csv", changed),
        "some ids": _write(folder / "some_ids.csv", some_ids),
    }


def _import(site: Path, env: dict[str, str], path: Path, *args: str) -> tuple[int, Any]:
    result = CliRunner().invoke(
        cli,
        [
            *("--store", str(site), "--rules", str(RULES), "--json", "import", str(path)),
            *("--type", "asset", "--rule", "assets-csv", *args),
        ],
        env=env,
    )
    summary = dict(json.loads(result.stdout)["summary"])
    summary.pop("timings")
    return result.exit_code, summary


def _stored(site: Path) -> tuple[list[tuple[object, ...]], ...]:
    with sqlite3.connect(site) as conn:
        assets = [r[:-2] for r in conn.execute(ASSETS)]  # without the dates
        INDEXES.append(_indexes(conn))
        return assets, list(conn.execute(AUDIT))


# The asset table's indexes after each run (every run, whether kept or rolled back, leaves
# them as the schema made them; an insert into a near-empty table builds them after).
INDEXES: list[list[tuple[str, str, bool]]] = []


def _indexes(conn: sqlite3.Connection) -> list[tuple[str, str, bool]]:
    names = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'asset' "
        "AND sql IS NOT NULL ORDER BY name"
    ).fetchall()
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    # Each index holds every asset (the count read through it).
    total = conn.execute("SELECT count(*) FROM asset").fetchone()[0]
    return [
        (
            name,
            sql,
            conn.execute(f"SELECT count(*) FROM asset INDEXED BY {name}").fetchone()[0] == total,
        )
        for name, sql in names
    ]


def _run_all(folder: Path, files: dict[str, Path], env: dict[str, str]) -> list[Any]:
    site = folder / "site.sqlite"
    out: list[Any] = []
    steps = [
        (files["first"], ()),
        (files["changed"], ("--rollback-on-error",)),
        (files["changed"], ("--dry-run",)),
        (files["changed"], ("--rejects", str(folder / "rejects.csv"))),
        (files["no ids"], ("--overwrite-rule", "deleteAndInsert")),
        # The ids given are those of the retired records: refused, naming them.
        (files["first"], ("--overwrite-rule", "deleteAndInsert")),
    ]
    for path, args in steps:
        out.append(_import(site, env, path, *args))
        out.append(_stored(site))
    out.append((folder / "rejects.csv").read_bytes())
    other = folder / "other.sqlite"
    out.append(_import(other, env, files["some ids"]))
    out.append(_stored(other))
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    root = tmp_path_factory.mktemp("streamed")
    files = _files(root)
    out: dict[str, list[Any]] = {}
    for name, env, bulk_rows in (
        ("one part", ONE_PART, None),
        ("parts", PARTS, None),
        # Inserts of any size build the asset indexes after, where the table is near empty.
        ("one part, indexes after", ONE_PART, 1),
        ("parts, indexes after", PARTS, 1),
    ):
        (root / name).mkdir()
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(
                AssetStore,
                "set_aside_indexes",
                counted_set_aside(AssetStore, SET_ASIDE.setdefault(name, [])),
            )
            if bulk_rows is not None:
                patch.setattr("toolkit.store.assets.BULK_INDEX_ROWS", bulk_rows)
            out[name] = _run_all(root / name, files, env)
    return out


# How many indexes each run's inserts set aside, by variant.
SET_ASIDE: dict[str, list[int]] = {}


def test_every_run_leaves_the_asset_indexes_whole(runs: dict[str, list[Any]]) -> None:
    assert len(INDEXES) == 4 * 7
    # 36 assets are too few to set the indexes aside; with any number, the first imports
    # into each empty site set them aside: one part's, and in parts the first, then for
    # the site where some rows give no ids the parts' (rolled back at a late part) and the
    # one part's run again. The re-imports find the table holding more than they add.
    assert set(SET_ASIDE["one part"]) == set(SET_ASIDE["parts"]) == {0}
    assert SET_ASIDE["one part, indexes after"] == [2, 0, 0, 0, 0, 0, 2]
    assert SET_ASIDE["parts, indexes after"] == [2, 0, 0, 0, 0, 0, 0, 2, 2]
    schema = [
        ("asset_site_code", "CREATE INDEX asset_site_code ON asset(site_id, code)", True),
        ("asset_site_x", "CREATE INDEX asset_site_x ON asset(site_id, min_x)", True),
    ]
    assert all(indexes == schema for indexes in INDEXES)


@pytest.mark.parametrize("variant", ["one part, indexes after", "parts, indexes after"])
def test_indexes_built_after_the_inserts_write_the_same(
    runs: dict[str, list[Any]], variant: str
) -> None:
    assert runs[variant] == runs["one part"]


def test_parts_inserted_as_read_write_what_one_part_writes(runs: dict[str, list[Any]]) -> None:
    one, parts = runs["one part"], runs["parts"]
    assert len(parts) == len(one)
    for i, (got, want) in enumerate(zip(parts, one, strict=True)):
        assert got == want, i


def test_the_runs_did_what_they_say(runs: dict[str, list[Any]]) -> None:
    one = runs["one part"]
    code, first = one[0]
    assert code == 0 and first["counts"]["inserted"] == 36
    assets, audit = one[1]
    assert [a[0] for a in assets][:2] == [900001, 900002]  # the ids given
    assert len(audit) == 36
    # Rolled back: refused for its rejected rows, which it names; nothing written.
    code, refused = one[2]
    assert code == 1 and refused["status"] == "FAILED"
    assert [e["row"] for e in refused["errors"]] == [30, 33]
    assert "repeats row 2" in refused["errors"][0]["reason"]
    assert one[3] == one[1]
    assert one[5] == one[1]  # the dry run wrote nothing either
    code, imported = one[6]
    assert code == 0
    assert {k: imported["counts"][k] for k in ("inserted", "updated", "rejected")} == {
        "inserted": 3,
        "updated": 10,
        "rejected": 2,
    }
    code, again = one[8]
    assert code == 0 and again["counts"]["retired"] == 39 and again["counts"]["inserted"] == 36
    assets, _ = one[9]
    assert [a[0] for a in assets][-36:] == list(range(990_004, 990_040))
    code, taken = one[10]
    assert code == 1 and taken["reason"].startswith("asset id(s) already used: 900001, ")
    assert one[11] == one[9]
    assert b"30," in one[12] and b"33," in one[12]
    # Some rows give no id: every row gets a new one, as one part decides.
    code, some = one[13]
    assert code == 0 and some["counts"]["inserted"] == 36
    assets, _ = one[14]
    assert [a[0] for a in assets] == list(range(1, 37))


def test_a_part_that_fails_to_read_stops_the_reading_and_is_raised() -> None:
    made: list[int] = []

    def parts() -> Iterator[int]:
        for i in range(5):
            if i == 2:
                raise ValueError("row 11: cannot read")
            made.append(i)
            yield i

    got: list[int] = []
    with pytest.raises(ValueError, match="row 11"):
        for part in read_ahead(parts()):
            got.append(part)
    assert got == [0, 1] and made == [0, 1]
    # Stopping early ends the thread (no part is made beyond the next one).
    seen: list[int] = []
    for part in read_ahead(iter(range(100))):
        seen.append(part)
        if part == 3:
            break
    assert seen == [0, 1, 2, 3]


def _readers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "toolkit-read-ahead" and t.is_alive()]


def test_the_first_part_is_read_before_it_is_asked_for_and_closing_still_stops() -> None:
    """The reader starts when ``read_ahead`` is called (the caller readies itself
    meanwhile), and a reading closed before any part was asked for ends its thread and
    closes its source."""
    started = threading.Event()
    closed = threading.Event()

    def parts() -> Generator[int, None, None]:
        try:
            started.set()
            yield from range(10)
        finally:
            closed.set()

    reading = read_ahead(parts())
    assert started.wait(10)
    reading.close()
    assert closed.is_set()
    assert _readers() == []


@pytest.mark.parametrize("stop", ["error", "break"])
def test_stopping_early_closes_the_parts_and_ends_the_reader(tmp_path: Path, stop: str) -> None:
    """The caller fails (or refuses) on part 2: the source of the parts is closed in the
    reader's thread (its file with it) and the thread has ended when the caller's
    ``with closing(...)`` is left; the caller still holds the source, so nothing but
    ``read_ahead`` could have closed it."""
    path = tmp_path / "parts.txt"
    path.write_text("".join(f"{i}\n" for i in range(100)), encoding="utf-8")
    files: list[Any] = []
    closed_in: list[str] = []

    def parts() -> Generator[int, None, None]:
        try:
            with path.open(encoding="utf-8") as f:
                files.append(f)
                for line in f:
                    yield int(line)
        finally:
            closed_in.append(threading.current_thread().name)

    source = parts()
    seen: list[int] = []
    with contextlib.suppress(RuntimeError), contextlib.closing(read_ahead(source)) as reading:
        for part in reading:
            seen.append(part)
            if part == 2:
                if stop == "error":
                    raise RuntimeError("refused")
                break
    assert seen == [0, 1, 2]
    assert files[0].closed
    assert closed_in == ["toolkit-read-ahead"]
    assert _readers() == []
    assert inspect.getgeneratorstate(source) == "GEN_CLOSED"  # not left suspended


def test_a_new_key_repeated_in_a_later_part_is_refused_as_one_part_refuses_it(
    tmp_path: Path,
) -> None:
    """A first import (no record has the key yet) whose row 30 repeats row 2's code, five
    parts apart: the parts inserted as read keep row 2 and refuse row 30, as the file
    read as one part does; stored assets, audit and summary alike."""
    rows = [{**r, "id": ""} for r in _rows()]
    rows[29]["code"] = rows[1]["code"]
    source = _write(tmp_path / "repeats.csv", rows)
    results = []
    for name, env in (("parts", PARTS), ("one", ONE_PART)):
        site = tmp_path / f"{name}.sqlite"
        code, summary = _import(site, env, source)
        results.append((code, summary, _stored(site)))
    assert results[0] == results[1]
    code, summary, (assets, _) = results[0]
    assert (code, summary["counts"]["inserted"], summary["counts"]["rejected"]) == (0, 35, 1)
    assert [a[3] for a in assets].count(rows[1]["code"]) == 1


def test_parts_read_in_turn_come_in_order_the_next_read_meanwhile() -> None:
    """``read_in_turn`` gives each part in order; while the caller holds part i, part
    i + 1 is read in another thread (at most one ahead); a part that fails to read is
    raised when it is asked for, after the parts before it."""
    started: list[int] = []
    ahead = threading.Event()

    def read(i: int) -> int:
        started.append(i)
        if i == 1:
            ahead.set()
        if i == 3:
            raise ValueError("row 31: cannot read")
        return i * 10

    got: list[int] = []
    with pytest.raises(ValueError, match="row 31"):
        for part in read_in_turn(5, read, ahead=True):
            if part == 0:
                assert ahead.wait(10)  # part 1 is read while part 0 is held
            got.append(part)
            assert max(started) <= len(got)  # never more than one ahead
    assert got == [0, 10, 20] and started == [0, 1, 2, 3]
    assert list(read_in_turn(3, lambda i: i, ahead=False)) == [0, 1, 2]


def test_parts_read_in_turn_closed_early_leave_no_read_running() -> None:
    """Closed while part 1 is still being read, the generator returns once that read
    has ended (nothing is left reading the file), and no later part is begun."""
    release = threading.Event()
    reading_1 = threading.Event()
    ended: list[int] = []

    def read(i: int) -> int:
        if i == 1:
            reading_1.set()
            release.wait(10)
        ended.append(i)
        return i

    reading = read_in_turn(4, read, ahead=True)
    assert next(reading) == 0
    # Closed only once part 1's read has begun (a read not yet begun is called off).
    assert reading_1.wait(10)
    threading.Timer(0.2, release.set).start()
    reading.close()
    assert ended == [0, 1]
    assert not [t for t in threading.enumerate() if t.name.startswith("toolkit-read-part")]


def test_a_late_shapefile_part_that_fails_to_read_writes_nothing(
    sqlite_site: SiteStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The 3,000 parcels in parts of 1,000: the third part is read in a thread of its own
    while the second is ruled, and the disk fails that read (an I/O error injected at
    GDAL's read of those features): the job fails naming the file, the parts inserted
    before are rolled back and no reader is left."""
    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "1000")
    read = pyogrio.read_dataframe
    reads: list[tuple[int, str]] = []

    def failing(source: Any, **options: Any) -> Any:
        skip = int(options.get("skip_features", 0))
        reads.append((skip, threading.current_thread().name))
        if skip >= 2000:
            raise pyogrio.errors.DataSourceError("I/O error reading features 2001 to 3000")
        return read(source, **options)

    monkeypatch.setattr(pyogrio, "read_dataframe", failing)
    before = _site_counts(sqlite_site)
    runner = ImportRunner(sqlite_site, rule_paths=[RULES], user_id="officer")
    job = runner.run(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
    assert (job["status"], job["code"]) == ("FAILED", 400)
    assert job["summary"]["reason"] == (
        f"{SAMPLE / 'parcels.zip'}: parcels.shp: cannot read: "
        "I/O error reading features 2001 to 3000"
    )
    assert _site_counts(sqlite_site) == before
    assert [skip for skip, _ in reads] == [0, 1000, 2000]
    assert {name.split("_")[0] for _, name in reads} == {"toolkit-read-part"}
    assert _readers() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("toolkit-read-part")]
    # With the disk well again, the same import goes through.
    monkeypatch.setattr(pyogrio, "read_dataframe", read)
    job = runner.run(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
    assert job["status"] == "COMPLETE"
    assert job["summary"]["counts"]["inserted"] == 3000


# --- a failure while the parts are inserted as read ---------------------------------------


def _site_counts(site: SiteStore) -> tuple[int, int]:
    conn = site.db.connection
    row = conn.execute(
        "SELECT (SELECT count(*) FROM asset), (SELECT count(*) FROM audit_log)"
    ).fetchone()
    return int(row[0]), int(row[1])


def _fails_leaving_the_site_as_it_was(
    site: SiteStore, source: Path
) -> tuple[ImportRunner, dict[str, Any]]:
    """Run the asset import of ``source``, which fails (500) leaving the site's records and
    audit as they were and no reader thread behind; the runner and the job's summary."""
    before = _site_counts(site)  # the site's event and its audit entry
    runner = ImportRunner(site, rule_paths=[RULES], user_id="officer")
    job = runner.run(ImportRequest("asset", "assets-csv", source))
    assert (job["status"], job["code"]) == ("FAILED", 500)
    assert _site_counts(site) == before
    assert _readers() == []
    return runner, dict(job["summary"])


class _FullDiskPickle:
    """``pickle`` as the job's staged files see it, on a disk that fills up at the
    ``fails_at``-th file written: the write raises ENOSPC (a fault injected at the lowest
    write only; the import's code runs as it does)."""

    def __init__(self, fails_at: int) -> None:
        self.fails_at = fails_at
        self.written = 0
        self.load = pickle.load
        self.HIGHEST_PROTOCOL = pickle.HIGHEST_PROTOCOL

    def dump(self, obj: object, handle: Any, protocol: int | None = None) -> None:
        self.written += 1
        if self.written == self.fails_at:
            raise OSError(errno.ENOSPC, "No space left on device", str(handle.name))
        pickle.dump(obj, handle, protocol=protocol)


def test_a_full_disk_for_the_staged_files_fails_the_job_with_its_counts_and_writes_nothing(
    sqlite_site: SiteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """36 assets in parts of 5, one row of each of the first three parts rejected (its
    rows are staged on disk): the third part's staging hits a full disk after that part
    and the two before it were inserted. The job fails saying so (not "internal error"),
    with the counts it had, and the early transaction is rolled back."""
    rows = _rows()
    for i in (1, 6, 11):
        rows[i]["name"] = ""  # required: rejected, staged with its part
    source = _write(tmp_path / "assets.csv", rows)
    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "5")
    full = _FullDiskPickle(fails_at=3)
    monkeypatch.setattr(parts_module, "pickle", full)
    runner, summary = _fails_leaving_the_site_as_it_was(sqlite_site, source)
    assert summary["reason"].startswith("the disk is full: the import's working files")
    assert str(tmp_path) not in summary["reason"]  # no path of the machine's
    assert summary["counts"] == {"read": 15, "rejected": 3}
    assert summary["notes"] == [
        "the import stopped in part 3 of 8 (15 rows read so far); nothing was written "
        "(the 12 rows inserted as read were rolled back)"
    ]
    # With room again, the same import goes through.
    monkeypatch.setattr(parts_module, "pickle", pickle)
    job = runner.run(ImportRequest("asset", "assets-csv", source))
    assert job["status"] == "COMPLETE"
    assert (job["summary"]["counts"]["inserted"], job["summary"]["counts"]["rejected"]) == (33, 3)


def test_a_full_site_disk_in_a_late_part_fails_the_job_with_its_counts(
    sqlite_site: SiteStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The site file cannot grow (SQLite's max_page_count: SQLITE_FULL, as on a full disk)
    while the parts are inserted as read: the job fails with the store's message and how
    far it got, and none of the parts inserted before is kept."""
    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "1000")
    many = tmp_path / "many.csv"
    many.write_text(
        "code,name,notes\n" + "".join(f"C{i},pole {i},{'x' * 200}\n" for i in range(5000)),
        encoding="utf-8",
    )
    conn = sqlite_site.db.connection
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages + 250}")  # room for about two parts
    _, summary = _fails_leaving_the_site_as_it_was(sqlite_site, many)
    assert summary["reason"].startswith("the disk is full:")
    read = summary["counts"]["read"]
    assert summary["counts"] == {"read": read, "rejected": 0}
    assert read in (2000, 3000, 4000)  # a late part, not the first
    part = read // 1000
    note = summary["notes"][0]
    assert note.startswith(
        f"the import stopped in part {part} of 5 ({read} rows read so far); nothing was written"
    )
    assert note.endswith("rows inserted as read were rolled back)")
