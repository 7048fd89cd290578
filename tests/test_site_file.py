"""A site is one file: report snapshots and the matching-index cache live inside it, so a
copy of the file alone is the whole site; sites that kept them in folders beside the file
are moved into it on first open."""

from __future__ import annotations

import csv
import io
import shutil
import sqlite3
import time
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pytest
import shapely
from click.testing import CliRunner
from matching_assets import parquet_dump

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.matching import AssetIndex, resolve
from toolkit.matching.index import DUMP_ENCODING, dump_encoding
from toolkit.site import LocalSite
from toolkit.site import index_cache as index_cache_module
from toolkit.site.index_cache import site_asset_index

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
WAL = ("-wal", "-shm")


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def _beside(store: Path) -> list[str]:
    """What the folder holds besides the site file and SQLite's own WAL files."""
    own = {store.name, *(store.name + s for s in WAL)}
    return sorted(p.name for p in store.parent.iterdir() if p.name not in own)


def test_a_copy_of_the_site_file_alone_keeps_reports_and_lookups(tmp_path: Path) -> None:
    store = tmp_path / "a" / "demo.sqlite"
    store.parent.mkdir()
    out = tmp_path / "out"
    code, _, err = _run("--store", str(store), "--quiet", "demo", "--out", str(out))
    assert code == 0, err
    query = "55 SMITH ROAD BUNINYONG 3357"
    code, found, err = _run("--store", str(store), "--json", "lookup", query)
    assert code == 0, err
    # The demo's reports: 1 damage summary, 2 impacted assets, 3 the items, 4 matching.
    code, contents, err = _run("--store", str(store), "report", "fetch", "3", "--format", "csv")
    assert code == 0, err
    # A header and 992 items (notes with a line break are quoted, so read it as CSV).
    assert len(list(csv.reader(io.StringIO(contents)))) == 993
    assert _beside(store) == []  # no folders beside the file any more

    # Only the .sqlite file goes elsewhere (every connection closed: no WAL to carry).
    copy = tmp_path / "b" / "copied.sqlite"
    copy.parent.mkdir()
    shutil.copy(store, copy)
    code, again, err = _run("--store", str(copy), "report", "fetch", "3", "--format", "csv")
    assert code == 0, err
    assert again == contents
    xlsx = tmp_path / "quality.xlsx"
    code, _, err = _run(
        "--store", str(copy), "report", "fetch", "4", "--format", "xlsx", "-o", str(xlsx)
    )
    assert code == 0, err
    assert xlsx.read_bytes()[:2] == b"PK" and xlsx.stat().st_size > 10_000
    with LocalSite(copy, "default") as site:  # the copy's index cache is current
        assert site.store.index_cache.get(site.store.assets.stamp()) is not None
    code, from_copy, err = _run("--store", str(copy), "--json", "lookup", query)
    assert code == 0, err
    assert from_copy == found and '"102559"' in from_copy
    assert _beside(copy) == []


def _small_site(path: Path) -> LocalSite:
    site = LocalSite(path, "default")
    job = site.run_import(ImportRequest("asset", "assets-csv", SAMPLE / "assets.csv"))
    assert job["status"] == "COMPLETE"
    return site


def test_the_index_is_cached_in_the_file_and_rebuilt_when_assets_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _small_site(tmp_path / "site.sqlite") as site:
        built = site_asset_index(site.store)
        stamp = site.store.assets.stamp()
        assert site.store.index_cache.get(stamp) is not None
        assert site.store.index_cache.get("another stamp") is None

        # From the cache: the assets are not read again.
        def no_reading(_store: object) -> None:
            raise AssertionError("the index was rebuilt")

        with monkeypatch.context() as patched:
            patched.setattr(index_cache_module, "site_assets", no_reading)
            patched.setattr(index_cache_module, "build_index", no_reading)
            cached = site_asset_index(site.store)
        assert cached.assets.equals(built.assets) and len(cached) == 36
        assert cached.codes.equals(built.codes)

        # New assets: a new stamp, the index is built again and replaces the cache.
        parcels = ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip")
        assert site.run_import(parcels)["status"] == "COMPLETE"
        assert len(site_asset_index(site.store)) == 3036
        new_stamp = site.store.assets.stamp()
        assert site.store.index_cache.get(stamp) is None
        assert site.store.index_cache.get(new_stamp) is not None
        assert (
            site.db.connection.execute("SELECT count(*) FROM asset_index_cache").fetchone()[0] == 1
        )


