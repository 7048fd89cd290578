"""The asset index built in two threads (the names analysed beside the read of the other
columns) is the index built in turn, byte for byte; assets that change between its two
reads are read again in one, and a failure in either thread stops the build."""

from __future__ import annotations

import re
import sqlite3
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from toolkit.importing.pipeline import ImportRequest
from toolkit.matching import AssetIndex
from toolkit.matching.address import Analysis
from toolkit.site import LocalSite
from toolkit.site.index_build import (
    NAME_COLUMNS,
    OTHER_COLUMNS,
    READ_COLUMNS,
    build_in_turn,
    build_index,
)
from toolkit.site.index_cache import site_asset_index
from toolkit.store.arrow_read import ApartRead
from toolkit.store.assets import AssetStore, BegunColumns

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
        reads: list[pa.Table | None] = []
        real = ApartRead.table

        def spy(self: ApartRead, schema: pa.Schema) -> pa.Table | None:
            reads.append(real(self, schema))
            return reads[-1]

        monkeypatch.setattr(ApartRead, "table", spy)
        index, dump = build_index(site.store)
        # The names, and the other columns (begun before them): both read apart.
        assert [None if r is None else r.column_names for r in reads] == [
            list(NAME_COLUMNS),
            list(OTHER_COLUMNS),
        ]
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
        read, begin = AssetStore.columns, AssetStore.columns_begun
        calls: list[tuple[str, ...]] = []

        def columns_begun(self: AssetStore, **kwargs: Any) -> Any:
            calls.append(tuple(kwargs["names"]))
            return begin(self, **kwargs)

        def columns(self: AssetStore, **kwargs: Any) -> Any:
            table = read(self, **kwargs)
            if tuple(kwargs["names"]) == NAME_COLUMNS:  # read: another connection writes
                other = sqlite3.connect(site.db.path, isolation_level=None)
                other.executescript(f"BEGIN IMMEDIATE; {change}; COMMIT;")
                other.close()
            return table

        monkeypatch.setattr(AssetStore, "columns_begun", columns_begun)
        monkeypatch.setattr(AssetStore, "columns", columns)
        index, dump = build_index(site.store)
        monkeypatch.undo()
        expected, expected_dump = build_in_turn(site.store)
    # The other columns begun (read after the names: too few assets to read apart), the
    # names, then all of them in one read.
    assert calls == [OTHER_COLUMNS, NAME_COLUMNS, READ_COLUMNS]
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
        read = BegunColumns.result

        def result(self: BegunColumns) -> Any:
            if self.names == OTHER_COLUMNS:
                raise sqlite3.OperationalError("disk I/O error")
            return read(self)

        monkeypatch.setattr(BegunColumns, "result", result)
        with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):
            site_asset_index(site.store)
        # The names' thread has finished too: nothing runs on after the failure.
        assert threading.active_count() == threads
        assert site.store.index_cache.get(site.store.assets.stamp()) is None


def test_a_failed_estimate_of_u_stops_the_build_and_the_names_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def failing(analysis: Analysis) -> Any:
        raise MemoryError(f"no u of {analysis.words.n_rows} names")

    with _site(tmp_path / "site.sqlite") as site:
        threads = threading.active_count()
        # u is worked out by the build's own thread; the names' thread waits for it.
        monkeypatch.setattr("toolkit.site.index_build.u_of_analysis", failing)
        raised: list[BaseException] = []

        def build() -> None:
            try:
                site_asset_index(site.store)
            except MemoryError as exc:
                raised.append(exc)

        # In a thread of its own, so that the names' thread left waiting fails the test
        # instead of hanging it.
        builder = threading.Thread(target=build, daemon=True)
        builder.start()
        builder.join(timeout=120)
        assert not builder.is_alive(), "the build still waits for its names' thread"
        assert len(raised) == 1 and re.fullmatch(r"no u of 30\d\d names", str(raised[0]))
        monkeypatch.undo()
        assert threading.active_count() == threads
        assert site.store.index_cache.get(site.store.assets.stamp()) is None
        assert len(site_asset_index(site.store)) > 3000


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
