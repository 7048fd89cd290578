"""Property tests: whatever bytes a CSV or a zipped Shapefile holds, ``read_source`` gives a
result or a ``ToolkitError``, never anything else.

The inputs are real files mutated by Hypothesis (bytes flipped, inserted, deleted, cut off,
repeated); the search is derandomized and bounded so the module runs in a few seconds, the
same examples every run.
"""

from __future__ import annotations

import functools
import io
import tempfile
import zipfile
from pathlib import Path

import geopandas as gpd
import numpy as np
import pytest
import shapely
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolkit.errors import ToolkitError
from toolkit.sources import ReadLimits, read_source

BOUNDED = settings(
    max_examples=100,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# Small limits, so mutations that make a value, a zip entry or a ratio too large are reached.
LIMITS = ReadLimits(
    max_file_bytes=64 * 1024,
    max_uncompressed_bytes=256 * 1024,
    max_field_bytes=200,
    max_zip_entries=20,
)

SEED_CSVS = [
    b'code,name,wkt\nA1,Hall,POINT (143.85 -37.56)\nA2,"Pool, north",POINT (143.86 -37.57)\n',
    b"\xef\xbb\xbfReference;Latitude;Longitude\nR1;-37.56;143.85\nR2;;\nR3;-375.6;143.8\n",
    b'id,note,wkt\n1,"two\nlines",POLYGON ((0 0, 1 1, 1 0, 0 1, 0 0))\n2,,\n3,x,nope\n',
    "Name\tCode\nCafé\t007\nCrème\t010\n".encode("cp1252"),
    b"a|b|c\n1|2\n3|4|5|6\n\n7|8|9\n",
]


def _mutation() -> st.SearchStrategy[tuple[str, int, int, bytes]]:
    return st.tuples(
        st.sampled_from(["flip", "insert", "delete", "cut", "repeat"]),
        st.integers(min_value=0, max_value=10**6),
        st.integers(min_value=1, max_value=64),
        st.binary(min_size=1, max_size=8)
        | st.sampled_from([b'"', b"\n", b"\r", b",", b";", b"\x00", b"\xff", b"(", b"nan"]),
    )


def _mutate(data: bytes, mutations: list[tuple[str, int, int, bytes]]) -> bytes:
    """``data`` changed by each mutation in turn, at a position taken modulo its length."""
    for kind, where, size, piece in mutations:
        at = where % (len(data) + 1)
        if kind == "flip" and data:
            at %= len(data)
            data = data[:at] + bytes([data[at] ^ (1 << (size % 8))]) + data[at + 1 :]
        elif kind == "insert":
            data = data[:at] + piece * (1 + size % 4) + data[at:]
        elif kind == "delete":
            data = data[:at] + data[at + size :]
        elif kind == "cut":
            data = data[:at]
        elif kind == "repeat":
            data = data[:at] + data[at : at + size] * 3 + data[at:]
    return data


def _check(path: Path, **options: object) -> None:
    """A result that holds together, or a ToolkitError; any other exception fails the test."""
    try:
        frame, report = read_source(path, limits=LIMITS, **options)
    except ToolkitError as exc:
        assert str(exc)  # a message the user can act on
        return
    assert isinstance(frame, gpd.GeoDataFrame)
    assert report.rows == len(frame)
    assert frame.index.is_unique and frame.index.is_monotonic_increasing
    assert frame.crs is not None and frame.crs.to_epsg() == 4326
    present = frame.geometry.dropna()
    if len(present):
        # Every geometry kept is a usable EPSG:4326 one.
        coords = shapely.get_coordinates(np.asarray(present.values))
        assert np.isfinite(coords).all()
        assert (np.abs(coords[:, 0]) <= 180).all() and (np.abs(coords[:, 1]) <= 90).all()
    for problem in report.problems:
        assert problem.message
        assert problem.row is None or problem.row >= 1


# pyarrow decodes a ragged row's text as UTF-8 before it calls our handler; when the row
# is not UTF-8 it swallows that error itself and fails the parse, which the reader turns
# into its windows-1252 fallback or a SourceError. Only the swallowed error is ignored here.
@pytest.mark.filterwarnings(
    "ignore:Exception ignored in.*skip_ragged:pytest.PytestUnraisableExceptionWarning"
)
@settings(BOUNDED, max_examples=200)
@given(
    seed=st.sampled_from(SEED_CSVS),
    mutations=st.lists(_mutation(), min_size=1, max_size=4),
)
def test_any_mutated_csv_gives_a_result_or_a_toolkit_error(
    seed: bytes, mutations: list[tuple[str, int, int, bytes]]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutated.csv"
        path.write_bytes(_mutate(seed, mutations))
        _check(path)


@functools.cache
def _shapefile_parts() -> dict[str, bytes]:
    """The parts of a small shapefile in GDA2020 / MGA zone 55, a bow-tie among them."""
    x, y = 320_000.0, 5_812_000.0
    frame = gpd.GeoDataFrame(
        {"name": ["Café", "Crème", "Plain"], "propnum": ["007", "010", "011"]},
        geometry=[
            shapely.box(x, y, x + 10, y + 10),
            shapely.Polygon([(x, y), (x + 10, y + 10), (x + 10, y), (x, y + 10)]),
            shapely.Point(x + 5, y + 5).buffer(3),
        ],
        crs="EPSG:7855",
    )
    with tempfile.TemporaryDirectory() as folder:
        frame.to_file(Path(folder) / "parcels.shp", engine="pyogrio")
        return {p.suffix: p.read_bytes() for p in Path(folder).iterdir()}


def _zipped(parts: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for suffix, data in sorted(parts.items()):
            archive.writestr(f"export/parcels{suffix}", data)
    return out.getvalue()


@BOUNDED
@given(
    part=st.sampled_from([".shp", ".shx", ".dbf", ".prj", ".cpg"]),
    mutations=st.lists(_mutation(), min_size=1, max_size=3),
    crs=st.sampled_from([None, "EPSG:7855"]),
)
def test_a_zipped_shapefile_with_a_mutated_part_gives_a_result_or_a_toolkit_error(
    part: str, mutations: list[tuple[str, int, int, bytes]], crs: str | None
) -> None:
    parts = dict(_shapefile_parts())
    parts[part] = _mutate(parts[part], mutations)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "parcels.zip"
        path.write_bytes(_zipped(parts))
        _check(path, crs=crs)


@settings(BOUNDED, max_examples=60)
@given(mutations=st.lists(_mutation(), min_size=1, max_size=3))
def test_mutated_zip_bytes_give_a_result_or_a_toolkit_error(
    mutations: list[tuple[str, int, int, bytes]],
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "parcels.zip"
        path.write_bytes(_mutate(_zipped(_shapefile_parts()), mutations))
        _check(path)
