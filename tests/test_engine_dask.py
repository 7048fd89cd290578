"""--engine dask gives what --engine local gives: the same import and lookup run on both,
the Dask side on a 2-worker LocalCluster of processes (started once for this module), with
partitions small enough that every file is split across workers."""

from __future__ import annotations

import csv
import json
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from distributed import LocalCluster

from toolkit.cli import cli
from toolkit.store import Actor, SiteStore
from toolkit.store.database import Database

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"

# The sample's damage rule, and the same without its fuzzy fallback (mode fuzzy fits its
# model once per job, on the texts of every partition: test_fuzzy_...).
FUZZY_RULE = (SAMPLE.parent / "pipelines" / "damage_assessments.py").read_text(encoding="utf-8")
RULE = FUZZY_RULE.replace('name="damage-assessments"', 'name="damage-soundex"').replace(
    '"fallbackMode": "fuzzy",', ""
)

# Rows that each stage rejects (heading -> value), placed past the first partitions.
BAD = [
    {"Reference": "DA-900001", "Damage Level": "Catastrophic"},  # not one of the choices
    {"Reference": "DA-900002", "Inspection Date": "not a date"},
    {"Reference": "DA-900003", "Occupants": "many"},
    {"Reference": ""},  # the reference is required
]


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        yield cluster.scheduler_address


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A rules folder, and a damage file: the sample's first 400 rows, then bad rows."""
    root = tmp_path_factory.mktemp("engine")
    (root / "rules").mkdir()
    (root / "rules" / "damage_soundex.py").write_text(RULE, encoding="utf-8")
    (root / "rules" / "damage_assessments.py").write_text(FUZZY_RULE, encoding="utf-8")
    lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    header = next(csv.reader([lines[0]]))
    good = dict(zip(header, next(csv.reader([lines[1]])), strict=True))
    bad = [",".join(f'"{v}"' for v in {**good, **row}.values()) for row in BAD]
    ragged = "DA-900004,too,few,values"  # left out by the reader, rejected by the import
    (root / "damage.csv").write_text(
        "\n".join([*lines[:201], *bad[:2], *lines[201:401], ragged, *bad[2:]]) + "\n",
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


def _run(
    world: Path,
    site: Path,
    engine: list[str],
    *args: str,
    partition_rows: str = "70",
    env: dict[str, str] | None = None,
) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli,
        ["--store", str(site), "--rules", str(world / "rules"), *args, *engine],
        env={"TOOLKIT_PARTITION_ROWS": partition_rows, **(env or {})},
    )
    return result.exit_code, result.stdout, result.stderr


def _engines(scheduler: str) -> dict[str, list[str]]:
    """The options of each engine compared: local, and Dask on the test's cluster."""
    return {
        "local": ["--engine", "local"],
        "dask": ["--engine", "dask", "--scheduler", scheduler],
    }


def _parcels_site(world: Path, path: Path, engine: list[str]) -> Path:
    """A new site at ``path`` holding the sample parcels, imported on ``engine``."""
    site = _site(path)
    code, _, err = _run(
        world, site, engine, "import", str(SAMPLE / "parcels.zip"),
        "--type", "asset", "--rule", "property-assets", partition_rows="700",
    )  # fmt: skip
    assert code == 0, err
    return site


def _rows(site: Path, sql: str) -> list[tuple[object, ...]]:
    with sqlite3.connect(site) as conn:
        return list(conn.execute(sql))


STORED_ITEMS = (
    "SELECT id, register_id, event_id, region_id, asset_id, status, is_template, tags, fields "
    "FROM item ORDER BY id"
)
STORED_ASSETS = (
    "SELECT id, type, code, name, friendly, region_id, status, extra_info, geometry, "
    "min_x, min_y, max_x, max_y, tags FROM asset ORDER BY id"
)
LINKS = "SELECT * FROM import_link ORDER BY job_id, row"


def _summary(out: str) -> dict[str, object]:
    summary = dict(json.loads(out)["summary"])
    summary.pop("timings")  # the stages differ: validate/link/prepare are one on Dask
    return summary