def test_an_index_built_from_the_store_read_in_parts_is_the_same_byte_for_byte(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with LocalSite(tmp_path / "site.sqlite", "default") as site:
        parcels = ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip")
        assert site.run_import(parcels)["status"] == "COMPLETE"
        frame, wkb, bounds = index_cache_module.site_assets(site.store)
        whole = io.BytesIO()
        AssetIndex.from_frame(frame, wkb=wkb, bounds=bounds).dump(whole)
        # 3,000 parcels read 700 rows at a time: five parts, the last one short.
        monkeypatch.setattr("toolkit.store.assets.READ_ROWS", 700)
        frame, wkb, bounds = index_cache_module.site_assets(site.store)
        assert frame["name"].array.__arrow_array__().num_chunks == 5
        in_parts = io.BytesIO()
        AssetIndex.from_frame(frame, wkb=wkb, bounds=bounds).dump(in_parts)
        assert len(frame) == 3000 and in_parts.getvalue() == whole.getvalue()
        # What the cache keeps is that dump, stored in parts sliced from its buffers.
        site_asset_index(site.store)
        cached = site.store.index_cache.get(site.store.assets.stamp())
        assert cached is not None and bytes(cached) == whole.getvalue()


def test_an_index_built_from_the_store_keeps_its_wkb_and_answers_as_one_from_the_frame(
    tmp_path: Path,
) -> None:
    with LocalSite(tmp_path / "site.sqlite", "default") as site:
        parcels = ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip")
        assert site.run_import(parcels)["status"] == "COMPLETE"
        # Boxes the store lacks (as an older writer might have left) and an empty shape
        # (no box): read from the geometries themselves.
        with site.db.transaction() as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM asset ORDER BY id LIMIT 4")]
            conn.execute(
                f"UPDATE asset SET min_x = NULL, min_y = NULL, max_x = NULL, max_y = NULL "
                f"WHERE id IN ({', '.join(map(str, ids))})"
            )
            empty = shapely.to_wkb(shapely.Polygon())
            conn.execute("UPDATE asset SET geometry = ? WHERE id = ?", (empty, ids[0]))
        built = site_asset_index(site.store)
        frame, wkb, bounds = index_cache_module.site_assets(site.store)
        assert np.isnan(bounds[0]).all() and not np.isnan(bounds[1:4]).any()
    # The store's WKB is kept as it is and no geometry stays decoded.
    assert built._geometry is None and built._wkb is not None
    assert built._wkb.equals(wkb.cast(built._wkb.type))
    geometry = shapely.from_wkb(wkb.to_numpy(zero_copy_only=False))
    # The boxes read from the store are the decoded geometries' boxes.
    np.testing.assert_array_equal(bounds, shapely.bounds(geometry))
    from_frame = AssetIndex.from_frame(gpd.GeoDataFrame(frame, geometry=geometry, crs=4326))
    assert from_frame._geometry is not None
    np.testing.assert_array_equal(built.bounds, from_frame.bounds)
    pd.testing.assert_frame_equal(built.assets, from_frame.assets)
    pd.testing.assert_frame_equal(built.name_keys, from_frame.name_keys)
    points = [
        f"{y}, {x}" for x, y in shapely.get_coordinates(shapely.centroid(from_frame.geometry[:40]))
    ]
    texts = pd.DataFrame({"query": pd.array(points, dtype="str")})
    geo = {"mode": "geo", "useExternalLookups": False}
    expected = resolve(from_frame, texts, geo)
    assert (expected["asset_id"].notna()).sum() >= 35
    pd.testing.assert_frame_equal(resolve(built, texts, geo), expected)


def test_a_busy_file_is_not_waited_for_to_cache_the_index(tmp_path: Path) -> None:
    with _small_site(tmp_path / "site.sqlite") as site:
        # Another process holds the write lock, as a long import does.
        other = sqlite3.connect(site.db.path, isolation_level=None)
        other.execute("BEGIN IMMEDIATE")
        started = time.perf_counter()
        index = site_asset_index(site.store)
        assert time.perf_counter() - started < 5  # not the 600 s an import would wait
        assert len(index) == 36
        assert site.store.index_cache.get(site.store.assets.stamp()) is None
        other.execute("ROLLBACK")
        other.close()
        site_asset_index(site.store)
        assert site.store.index_cache.get(site.store.assets.stamp()) is not None


def test_a_damaged_cached_index_is_rebuilt(tmp_path: Path) -> None:
    with _small_site(tmp_path / "site.sqlite") as site:
        site_asset_index(site.store)
        with site.db.transaction() as conn:
            conn.execute("UPDATE asset_index_part SET data = X'00112233'")
        assert len(site_asset_index(site.store)) == 36
        cached = site.store.index_cache.get(site.store.assets.stamp())
        assert cached is not None and cached.startswith(b"toolkit-asset-index")


def test_a_cached_index_of_the_earlier_encoding_is_read_and_kept_anew(tmp_path: Path) -> None:
    with _small_site(tmp_path / "site.sqlite") as site:
        built = site_asset_index(site.store)
        stamp = site.store.assets.stamp()
        current = site.store.index_cache.get(stamp)
        assert current is not None and dump_encoding(current) == DUMP_ENCODING
        site.store.index_cache.put(stamp, io.BytesIO(parquet_dump(current)))
        assert dump_encoding(site.store.index_cache.get(stamp) or b"") == "parquet"
        loaded = site_asset_index(site.store)
        assert loaded.assets["id"].tolist() == built.assets["id"].tolist()
        assert dump_encoding(site.store.index_cache.get(stamp) or b"") == DUMP_ENCODING


def _make_old_style(store: Path) -> dict[int, bytes]:
    """Turn a current site file into one as the toolkit left it before schema 5: the
    snapshots in FILE.reports/, an index cache in FILE.index/, none of them in the file."""
    snapshots: dict[int, bytes] = {}
    conn = sqlite3.connect(store, isolation_level=None)
    for instance_id, data in conn.execute(
        "SELECT instance_id, data FROM report_snapshot ORDER BY instance_id, part"
    ):
        snapshots[int(instance_id)] = snapshots.get(int(instance_id), b"") + data
    conn.executescript(
        "DROP TABLE report_snapshot; DROP TABLE asset_index_part; DROP TABLE asset_index_cache;"
        # Tables of later migrations go too: the file is as schema 4 left it.
        "DROP TABLE gazetteer_part; DROP TABLE gazetteer; DROP INDEX audit_change;"
        "ALTER TABLE site DROP COLUMN asset_version;"
        "PRAGMA user_version = 4;"
    )
    conn.close()
    reports = store.with_name(store.name + ".reports")
    reports.mkdir()
    for instance_id, data in snapshots.items():
        (reports / f"{instance_id}.parquet").write_bytes(data)
    (reports / "99.parquet").write_bytes(b"a snapshot of a run the file does not know")
    (reports / "7.parquet.partial").write_bytes(b"half written")
    index = store.with_name(store.name + ".index") / "site-1"
    index.mkdir(parents=True)
    (index / "stamp.json").write_text('{"stamp": "0-0-0"}', encoding="utf-8")
    return snapshots


def test_an_old_site_with_side_folders_is_moved_into_the_file(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "old.sqlite"
    with _small_site(store) as site:
        first = site.report_run({"reportId": 3})["id"]
        second = site.report_run({"reportId": 5})["id"]
    code, before, err = _run("--store", str(store), "report", "fetch", first, "--format", "csv")
    assert code == 0, err
    snapshots = _make_old_style(store)
    assert sorted(snapshots) == [int(first), int(second)]

    code, after, err = _run("--store", str(store), "report", "fetch", first, "--format", "csv")
    assert code == 0, err
    assert after == before
    assert "moved 2 report snapshots" in caplog.text
    caplog.clear()
    assert _beside(store) == []  # both folders gone, the stray files with them
    with LocalSite(store, "default") as site:
        stored = site.store.reports.snapshot(int(second))
        assert stored is not None
        with stored:
            assert stored.read() == snapshots[int(second)]
    code, _, err = _run("--store", str(store), "report", "fetch", second, "--format", "json")
    assert code == 0, err
    assert "moved" not in caplog.text  # once only


def test_a_side_folder_holding_other_files_is_left_with_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = tmp_path / "old.sqlite"
    with _small_site(store) as site:
        instance = site.report_run({"reportId": 3})["id"]
    _make_old_style(store)
    (store.with_name(store.name + ".reports") / "notes.txt").write_text("mine", encoding="utf-8")
    code, _, err = _run("--store", str(store), "report", "fetch", instance, "--format", "csv")
    assert code == 0, err
    assert _beside(store) == ["old.sqlite.reports"]
    assert [p.name for p in store.with_name(store.name + ".reports").iterdir()] == ["notes.txt"]
    assert "holds files the toolkit did not make" in caplog.text
