"""An item import read in many small parts (TOOLKIT_CHUNK_ROWS) gives exactly what the same
import read as one part gives: counts, notes, rejects with their rows, links, stored rows,
a rolled-back run, a dry run and a run of updates, with keys repeated across parts."""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from set_aside import counted_set_aside

from toolkit.cli import cli
from toolkit.importing import first_pass, pipeline
from toolkit.importing.pipeline import ImportRequest
from toolkit.site import LocalSite
from toolkit.sources import chunks
from toolkit.store import Actor, SiteStore, link_recorder
from toolkit.store.database import Database
from toolkit.store.items import ItemStore

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
RULE = (SAMPLE.parent / "pipelines" / "damage_assessments.py").read_text(encoding="utf-8")
RULE = RULE.replace('name="damage-assessments"', 'name="damage-soundex"').replace(
    '"fallbackMode": "fuzzy",', ""
)
FUZZY_FIRST = (
    (SAMPLE.parent / "pipelines" / "damage_assessments.py")
    .read_text(encoding="utf-8")
    .replace('name="damage-assessments"', 'name="damage-fuzzy-first"')
    .replace('"mode": "soundex",', '"mode": "fuzzy",')
    .replace('"fallbackMode": "fuzzy",', '"fallbackMode": "soundex",')
)
BAD = [
    {"Reference": "DA-900001", "Damage Level": "Catastrophic"},
    {"Reference": "DA-900002", "Inspection Date": "not a date"},
    {"Reference": ""},
]
ITEM = ["--type", "item", "--rule", "damage-soundex", "--event-id", "1", "--region-id", "1"]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rules, and a damage file: sample rows, bad rows, a ragged row, and the reference of
    row 3 again near the end (a key repeated in another part)."""
    root = tmp_path_factory.mktemp("parts")
    (root / "rules").mkdir()
    (root / "rules" / "damage_soundex.py").write_text(RULE, encoding="utf-8")
    (root / "rules" / "damage_fuzzy_first.py").write_text(FUZZY_FIRST, encoding="utf-8")
    lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    header = next(csv.reader([lines[0]]))
    first = dict(zip(header, next(csv.reader([lines[1]])), strict=True))
    bad = [",".join(f'"{v}"' for v in {**first, **row}.values()) for row in BAD]
    third = next(csv.reader([lines[3]]))
    again = ",".join(f'"{v}"' for v in third)
    (root / "damage.csv").write_text(
        "\n".join([*lines[:151], *bad[:2], *lines[151:301], "DA-9,too,few", again, bad[2]]) + "\n",
        encoding="utf-8",
    )
    return root


def _site(path: Path) -> Path:
    db = Database(path)
    store = SiteStore(db, "default")
    with db.transaction() as conn:
        store.events.insert(conn, {"name": "Flood 2026", "status": 1}, Actor(), db.clock())
    db.close()
    return path


@pytest.fixture(scope="module")
def parcels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site with the sample's parcels imported as one part and the event "Flood 2026"
    (id 1): the item imports below are what is read in parts. (Imported in each test with
    its small parts, the 3,000 parcels took most of its time; an asset import in parts is
    ``test_import_assets_streamed``'s, and :func:`runs` imports them in parts too.)"""
    path = tmp_path_factory.mktemp("parcels") / "site.sqlite"
    with pytest.MonkeyPatch.context() as patch:
        patch.delenv("TOOLKIT_CHUNK_ROWS", raising=False)
        with LocalSite(path, "default") as site:
            job = site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
            assert job["status"] == "COMPLETE" and job["summary"]["counts"]["inserted"] == 3000
            assert int(site.create_event({"name": "Flood 2026"})["id"]) == EVENT
    return path


EVENT = 1


def _copied(parcels: Path, path: Path) -> Path:
    """A site file of its own at ``path``, holding what ``parcels`` holds."""
    with sqlite3.connect(parcels) as source, sqlite3.connect(path) as copy:
        source.backup(copy)
    source.close()
    copy.close()
    return path


def _import(
    world: Path, site: Path, env: dict[str, str], *args: str
) -> tuple[int, dict[str, object]]:
    result = CliRunner().invoke(
        cli,
        ["--store", str(site), "--rules", str(world / "rules"), "--json", "import", *args],
        env=env,
    )
    summary = dict(json.loads(result.stdout)["summary"])
    summary.pop("timings")
    return result.exit_code, summary