@pytest.fixture(scope="module")
def imported(world: Path, scheduler: str) -> dict[str, dict[str, object]]:
    """The same imports run on each engine, into a site each."""
    runs: dict[str, dict[str, object]] = {}
    engines = _engines(scheduler)
    for name, engine in engines.items():
        site = _site(world / f"{name}.sqlite")
        out: dict[str, object] = {"site": site}
        code, text, err = _run(
            world, site, engine, "--json", "import", str(SAMPLE / "parcels.zip"),
            "--type", "asset", "--rule", "property-assets", partition_rows="700",
        )  # fmt: skip
        assert code == 0, err
        out["assets"] = _summary(text)
        item = ["--type", "item", "--rule", "damage-soundex", "--event-id", "1", "--region-id", "1"]
        damage = str(world / "damage.csv")
        code, text, err = _run(
            world, site, engine, "--json", "import", damage, *item, "--rollback-on-error"
        )
        assert code == 1, err
        out["rolled back"] = _summary(text)
        code, text, err = _run(
            world, site, engine, "--json", "import", damage, *item, "--dry-run",
            "--rejects", str(world / f"dry-{name}.csv"),
        )  # fmt: skip
        assert code == 0, err
        out["dry run"] = _summary(text)
        code, text, err = _run(
            world, site, engine, "--json", "import", damage, *item,
            "--rejects", str(world / f"rejects-{name}.csv"),
        )  # fmt: skip
        assert code == 0, err
        out["import"] = _summary(text)
        code, text, err = _run(
            world, site, engine, "lookup", "--file", damage, "--column", "Address",
            "--code-column", "Reference", "--max-rank", "3",
            "-o", str(world / f"lookup-{name}.csv"),
        )  # fmt: skip
        assert code == 3, err
        out["lookup"] = err.splitlines()[-1]
        runs[name] = out
    return runs


def test_the_counts_links_and_rejects_are_the_local_engines(
    imported: dict[str, dict[str, object]], world: Path
) -> None:
    local, dask = imported["local"], imported["dask"]
    for step in ("assets", "rolled back", "dry run", "import", "lookup"):
        assert dask[step] == local[step], step
    counts = local["import"]["counts"]  # type: ignore[index]
    assert counts == {
        "read": 391, "inserted": 382, "updated": 0, "unchanged": 0, "skipped": 0,
        "retired": 0, "rejected": 9,
    }  # fmt: skip
    assert local["rolled back"]["status"] == "FAILED"  # type: ignore[index]
    linking = local["import"]["linking"]  # type: ignore[index]
    # Every row the reader kept went through linking (the ragged one did not).
    assert sum(linking.values()) == 390 and 0 < linking["unlinked"] < 100
    # The rejects name the file's rows, however the file was split.
    assert (world / "rejects-dask.csv").read_bytes() == (world / "rejects-local.csv").read_bytes()
    assert (world / "dry-dask.csv").read_bytes() == (world / "rejects-local.csv").read_bytes()
    with (world / "rejects-dask.csv").open(encoding="utf-8") as f:
        rejects = {int(r["row"]): r["reason"] for r in csv.DictReader(f)}
    # The sample's own bad rows and ours (its records span lines: row numbers are records).
    assert sorted(rejects) == [48, 184, 194, 195, 232, 377, 389, 390, 391]
    assert rejects[194].startswith("Damage Level: is not one of")
    assert rejects[195].startswith("Inspection Date: is not a date")
    assert rejects[389] == "expected 13 values, found 4; row left out"
    assert rejects[390] == "Occupants: is not a whole number"
    assert rejects[391] == "Reference: is required but empty"
    assert (world / "lookup-dask.csv").read_bytes() == (world / "lookup-local.csv").read_bytes()


def test_the_stored_rows_and_links_are_the_local_engines(
    imported: dict[str, dict[str, object]],
) -> None:
    local, dask = imported["local"]["site"], imported["dask"]["site"]
    assert isinstance(local, Path) and isinstance(dask, Path)
    for sql in (STORED_ASSETS, STORED_ITEMS, LINKS):
        rows = _rows(local, sql)
        assert rows, sql
        assert _rows(dask, sql) == rows, sql
    assert len(_rows(dask, STORED_ITEMS)) == 382


