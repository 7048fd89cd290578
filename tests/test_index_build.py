"""The asset index built in two threads (the names analysed beside the read of the other
columns) is the index built in turn, byte for byte; assets that change between its two
reads are read again in one, and a failure in either thread stops the build."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from toolkit.importing.pipeline import ImportRequest
from toolkit.matching import AssetIndex
from toolkit.matching.address import Analysis
from toolkit.site import LocalSite
from toolkit.site.index_build import NAME_COLUMNS, OTHER_COLUMNS, build_in_turn, build_index
from toolkit.site.index_cache import site_asset_index
from toolkit.store import assets as store_assets
from toolkit.store.assets import AssetStore

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def _site(path: Path) -> LocalSite:
    """36 assets with codes and extraInfo, 3,000 parcels, a few of them retired."""
    site = LocalSite(path, "default")
    for rule, source in (("assets-csv", "assets.csv"), ("property-assets", "parcels.zip")):
        job = site.run_import(ImportRequest("asset", rule, SAMPLE / source))
        assert job["status"] == "COMPLETE"
    with site.db.transaction() as conn:
        conn.execute("UPDATE asset SET status = 0 WHERE id % 97 = 0")
        site.store.assets.changing(conn)
    # The imports' logs are copied in a thread of their own: ended before the tests
    # count the threads a build leaves.
    site.db.log_copied()
    return site


def _bytes(dump: list[bytes | memoryview]) -> bytes:
    return b"".join(bytes(part) for part in dump)


def _same_index(built: AssetIndex, expected: AssetIndex) -> None:
    pd.testing.assert_frame_equal(built.assets, expected.assets)
    pd.testing.assert_frame_equal(built.extra, expected.extra)
    pd.testing.assert_frame_equal(built.name_keys, expected.name_keys)
    assert built.extra_fields == expected.extra_fields
    np.testing.assert_array_equal(built.bounds, expected.bounds)
    assert built.wkb().equals(expected.wkb())
    side, expected_side = built.fuzzy_side()._arrays(), expected.fuzzy_side()._arrays()
    assert side.keys() == expected_side.keys()
    for name, values in side.items():
        np.testing.assert_array_equal(values, expected_side[name], err_msg=name)


def test_the_index_built_in_two_threads_is_the_one_built_in_turn(tmp_path: Path) -> None:
    with _site(tmp_path / "site.sqlite") as site:
        active = site.db.connection.execute(
            "SELECT count(*) FROM asset WHERE status > 0"
        ).fetchone()[0]
        index, dump = build_index(site.store)
        expected, expected_dump = build_in_turn(site.store)
    assert len(index) == active and 3000 < active < 3036
    assert _bytes(dump) == _bytes(expected_dump)
    _same_index(index, expected)
    # The side was made from the index's own analysis, which is let go.
    assert "analysis" not in index._derived
    assert index.assets["id"].is_unique
    assert {"propnum", "street"} <= set(index.extra_fields)


def test_the_index_of_columns_read_apart_is_the_one_of_the_sqlite3_modules_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _site(tmp_path / "site.sqlite") as site:
        monkeypatch.setattr("toolkit.store.arrow_read.APART_ROWS", 1)
        reads: list[str] = []
        real = store_assets.read_apart
        monkeypatch.setattr(
            store_assets, "read_apart", lambda *args: reads.append(args[1]) or real(*args)
        )
        index, dump = build_index(site.store)
        assert len(reads) == 2  # the names, then the other columns: both read apart
        site.store.assets.path = None
        expected, expected_dump = build_index(site.store)
    assert len(reads) == 2
    assert _bytes(dump) == _bytes(expected_dump)
    _same_index(index, expected)


def test_a_site_without_assets_builds_an_empty_index(tmp_path: Path) -> None:
    with LocalSite(tmp_path / "site.sqlite", "default") as site:
        index, dump = build_index(site.store)
        expected, expected_dump = build_in_turn(site.store)
    assert len(index) == len(expected) == 0 and _bytes(dump) == _bytes(expected_dump)


@pytest.mark.parametrize(
    "change",
    [
        # An asset renamed as the store writes assets: the site's asset version is raised.
        "UPDATE asset SET name = '9 CHANGED STREET BALLARAT 3350' WHERE id = "
        "(SELECT min(id) FROM asset WHERE status > 0 AND name LIKE '%STREET%'); "
        "UPDATE site SET asset_version = asset_version + 1",
        # An asset retired by a writer that left the version alone: the ids differ.
        "UPDATE asset SET status = 0 WHERE id = (SELECT max(id) FROM asset WHERE status > 0)",
    ],
)
def test_assets_changed_between_the_two_reads_are_read_again_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, change: str
) -> None:
    with _site(tmp_path / "site.sqlite") as site:
        before = len(build_in_turn(site.store)[0])
        read = AssetStore.columns
        calls: list[tuple[str, ...]] = []

        def columns(self: AssetStore, **kwargs: Any) -> Any:
            table = read(self, **kwargs)
            calls.append(tuple(kwargs["names"]))
            if len(calls) == 1:  # the names are read: another connection writes
                other = sqlite3.connect(site.db.path, isolation_level=None)
                other.executescript(f"BEGIN IMMEDIATE; {change}; COMMIT;")
                other.close()
            return table

        monkeypatch.setattr(AssetStore, "columns", columns)
        index, dump = build_index(site.store)
        monkeypatch.undo()
        expected, expected_dump = build_in_turn(site.store)
    # The names, the other columns, then all of them in one read.
    assert calls[:2] == [NAME_COLUMNS, OTHER_COLUMNS] and len(calls) == 3
    assert _bytes(dump) == _bytes(expected_dump)
    _same_index(index, expected)
    if "CHANGED" in change:
        assert "9 CHANGED STREET BALLARAT 3350" in index.assets["name"].tolist()
        assert len(index) == before
    else:
        assert len(index) == before - 1


def test_a_failed_analysis_of_the_names_stops_the_build_and_nothing_is_cached(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(cls: type[Analysis], names: pd.Series) -> Analysis:
        raise RuntimeError(f"no analysis of {len(names)} names")

    with _site(tmp_path / "site.sqlite") as site:
        threads = threading.active_count()
        monkeypatch.setattr(Analysis, "of", classmethod(failing))
        with pytest.raises(RuntimeError, match=r"no analysis of 30\d\d names"):
            site_asset_index(site.store)
        monkeypatch.undo()
        assert site.store.index_cache.get(site.store.assets.stamp()) is None
        assert threading.active_count() == threads
        assert len(site_asset_index(site.store)) > 3000


def test_a_failed_read_of_the_other_columns_stops_the_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with _site(tmp_path / "site.sqlite") as site:
        threads = threading.active_count()
        read = AssetStore.columns

        def columns(self: AssetStore, **kwargs: Any) -> Any:
            if tuple(kwargs["names"]) == OTHER_COLUMNS:
                raise sqlite3.OperationalError("disk I/O error")
            return read(self, **kwargs)

        monkeypatch.setattr(AssetStore, "columns", columns)
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            site_asset_index(site.store)
        # The names' thread has finished too: nothing runs on after the failure.
        assert threading.active_count() == threads
        assert site.store.index_cache.get(site.store.assets.stamp()) is None


def test_the_index_is_read_once_an_imports_log_is_in_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # While a bulk write's log is being copied, each page read is looked up in the log
    # first: the build's reads wait for the copy (and so does a load of the cache).
    with _site(tmp_path / "site.sqlite") as site:
        order: list[str] = []
        copied = site.db.log_copied
        read = AssetStore.columns

        def waited() -> None:
            order.append("log copied")
            copied()

        def columns(self: AssetStore, **kwargs: Any) -> Any:
            order.append("read")
            return read(self, **kwargs)

        monkeypatch.setattr(site.db, "log_copied", waited)
        monkeypatch.setattr(AssetStore, "columns", columns)
        assert len(site_asset_index(site.store)) > 3000  # built
        assert order[0] == "log copied" and "read" in order
        order.clear()
        assert len(site_asset_index(site.store)) > 3000  # loaded from the cache
        assert order == ["log copied"]