def _damage_import(world: Path, parcels: Path, folder: Path) -> tuple[dict[str, Any], Path]:
    """The fuzzy sample import into a copy of the parcels' site in ``folder``: its job and
    the site."""
    folder.mkdir(parents=True, exist_ok=True)
    path = _copied(parcels, folder / "site.sqlite")
    with LocalSite(path, "default", rule_paths=[world / "rules"]) as site:
        job = site.run_import(
            ImportRequest(
                "item", "damage-assessments", world / "damage.csv", event_id=EVENT, region_id=1
            )
        )
    return job, path


def _rows(site: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(site) as conn:
        return list(conn.execute(sql))


# Each run's item indexes set aside for its inserts (ItemStore.set_aside_indexes).
SET_ASIDE: dict[str, list[int]] = {}


@pytest.fixture(scope="module")
def runs(world: Path) -> dict[str, dict[str, object]]:
    out: dict[str, dict[str, object]] = {}
    for name, env in {
        "whole": {"TOOLKIT_CHUNK_ROWS": ""},
        "parts": {"TOOLKIT_CHUNK_ROWS": "37"},
        # The item (and asset) indexes set aside for every insert and made after.
        "bulk": {"TOOLKIT_CHUNK_ROWS": "37"},
    }.items():
        with pytest.MonkeyPatch.context() as patch:
            if name == "bulk":
                patch.setattr("toolkit.store.items.BULK_INDEX_ROWS", 1)
                patch.setattr("toolkit.store.assets.BULK_INDEX_ROWS", 1)
            patch.setattr(
                ItemStore,
                "set_aside_indexes",
                counted_set_aside(ItemStore, SET_ASIDE.setdefault(name, [])),
            )
            out[name] = _runs_of(world, name, env)
    return out


def _runs_of(world: Path, name: str, env: dict[str, str]) -> dict[str, object]:
    """The steps of :func:`runs` on a new site file of their own."""
    site = _site(world / f"{name}.sqlite")
    run: dict[str, object] = {"site": site}
    # The 3,000 parcels in parts of 500 where the items' parts are of 37 (in parts of 37
    # the parcels took most of the three runs' time; parts of 500 are parts all the same).
    parcel_env = {**env, "TOOLKIT_CHUNK_ROWS": "500"} if env["TOOLKIT_CHUNK_ROWS"] else env
    code, run["assets"] = _import(
        world,
        site,
        parcel_env,
        str(SAMPLE / "parcels.zip"),
        "--type",
        "asset",
        "--rule",
        "property-assets",
    )
    assert code == 0
    damage = str(world / "damage.csv")
    code, run["rolled back"] = _import(world, site, env, damage, *ITEM, "--rollback-on-error")
    assert code == 1
    code, run["dry run"] = _import(
        world,
        site,
        env,
        damage,
        *ITEM,
        "--dry-run",
        "--rejects",
        str(world / f"dry-{name}.csv"),
    )
    assert code == 0
    code, run["import"] = _import(
        world, site, env, damage, *ITEM, "--rejects", str(world / f"rejects-{name}.csv")
    )
    assert code == 0
    code, run["again"] = _import(
        world, site, env, damage, *ITEM, "--overwrite-rule", "updateAndInsert"
    )
    assert code == 0
    return run


def test_parts_count_reject_and_note_as_one_part(
    runs: dict[str, dict[str, object]], world: Path
) -> None:
    whole, parts = runs["whole"], runs["parts"]
    for step in ("assets", "rolled back", "dry run", "import", "again"):
        assert parts[step] == whole[step], step
    counts = whole["import"]["counts"]  # type: ignore[index]
    assert counts["read"] == 294 and counts["rejected"] > 3
    assert whole["again"]["counts"]["updated"] + whole["again"]["counts"]["unchanged"] > 250  # type: ignore[index]
    assert (world / "rejects-parts.csv").read_bytes() == (world / "rejects-whole.csv").read_bytes()
    assert (world / "dry-parts.csv").read_bytes() == (world / "rejects-whole.csv").read_bytes()
    with (world / "rejects-parts.csv").open(encoding="utf-8") as f:
        rejects = {int(r["row"]): r["reason"] for r in csv.DictReader(f)}
    # Rows in different parts of 37: records, not lines (the sample's notes span lines).
    assert sorted(rejects) == [48, 145, 146, 186, 232, 292, 293, 294]
    assert rejects[292] == "expected 13 values, found 3; row left out"
    assert rejects[293] == "Reference: reference 'DA-000003' repeats row 3 of this file"
    assert rejects[294] == "Reference: is required but empty"


def _item_indexes(site: Path) -> list[tuple[object, ...]]:
    return _rows(
        site,
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'item' "
        "ORDER BY name",
    )


def test_item_indexes_set_aside_for_the_inserts_are_made_again_holding_every_row(
    runs: dict[str, dict[str, object]],
) -> None:
    whole, bulk = runs["whole"], runs["bulk"]
    assert isinstance(whole["site"], Path) and isinstance(bulk["site"], Path)
    # Both item indexes set aside for the dry run and the import; none for the refused
    # run (nothing is inserted) nor the updates (the table holds more items than come).
    assert SET_ASIDE["bulk"] == [0, 2, 2, 0]
    assert SET_ASIDE["whole"] == [0, 0, 0, 0]  # a few hundred rows: kept as they go
    for step in ("rolled back", "dry run", "import", "again"):
        assert bulk[step] == whole[step], step
    indexes = _item_indexes(whole["site"])
    assert [name for name, *_ in indexes] == ["item_asset", "item_scope"]
    assert _item_indexes(bulk["site"]) == indexes
    assert _rows(bulk["site"], "PRAGMA integrity_check") == [("ok",)]
    for sql in (
        "SELECT id, register_id, event_id, region_id, asset_id, status, is_template, tags, "
        "fields, import_job_id FROM item ORDER BY id",
        "SELECT id, asset_id FROM item INDEXED BY item_asset WHERE asset_id IS NOT NULL "
        "ORDER BY asset_id, id",
        "SELECT site_id, register_id, event_id, id FROM item INDEXED BY item_scope "
        "WHERE site_id > 0 ORDER BY site_id, register_id, event_id, id",
        "SELECT id, user_id, action, record_type, record_id, item_id, event_id, changes, "
        "message, import_job_id FROM audit_log ORDER BY id",
    ):
        rows = _rows(whole["site"], sql)
        assert len(rows) > 200, sql
        assert _rows(bulk["site"], sql) == rows, sql


def test_parts_store_and_link_as_one_part(runs: dict[str, dict[str, object]]) -> None:
    whole, parts = runs["whole"]["site"], runs["parts"]["site"]
    assert isinstance(whole, Path) and isinstance(parts, Path)
    for sql in (
        "SELECT id, register_id, event_id, region_id, asset_id, status, is_template, tags, "
        "fields, import_job_id FROM item ORDER BY id",
        "SELECT * FROM import_link ORDER BY job_id, row",
        "SELECT id, user_id, action, record_type, record_id, item_id, event_id, changes, "
        "message, import_job_id FROM audit_log ORDER BY id",
    ):
        rows = _rows(whole, sql)
        assert rows, sql
        assert _rows(parts, sql) == rows, sql


@pytest.mark.parametrize("rule", ["damage-assessments", "damage-fuzzy-first"])
def test_a_fuzzy_rule_is_read_in_parts_and_links_as_one_part(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: str
) -> None:
    """The sample's rule (soundex, then fuzzy; and fuzzy, then soundex) in parts of 37: a
    first pass notes the texts fuzzy is given, its model is fitted once with each text's
    answer, and every part links with it, the other modes replayed, so every column of the
    links and the stored rows are the one part's."""
    out: dict[str, tuple[dict[str, Any], list[tuple[object, ...]], list[tuple[object, ...]]]] = {}
    told: dict[str, list[tuple[str, int, int | None, str]]] = {}
    reads: list[str] = []
    read_part = chunks.read_part

    def counted(part: Any) -> Any:
        if "damage.csv" in str(part):  # the items' parts, not the parcels'
            reads.append(str(part))
        return read_part(part)

    monkeypatch.setattr(chunks, "read_part", counted)
    started: list[subprocess.Popen[bytes]] = []
    start = link_recorder._start

    def noted_start(path: Path, site_id: int) -> subprocess.Popen[bytes]:
        started.append(start(path, site_id))
        return started[-1]

    monkeypatch.setattr(link_recorder, "_start", noted_start)
    # "process": the links recorded by a process of their own, as a large import's are.
    for name, rows in {"whole": "", "process": "37", "parts": "37"}.items():
        monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", rows)
        monkeypatch.setattr(pipeline, "OWN_PROCESS_ROWS", 1 if name == "process" else 10**9)
        reads.clear()
        seen: list[tuple[str, int, int | None, str]] = []

        def note(
            label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
        ) -> None:
            seen.append((label, done, total, detail))  # noqa: B023 (called in this loop)

        path = _copied(parcels, tmp_path / f"{name}.sqlite")
        with LocalSite(path, "default", rule_paths=[world / "rules"]) as site:
            request = ImportRequest("item", rule, world / "damage.csv", event_id=EVENT, region_id=1)
            job = site.run_import(request, progress=note)
        summary = dict(job["summary"])
        summary.pop("timings")
        out[name] = (
            summary,
            _rows(path, "SELECT row, reference, query, asset_id, mode, accuracy, candidates, "
                  "err, probability, evidence FROM import_link ORDER BY row"),
            _rows(path, "SELECT id, asset_id, fields FROM item ORDER BY id"),
        )  # fmt: skip
        told[name] = seen
    assert out["parts"] == out["whole"]
    assert out["process"] == out["whole"]
    # One process recorded the "process" run's links, and ended when they were recorded.
    assert len(started) == 1 and started[0].returncode == 0
    # Each of the parts run's 8 parts was read once: the second pass takes up what the
    # first kept (the rule's values, the read's problems: the ragged row's among them).
    assert len(reads) == 8 and len(set(reads)) == 8
    links = out["whole"][1]
    assert sum(1 for link in links if link[4] == "fuzzy") > 10  # fuzzy linked rows
    assert {"soundex", "code", "geo"} <= {link[4] for link in links}  # and the others
    assert len(out["whole"][2]) > 250
    # The parts run made its first pass over all 8 parts (294 records, 37 a part), then
    # linked part by part; the one part made none.
    passes = [(done, total) for label, done, total, _ in told["parts"] if label == "fuzzy texts"]
    assert passes[-1] == (8, 8)
    assert any("part 8 of 8" in detail for _, _, _, detail in told["parts"])
    assert not [label for label, *_ in told["whole"] if label == "fuzzy texts"]


def test_a_fuzzy_import_is_read_in_parts_of_at_most_fuzzy_part_rows(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unless told otherwise, an item import linked with mode fuzzy is read in parts of at
    most ``FUZZY_PART_ROWS`` (memory: its first pass holds two parts at once), one linked
    without fuzzy in parts of ``TOOLKIT_CHUNK_ROWS``' default; a smaller part size given
    stays."""
    monkeypatch.setattr(pipeline, "FUZZY_PART_ROWS", 100)
    shown: dict[tuple[str, str], set[str]] = {}
    for rule, rows in (
        ("damage-fuzzy-first", ""),
        ("damage-soundex", ""),
        ("damage-fuzzy-first", "60"),
    ):
        monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", rows)
        details: set[str] = set()

        def note(
            label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
        ) -> None:
            details.add(detail.split(":")[0])  # noqa: B023 (called in this loop)

        path = _copied(parcels, tmp_path / f"{rule}{rows}.sqlite")
        with LocalSite(path, "default", rule_paths=[world / "rules"]) as site:
            request = ImportRequest("item", rule, world / "damage.csv", event_id=EVENT, region_id=1)
            job = site.run_import(request, progress=note)
        assert job["status"] == "COMPLETE"
        shown[rule, rows] = {d for d in details if d.startswith("part ")}
    # 294 records: parts of 100 for fuzzy, one part without it, parts of 60 when told.
    assert shown["damage-fuzzy-first", ""] == {f"part {i} of 3" for i in (1, 2, 3)}
    assert shown["damage-soundex", ""] == set()
    assert shown["damage-fuzzy-first", "60"] == {f"part {i} of 5" for i in range(1, 6)}


# Rows a fuzzy link in parts must settle as one part does: an address only fuzzy finds,
# repeated in later parts (once beside a property number that links it first), written
# with accents, in lower case, without its suburb, blank, only spaces, and a suburb only.
AWKWARD = [
    {"Address": "12 JMNES PLACE", "Suburb": "BALLARAT CENTRAL"},
    {"Address": "12 Jmnès Placé", "Suburb": "Ballarat Céntral"},
    {"Address": "12 jmnes place", "Suburb": ""},
    {"Address": "", "Suburb": ""},
    {"Address": "   ", "Suburb": " "},
    {"Address": "", "Suburb": "BALLARAT CENTRAL"},
    {"Address": "12 JMNES PLACE", "Suburb": "BALLARAT CENTRAL", "Property Number": "1"},
    {"Address": "7 Nowhere Lane", "Suburb": "Atlantis"},
    # A point the reader sets aside: the row is rejected, in whichever part it is.
    {"Address": "12 JMNES PLACE", "Suburb": "BALLARAT CENTRAL", "Latitude": "north"},
]


def test_awkward_rows_link_in_parts_as_one_part(parcels: Path, tmp_path: Path) -> None:
    """The sample's fuzzy rule in parts of 23 and 61 on a file with ``AWKWARD`` rows spread
    through it (each twice, in different parts): the first pass keeps each part's links
    and the second links only the rows fuzzy was given, so every link column is the one
    part's."""
    with (SAMPLE / "damage_assessments.csv").open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        header = list(reader.fieldnames or [])
        rows = [dict(row) for row, _ in zip(reader, range(120), strict=False)]
    blank = dict.fromkeys(header, "")
    for n, extra in enumerate(AWKWARD * 2):
        rows.insert(7 + 13 * n, {**blank, **extra, "Reference": f"DA-8{n:05d}"})
    path = tmp_path / "damage.csv"
    with path.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, header)
        writer.writeheader()
        writer.writerows(rows)
    links, outcomes, items = {}, {}, {}
    for chunk in ("", "23", "61"):
        site_path = _copied(parcels, tmp_path / f"site{chunk}.sqlite")
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("TOOLKIT_CHUNK_ROWS", chunk)
            with LocalSite(site_path, "default") as site:
                job = site.run_import(
                    ImportRequest("item", "damage-assessments", path, event_id=EVENT, region_id=1)
                )
        assert job["status"] == "COMPLETE"
        links[chunk] = _rows(site_path, "SELECT * FROM import_link ORDER BY row")
        outcomes[chunk] = {k: v for k, v in job["summary"].items() if k != "timings"}
        items[chunk] = _rows(site_path, "SELECT id, asset_id, fields FROM item ORDER BY id")
    assert links["23"] == links[""]
    assert links["61"] == links[""]
    # The second pass does not read the parts again: the rows the reader set aside (the
    # points it could not read) are rejected as the one part rejects them.
    assert outcomes["23"] == outcomes["61"] == outcomes[""]
    assert items["23"] == items["61"] == items[""]
    problems = outcomes[""]["errors"]
    assert [e["row"] for e in problems if e["column"] == "Latitude"] == [112, 138]
    assert outcomes[""]["counts"]["rejected"] == 3
    assert len(items[""]) == len(rows) - outcomes[""]["counts"]["rejected"]
    modes = [link[5] for link in links[""]]
    assert modes.count("fuzzy") > 10 and "soundex" in modes and "code" in modes
    errors = [str(link[8]) for link in links[""]]
    assert any("fallback fuzzy" in e for e in errors)
    assert any("the row has nothing to find an asset by" in e for e in errors)


def test_a_failure_reading_ahead_in_the_first_pass_fails_the_job_and_stops_the_reader(
    world: Path,
    parcels: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The fuzzy first pass reads and checks the next part in a thread while it links
    this one: a failure there (here the rule's, in the third of eight parts) fails the job
    with its own message and stage, writes nothing, and leaves no reader running."""
    from toolkit.importing.rules import apply_rule

    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")
    checked: list[int] = []

    def failing(rule: Any, frame: Any, **kwargs: Any) -> Any:
        checked.append(len(checked))
        if len(checked) == 3:
            raise RuntimeError("the rule broke on part 3")
        return apply_rule(rule, frame, **kwargs)

    monkeypatch.setattr(first_pass, "apply_rule", failing)
    job, path = _damage_import(world, parcels, tmp_path)
    assert job["status"] == "FAILED"
    assert "failed in stage validate: RuntimeError: the rule broke on part 3" in caplog.text
    assert checked == [0, 1, 2]  # nothing was read after the failure
    assert _rows(path, "SELECT count(*) FROM item") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM import_link") == [(0,)]
    assert not [t for t in threading.enumerate() if t.name == "toolkit-read-ahead"]


def test_the_first_part_is_read_and_checked_while_the_index_loads(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fuzzy first pass starts its reader before it loads the asset index: the first
    part is read and checked meanwhile (the index waits for it here), and the import
    links as it would have."""
    from toolkit.importing.rules import apply_rule

    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")
    checked = threading.Event()
    seen_while_loading: list[bool] = []

    def noted(rule: Any, frame: Any, **kwargs: Any) -> Any:
        prepared = apply_rule(rule, frame, **kwargs)
        checked.set()
        return prepared

    loading = LocalSite.asset_index

    def waiting(site: LocalSite) -> Any:
        seen_while_loading.append(checked.wait(timeout=10))
        return loading(site)

    plain, plain_path = _damage_import(world, parcels, tmp_path / "plain")
    monkeypatch.setattr(first_pass, "apply_rule", noted)
    monkeypatch.setattr(LocalSite, "asset_index", waiting)
    job, path = _damage_import(world, parcels, tmp_path)
    assert job["status"] == plain["status"] == "COMPLETE"
    assert seen_while_loading == [True]
    assert job["summary"]["linking"] == plain["summary"]["linking"]
    assert job["summary"]["linking"]["fuzzy"] > 10
    links = "SELECT row, asset_id, mode, accuracy FROM import_link ORDER BY row"
    assert _rows(path, links) == _rows(plain_path, links)


def test_a_large_jobs_texts_paired_by_a_process_of_their_own_link_as_in_a_thread(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """From ``OWN_PROCESS_ROWS`` rows a job's fuzzy texts are paired and answered by a
    process of its own: the import's counts and links are those of the pairing thread."""
    from toolkit.importing import partitions
    from toolkit.matching import pairing_process

    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")
    in_thread, thread_path = _damage_import(world, parcels, tmp_path / "thread")
    answered: list[float | None] = []
    answers = pairing_process.ProcessPairing.answers

    def noted(pairing: pairing_process.ProcessPairing) -> Any:
        given = answers(pairing)
        answered.append(pairing.peak_mib)
        return given

    monkeypatch.setattr(partitions, "OWN_PROCESS_ROWS", 1)
    monkeypatch.setattr(pairing_process.ProcessPairing, "answers", noted)
    by_process, process_path = _damage_import(world, parcels, tmp_path / "process")
    assert len(answered) == 1 and answered[0] is not None  # the process answered
    assert by_process["status"] == in_thread["status"] == "COMPLETE"
    assert by_process["summary"]["counts"] == in_thread["summary"]["counts"]
    assert by_process["summary"]["linking"] == in_thread["summary"]["linking"]
    assert by_process["summary"]["linking"]["fuzzy"] > 10
    links = "SELECT row, asset_id, mode, accuracy, probability, err FROM import_link ORDER BY row"
    assert _rows(process_path, links) == _rows(thread_path, links)


def test_an_index_that_fails_to_load_fails_the_job_and_stops_the_reader(
    world: Path,
    parcels: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The reader already reading the first parts when the index fails to load is stopped:
    the job fails with the index's message, writes nothing and leaves no reader."""
    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")

    def failing(site: LocalSite) -> Any:
        raise RuntimeError("the index broke")

    monkeypatch.setattr(LocalSite, "asset_index", failing)
    job, path = _damage_import(world, parcels, tmp_path)
    assert job["status"] == "FAILED"
    assert "failed in stage link: RuntimeError: the index broke" in caplog.text
    assert _rows(path, "SELECT count(*) FROM item") == [(0,)]
    assert not [t for t in threading.enumerate() if t.name == "toolkit-read-ahead"]


def test_a_failure_pairing_fuzzys_texts_in_their_thread_fails_the_import_and_writes_nothing(
    world: Path,
    parcels: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each part's fuzzy texts are paired in a thread while the next part is linked: a
    failure there (here on the second part's texts) fails the job in its link stage with
    its own message, writes nothing, and leaves neither that thread nor the reader's."""
    from toolkit.matching import modes

    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")
    paired: list[int] = []
    real = modes._paired

    def failing(side: Any, words: Any, *args: Any) -> Any:
        paired.append(words.n_rows)
        if len(paired) == 2:
            raise RuntimeError("pairing broke on the second part's texts")
        return real(side, words, *args)

    monkeypatch.setattr(modes, "_paired", failing)
    job, path = _damage_import(world, parcels, tmp_path)
    assert job["status"] == "FAILED"
    assert (
        "failed in stage link: RuntimeError: pairing broke on the second part's texts"
        in caplog.text
    )
    assert len(paired) >= 2
    assert _rows(path, "SELECT count(*) FROM item") == [(0,)]
    assert _rows(path, "SELECT count(*) FROM import_link") == [(0,)]
    names = [t.name for t in threading.enumerate()]
    assert not [n for n in names if n.startswith(("toolkit-fuzzy", "toolkit-read-ahead"))]


def _recorded_import(
    world: Path,
    parcels: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    events: list[str],
    *,
    gathering_fails: bool = False,
) -> tuple[dict[str, Any], Path, list[subprocess.Popen[bytes]]]:
    """The fuzzy sample import in parts of 250 (four), its links recorded by a process of their
    own; ``events`` hears when the parts' report is gathered ("gathered"; with
    ``gathering_fails`` that raises), the links are all recorded ("links") and the write
    begins ("write")."""
    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "250")
    monkeypatch.setattr(pipeline, "OWN_PROCESS_ROWS", 1)
    started: list[subprocess.Popen[bytes]] = []
    start = link_recorder._start

    def noted_start(path: Path, site_id: int) -> subprocess.Popen[bytes]:
        started.append(start(path, site_id))
        return started[-1]

    def noted(name: str, real: Any) -> Any:
        def call(*args: Any, **kwargs: Any) -> Any:
            events.append(name)
            if name == "gathered" and failing:
                raise RuntimeError("the report broke")
            return real(*args, **kwargs)

        return call

    failing: list[bool] = []
    monkeypatch.setattr(link_recorder, "_start", noted_start)
    monkeypatch.setattr(
        chunks.ChunkedSource, "finish", noted("gathered", chunks.ChunkedSource.finish)
    )
    monkeypatch.setattr(
        link_recorder.LinkRecorder, "finish", noted("links", link_recorder.LinkRecorder.finish)
    )
    monkeypatch.setattr(
        pipeline.ImportRunner,
        "_plan_and_write",
        noted("write", pipeline.ImportRunner._plan_and_write),
    )
    path = _copied(parcels, tmp_path / "site.sqlite")
    with LocalSite(path, "default", rule_paths=[world / "rules"]) as site:
        failing.extend([True] if gathering_fails else [])
        job = site.run_import(
            ImportRequest(
                "item", "damage-assessments", world / "damage.csv", event_id=EVENT, region_id=1
            )
        )
    return job, path, started


def test_the_last_parts_links_are_recorded_while_the_parts_are_gathered_and_before_the_write(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The recorder is finished after the parts' report, rejections and keys are gathered
    (the last part's links recorded meanwhile) and before the write's transaction, which
    its own transactions would wait behind: every row's link is kept, once."""
    events: list[str] = []
    job, path, started = _recorded_import(world, parcels, tmp_path, monkeypatch, events)
    assert job["status"] == "COMPLETE"
    assert events == ["gathered", "links", "write"]
    assert len(started) == 1 and started[0].returncode == 0
    linked = sum(job["summary"]["linking"].values())  # every row linked, or not, by a mode
    assert linked > 250
    assert _rows(path, "SELECT count(*), count(DISTINCT row) FROM import_link") == [
        (linked, linked)
    ]
    assert _rows(path, "SELECT count(*) FROM item") == [(job["summary"]["counts"]["inserted"],)]


def test_a_failure_after_the_last_part_stops_the_recording_process_and_writes_nothing(
    world: Path,
    parcels: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A failure between the last part and the write (here gathering the parts' report)
    fails the job, writes no item, and ends the recording process, the links it had been
    given recorded (as a failure while linking keeps the links recorded so far)."""
    events: list[str] = []
    job, path, started = _recorded_import(
        world, parcels, tmp_path, monkeypatch, events, gathering_fails=True
    )
    assert job["status"] == "FAILED"
    assert "RuntimeError: the report broke" in caplog.text
    assert events == ["gathered"]  # neither finished nor written
    assert len(started) == 1 and started[0].returncode == 0
    assert _rows(path, "SELECT count(*) FROM item") == [(0,)]
    recorded = _rows(path, "SELECT count(*), count(DISTINCT row) FROM import_link")
    assert recorded[0][0] == recorded[0][1] > 250


def test_a_fuzzy_first_pass_lets_go_of_the_tables_it_built_and_keeps_the_others(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The second pass replays the modes before fuzzy: the key tables, name columns and
    box grid the first pass built are let go before fuzzy joins the pairs of its texts and
    fits its model (the end of the first pass's memory). An index shared with lookups (a
    server's) keeps what they had built; the links are those of an index that kept
    everything."""
    from toolkit.importing import first_pass
    from toolkit.importing.partitions import job_fuzzy_pairing as pairing_of
    from toolkit.matching.modes import FuzzyAnswers, FuzzyPairing
    from toolkit.site.index_cache import IndexCache

    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")
    held_at_pairing: list[frozenset[tuple[str, object]]] = []

    saved_pairs: list[list[str]] = []

    def noted_pairing(index: Any, rule: Any, folder: Path, *, rows: int) -> FuzzyPairing:
        pairing = pairing_of(index, rule, folder)  # in a thread: its pairs are looked at
        answers = pairing.answers

        def noted() -> FuzzyAnswers:
            held_at_pairing.append(index.lookup_structures())
            # Each part's pairs wait in the job's folder, not in memory.
            for paired in pairing._paired:
                paired.result()
            saved_pairs.append(sorted(p.name for p in folder.glob("pairs-*.npz")))
            return answers()

        monkeypatch.setattr(pairing, "answers", noted)
        return pairing

    monkeypatch.setattr(first_pass, "job_fuzzy_pairing", noted_pairing)
    links = []
    for shared in (False, True):
        path = _copied(parcels, tmp_path / f"shared-{shared}.sqlite")
        with LocalSite(path, "default", rule_paths=[world / "rules"]) as site:
            before: frozenset[tuple[str, object]] = frozenset()
            if shared:
                site.index_cache = IndexCache()
                site.asset_lookup("12 Smith St", {"mode": "soundex", "maxRank": 1})
                before = site.asset_index().lookup_structures()
                assert ("table", ("exact_full", None)) in before
            request = ImportRequest(
                "item", "damage-assessments", world / "damage.csv", event_id=EVENT, region_id=1
            )
            job = site.run_import(request)
            assert job["status"] == "COMPLETE"
            assert held_at_pairing[-1] == before
            if shared:  # what the lookups built is still there
                assert site.asset_index().lookup_structures() == before
        links.append(_rows(path, "SELECT * FROM import_link ORDER BY row"))
    assert links[0] == links[1] and len(links[0]) > 250
    assert len(saved_pairs[0]) > 3 and saved_pairs[0][0] == "pairs-00000.npz"


def test_a_fuzzy_first_pass_warms_what_the_first_part_links_by_including_the_box_grid(
    world: Path, parcels: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A CSV's geometry (here latitude, longitude and WKT) is known once a part is read:
    the first pass goes by its headings, so the grid of boxes is built with the key
    tables before the first part is linked, and that part's linking builds nothing more
    of what the modes before fuzzy use."""
    monkeypatch.setenv("TOOLKIT_CHUNK_ROWS", "37")
    warmed: list[frozenset[tuple[str, object]]] = []
    after_first: list[frozenset[tuple[str, object]]] = []
    warm, draft = first_pass.warm_link_index, first_pass.draft_links

    def noted_warm(index: Any, rule: Any, **given: Any) -> None:
        warm(index, rule, **given)
        warmed.append(index.lookup_structures())

    def noted_draft(index: Any, *args: Any, **given: Any) -> Any:
        drafted = draft(index, *args, **given)
        after_first.append(index.lookup_structures())
        return drafted

    monkeypatch.setattr(first_pass, "warm_link_index", noted_warm)
    monkeypatch.setattr(first_pass, "draft_links", noted_draft)
    path = _copied(parcels, tmp_path / "site.sqlite")
    with LocalSite(path, "default", rule_paths=[world / "rules"]) as site:
        request = ImportRequest(
            "item", "damage-assessments", world / "damage.csv", event_id=EVENT, region_id=1
        )
        assert site.run_import(request)["status"] == "COMPLETE"
    assert len(warmed) == 1 and len(after_first) == 8
    assert ("derived", "box_grid") in warmed[0]
    assert after_first[0] == warmed[0]