def test_fuzzy_links_on_dask_are_the_local_engines(
    world: Path, scheduler: str, tmp_path: Path
) -> None:
    """Mode fuzzy's model is fitted once per job from every partition's texts, so the
    sample's rule (fuzzy fallback) and a fuzzy lookup link as on the local engine."""
    engines = _engines(scheduler)
    out: dict[str, tuple[dict[str, object], list[tuple[object, ...]], bytes]] = {}
    for name, engine in engines.items():
        site = _parcels_site(world, tmp_path / f"{name}.sqlite", engine)
        code, text, err = _run(
            world, site, engine, "--json", "import", str(world / "damage.csv"),
            "--type", "item", "--rule", "damage-assessments", "--event-id", "1",
            "--region-id", "1",
        )  # fmt: skip
        assert code == 0, err
        lookup = tmp_path / f"lookup-{name}.csv"
        code, _, err = _run(
            world, site, engine, "lookup", "--file", str(world / "damage.csv"),
            "--column", "Address", "--mode", "fuzzy", "-o", str(lookup),
        )  # fmt: skip
        assert code == 3, err
        assert "fits its model" not in err
        out[name] = (_summary(text), _rows(site, LINKS), lookup.read_bytes())
    local, dask = out["local"], out["dask"]
    assert dask[0] == local[0]
    assert not [w for w in local[0]["warnings"] if "fuzzy" in str(w)]  # type: ignore[attr-defined]
    assert dask[1] == local[1]
    # The fallback did link rows, and the lookup's probabilities are written the same.
    assert sum(1 for row in local[1] if "fuzzy" in row) > 0
    assert dask[2] == local[2]
    assert b"fuzzy" in local[2]


def _count_link_work() -> None:
    """In a worker process: count, per partition (its first row number), the rule applied
    to it, its rows linked from the first way (``_Linker.ways``) and a first pass's draft
    taken up (``_Linker.resume``, with the rows it leaves to mode fuzzy), until
    ``_link_work_done``."""
    from collections import Counter

    import toolkit.importing.linking as linking
    import toolkit.importing.partitions as partitions

    counts: Counter[tuple[str, int]] = Counter()
    # The module's own name (partitions imports it), read and set through its namespace.
    module = vars(partitions)
    ways, resume, apply_rule = linking._Linker.ways, linking._Linker.resume, module["apply_rule"]

    def first_row(frame: Any) -> int:
        return int(frame.index[0])

    def counted_ways(self: Any, *args: Any, **kwargs: Any) -> None:
        counts["ways", first_row(self.frame)] += 1
        ways(self, *args, **kwargs)

    def counted_resume(self: Any, draft: Any, *args: Any, **kwargs: Any) -> None:
        counts["resume", first_row(self.frame)] += 1
        counts["resumed rows", first_row(self.frame)] += len(draft.rows)
        resume(self, draft, *args, **kwargs)

    def counted_rule(rule: Any, frame: Any, *args: Any, **kwargs: Any) -> Any:
        counts["rule", first_row(frame)] += 1
        return apply_rule(rule, frame, *args, **kwargs)

    def done() -> dict[tuple[str, int], int]:
        linking._Linker.ways, linking._Linker.resume = ways, resume  # type: ignore[method-assign]  # counted, put back by done()
        module["apply_rule"] = apply_rule
        return dict(counts)

    linking._Linker.ways, linking._Linker.resume = counted_ways, counted_resume  # type: ignore[method-assign]  # counted, put back by done()
    module["apply_rule"] = counted_rule
    linking._link_work_done = done  # type: ignore[attr-defined]  # read back by the test


def _link_work_done() -> dict[tuple[str, int], int]:
    import toolkit.importing.linking as linking

    done: dict[tuple[str, int], int] = linking._link_work_done()  # type: ignore[attr-defined]
    del linking._link_work_done  # type: ignore[attr-defined]
    return done


def test_a_fuzzy_import_on_dask_rules_and_links_each_partition_once(
    world: Path, scheduler: str, tmp_path: Path
) -> None:
    """Mode fuzzy's first pass leaves each partition's rule result and link draft with the
    workers; the second pass takes them up and links only the rows fuzzy was given (as the
    local engine's parts): every partition is ruled once and linked from its first way
    once, in the worker processes."""
    import cloudpickle  # type: ignore[import-untyped]  # it has no type hints
    from distributed import Client

    site = _parcels_site(world, tmp_path / "site.sqlite", _engines(scheduler)["dask"])
    with Client(scheduler) as client:  # type: ignore[no-untyped-call]  # no type hints
        # The counters are this module's functions, run in the workers: sent by value.
        cloudpickle.register_pickle_by_value(sys.modules[__name__])
        try:
            client.run(_count_link_work)
            try:
                code, text, err = _run(
                    world, site, _engines(scheduler)["dask"], "--json", "import",
                    str(world / "damage.csv"), "--type", "item", "--rule",
                    "damage-assessments", "--event-id", "1", "--region-id", "1",
                )  # fmt: skip
            finally:
                per_worker = client.run(_link_work_done)
        finally:
            cloudpickle.unregister_pickle_by_value(sys.modules[__name__])
    assert code == 0, err
    counts: dict[tuple[str, int], int] = {}
    for done in per_worker.values():
        for key, count in done.items():
            counts[key] = counts.get(key, 0) + count
    # The file's 391 rows read in partitions of 70 (the reader leaves the ragged row out).
    starts = sorted(row for what, row in counts if what == "rule")
    assert len(starts) == 6 and starts[0] == 1
    for what in ("rule", "ways", "resume"):
        assert {row: counts[what, row] for row in starts} == dict.fromkeys(starts, 1), what
    # The second pass linked only the rows fuzzy was given, and fuzzy did link some.
    resumed = sum(counts["resumed rows", row] for row in starts)
    assert 0 < resumed < 100
    assert json.loads(text)["summary"]["linking"]["fuzzy"] > 0


def test_a_required_link_rejects_the_same_rows_on_dask(
    world: Path, scheduler: str, tmp_path: Path
) -> None:
    """Workers cut each partition to the rows nothing rejected (the reader, the rule, a
    required link) and pickle them for the client: with a link required, the rows left
    without an asset are rejected and the others stored with their assets, as locally."""
    rules = tmp_path / "world" / "rules"
    rules.mkdir(parents=True)
    (rules / "damage_required.py").write_text(
        RULE.replace('name="damage-soundex"', 'name="damage-required"').replace(
            "asset_link=AssetLink(", "asset_link=AssetLink(\n        required=True,"
        ),
        encoding="utf-8",
    )
    engines = _engines(scheduler)
    out: dict[str, tuple[dict[str, object], list[tuple[object, ...]], bytes]] = {}
    for name, engine in engines.items():
        site = _parcels_site(rules.parent, tmp_path / f"{name}.sqlite", engine)
        rejects = tmp_path / f"rejects-{name}.csv"
        code, text, err = _run(
            rules.parent, site, engine, "--json", "import", str(world / "damage.csv"),
            "--type", "item", "--rule", "damage-required", "--event-id", "1",
            "--region-id", "1", "--rejects", str(rejects),
        )  # fmt: skip
        assert code == 0, err
        out[name] = (_summary(text), _rows(site, STORED_ITEMS), rejects.read_bytes())
    local, dask = out["local"], out["dask"]
    assert dask == local
    counts, linking = local[0]["counts"], local[0]["linking"]
    assert isinstance(counts, dict) and isinstance(linking, dict)
    # The 9 rows rejected without the requirement, and the rows it left without an asset
    # (a row the rule rejected may be one of them).
    assert linking["unlinked"] > 0 and 9 < counts["rejected"] <= 9 + linking["unlinked"]
    assert counts["inserted"] == len(local[1]) == 391 - counts["rejected"]
    assert all(row[4] is not None for row in local[1])  # every stored item has its asset
    rejected = list(csv.DictReader(local[2].decode("utf-8").splitlines(keepends=True)))
    assert len(rejected) == counts["rejected"]


def _parcel_layers(folder: Path) -> dict[str, Path]:
    """The sample's parcels as a zipped Shapefile and a GeoPackage, with two rows the
    rule rejects in the last partitions: a postcode that is not one (row 2500) and no
    code (row 2990)."""
    import zipfile

    import pyogrio

    frame = pyogrio.read_dataframe(SAMPLE / "parcels.zip")
    frame.loc[2499, "postcode"] = "30x0"
    frame.loc[2989, "code"] = None
    shp = folder / "shp" / "parcels.shp"
    shp.parent.mkdir()
    pyogrio.write_dataframe(frame, shp)
    zipped = folder / "parcels.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as archive:
        for part in shp.parent.iterdir():
            archive.write(part, part.name)
    gpkg = folder / "parcels.gpkg"
    pyogrio.write_dataframe(frame, gpkg, layer="parcels")
    return {"zipped shapefile": zipped, "geopackage": gpkg}


@pytest.mark.parametrize("kind", ["zipped shapefile", "geopackage"])
def test_a_layer_imports_alike_whole_in_parts_and_on_dask(
    world: Path, scheduler: str, tmp_path: Path, kind: str
) -> None:
    """A Shapefile or GeoPackage is read by feature ranges (each part alone; on Dask, by
    the workers): the counts, the rejects (named by the file's rows) and the stored rows
    are those of the layer read as one part; with --rollback-on-error nothing is kept."""
    layer = _parcel_layers(tmp_path)[kind]
    runs = {
        "one part": (["--engine", "local"], {"TOOLKIT_CHUNK_ROWS": "100000"}),
        "parts": (["--engine", "local"], {"TOOLKIT_CHUNK_ROWS": "700"}),
        "dask": (["--engine", "dask", "--scheduler", scheduler], {}),
    }
    out: dict[
        str, tuple[dict[str, object], bytes, list[tuple[object, ...]], dict[str, object]]
    ] = {}
    for name, (engine, env) in runs.items():
        site = _site(tmp_path / f"{name}.sqlite")
        rejects = tmp_path / f"rejects-{name}.csv"
        args = ["--json", "import", str(layer), "--type", "asset", "--rule", "property-assets"]
        code, text, err = _run(
            world, site, engine, *args, "--rollback-on-error", partition_rows="700", env=env
        )
        assert code == 1, err
        assert _rows(site, "SELECT count(*) FROM asset") == [(0,)]
        refused = _summary(text)
        code, text, err = _run(
            world, site, engine, *args, "--rejects", str(rejects), partition_rows="700", env=env
        )
        assert code == 0, err
        out[name] = (_summary(text), rejects.read_bytes(), _rows(site, STORED_ASSETS), refused)
    one = out["one part"]
    assert one[0]["counts"] == {
        "read": 3000, "inserted": 2998, "updated": 0, "unchanged": 0, "skipped": 0,
        "retired": 0, "rejected": 2,
    }  # fmt: skip
    with (tmp_path / "rejects-one part.csv").open(encoding="utf-8") as f:
        rows = [int(r["row"]) for r in csv.DictReader(f)]
    assert rows == [2500, 2990]
    # Refused: nothing written, and the job names the rows that made it so.
    assert one[3]["status"] == "FAILED"
    assert [e["row"] for e in one[3]["errors"]] == [2500, 2990]  # type: ignore[attr-defined]
    for name in ("parts", "dask"):
        assert out[name] == one, name


def test_an_unreachable_scheduler_is_an_error_naming_it(world: Path, tmp_path: Path) -> None:
    code, _, err = _run(
        world, tmp_path / "none.sqlite", ["--engine", "dask", "--scheduler", "tcp://127.0.0.1:9"],
        "lookup", "12 SMITH ST",
    )  # fmt: skip
    assert code == 1
    assert err.startswith("Error: cannot reach the Dask scheduler at tcp://127.0.0.1:9")


def test_a_cluster_started_for_the_command_prints_its_dashboard_unless_quiet(
    world: Path, tmp_path: Path
) -> None:
    args = ["lookup", "--file", str(world / "damage.csv"), "--column", "Address"]
    args += ["--assets", str(SAMPLE / "parcels.zip"), "--mode", "fuzzy", "-o", "-"]
    result = CliRunner().invoke(cli, args, env={"TOOLKIT_ENGINE": "dask"})
    assert result.exit_code == 3, result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Dask dashboard: http://127.0.0.1:")
    assert len(result.stdout.splitlines()) == 1 + 390  # the heading, a row per query read
    quiet = CliRunner().invoke(cli, ["--quiet", *args], env={"TOOLKIT_ENGINE": "dask"})
    assert quiet.exit_code == 3
    assert "Dask dashboard" not in quiet.stderr
    assert quiet.stdout == result.stdout


def test_inspect_on_dask_reads_the_parts_on_the_workers_as_locally(
    world: Path, scheduler: str, tmp_path: Path
) -> None:
    args = ["--json", "inspect", str(world / "damage.csv"), "--head", "3"]
    local = CliRunner().invoke(cli, [*args, "--engine", "local"])
    dask = CliRunner().invoke(
        cli,
        [*args, "--engine", "dask", "--scheduler", scheduler],
        env={"TOOLKIT_PARTITION_ROWS": "70"},
    )
    assert local.exit_code == dask.exit_code == 0, dask.stderr
    assert dask.stdout == local.stdout
    report = json.loads(local.stdout)
    assert report["rows"] == 390 and [r["row"] for r in report["head"]] == [1, 2, 3]
    # Rows are records and lines are lines, whichever worker read the row's partition.
    found = [(p["row"], p["line"], p["message"]) for p in report["problems"]]
    assert found == [
        (232, 241, "not valid WKT"),
        (389, 404, "expected 13 values, found 4; row left out"),
    ]


def test_the_index_stamp_names_its_contents_not_its_layout(tmp_path: Path) -> None:
    """Workers keep a loaded index by its stamp: the index just built and the same assets
    read back from the site file (other chunks and string types) share it, and so do an
    index built from a frame and the same index saved and loaded; a changed name, code or
    geometry does not. Nothing is built to stamp it (the client does not match)."""
    import shapely.affinity

    from toolkit.engine.index_ref import fingerprint
    from toolkit.importing.pipeline import ImportRequest
    from toolkit.matching import AssetIndex
    from toolkit.matching.index import ASSET_FIELDS
    from toolkit.site import LocalSite
    from toolkit.site.index_cache import site_asset_frame

    with LocalSite(tmp_path / "site.sqlite", "default") as site:
        done = site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        assert done["status"] == "COMPLETE"
        built, read = site.asset_index(), site.asset_index()
        frame = site_asset_frame(site.store)
    assert built is not read
    stamp = fingerprint(built)
    assert fingerprint(read) == stamp and len(stamp) == 32
    # The geometries stay WKB and the code table is not made (the workers make theirs).
    assert read._geometry is None and "codes" not in read._derived
    read.assets.loc[read.assets.index[3], "name"] = "ELSEWHERE"
    assert fingerprint(read) != stamp
    built.assets.loc[built.assets.index[5], "code"] = "X" + str(built.assets["code"].iloc[5])
    assert fingerprint(built) != stamp

    # Built from a frame (geometries, no WKB): the same stamp saved and loaded again.
    from_frame = AssetIndex.from_frame(frame)
    assert from_frame._geometry is not None
    framed = fingerprint(from_frame)
    assert fingerprint(AssetIndex.load(from_frame.save(tmp_path / "saved"))) == framed
    assert fingerprint(AssetIndex.from_frame(frame)) == framed
    first = int(frame.geometry.notna().to_numpy().argmax())
    moved = frame.copy()
    moved.loc[moved.index[first], "geometry"] = shapely.affinity.translate(  # type: ignore[call-overload]  # stubs: no shapely values
        frame.geometry.iloc[first], 0.00001, 0.0
    )
    assert fingerprint(AssetIndex.from_frame(moved)) != framed
    recoded = frame.copy()
    extra = next(c for c in frame.columns if c not in (*ASSET_FIELDS, "geometry"))
    recoded.loc[recoded.index[0], extra] = "X" + str(frame[extra].iloc[0])
    assert fingerprint(AssetIndex.from_frame(recoded)) != framed
