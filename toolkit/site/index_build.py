"""Building the matching index of a site's assets from its store.

A million assets' build is a read of the store (3 s of CPU, mostly the sqlite3 module's
Python objects), the analysis of the names and the fuzzy matcher's side made of it
(5-6 s, in numpy and Arrow, which let go of the GIL), the asset tables (2 s) and the
compression of the result (1 s). :func:`build_index` reads the names first and analyses
them in a second thread while it reads the other columns and makes the asset tables:
10.5 s became 7.7 with a second core free (``tests/benchmarks/bench_index_build.py``),
for the same index and the same bytes cached. (The two reads at once, each in its own
thread, were slower: both make Python objects, and took turns with the GIL row by row.)

Read in processes apart (many assets), the two reads do run at once; and the names'
thread leaves u's random pairs to this one. At a million parcels the reads at once alone
left this thread done 2 s before the names' thread (its parse and blocking keys), a core
idle: no faster. With u moved here as well, the two end together (11.0-12.9 s became
10.1-10.5, the same bytes cached).
"""

from __future__ import annotations

import io
import queue
from concurrent.futures import Future, ThreadPoolExecutor

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json
import shapely

from toolkit.matching import AssetIndex
from toolkit.matching.address import Analysis
from toolkit.matching.asset_side import AssetSide, u_of_analysis
from toolkit.matching.index import ASSET_FIELDS, names_of, side_streams
from toolkit.store import SiteStore
from toolkit.store.assets import AssetStore

# What an index is built from (not the status: only active assets are read).
READ_COLUMNS = (
    *(name for name in AssetStore.FRAME_COLUMNS if name != "status"),
    *AssetStore.BOUNDS_COLUMNS,
)
# Read first, for the names' analysis; then the others.
NAME_COLUMNS = ("id", "name")
OTHER_COLUMNS = tuple(name for name in READ_COLUMNS if name != "name")

Dump = list[bytes | memoryview]


def build_index(store: SiteStore) -> tuple[AssetIndex, Dump]:
    """The index of the site's active assets and its dump (``AssetIndex.dump_parts``).

    The other columns' read is begun (in a process apart, for many assets) and the names
    are read; a second thread analyses them and makes and compresses their fuzzy side
    while this one takes the other columns, works out u of the names for that side and
    makes and compresses the rest of the index. The two reads are two statements: if the
    assets changed between them (the site's asset stamp moved, or the ids differ), the
    index is built again from one read.
    """
    stamp = store.assets.stamp()
    # u of the names, worked out here while the other thread parses them for blocking.
    u_given: Future[dict[str, np.ndarray]] = Future()
    with (
        store.assets.columns_begun(names=OTHER_COLUMNS) as others,
        ThreadPoolExecutor(1, thread_name_prefix="asset-names") as pool,
    ):
        try:
            named = store.assets.columns(names=NAME_COLUMNS)
            names = names_of(_text(named["name"]))
            analysed: queue.Queue[Analysis | BaseException] = queue.Queue(maxsize=1)
            side_work = pool.submit(_name_side, names, analysed, u_given)
            raw = others.result()
            if store.assets.stamp() != stamp or not raw["id"].equals(named["id"]):
                side_work.cancel()
                del raw, named, names
                changed = True
            else:
                changed = False
                # The names as analysed (trimmed already: from_frame trims them again).
                frame, wkb, bounds = assets_of(raw.append_column("name", named["name"]))
                frame["name"] = names
                del raw, named, names
                _let_go_freed()
                analysis = analysed.get()
                if isinstance(analysis, BaseException):
                    raise analysis
                u_given.set_result(u_of_analysis(analysis))
                index = AssetIndex.from_frame(frame, wkb=wkb, bounds=bounds, analysis=analysis)
                del frame, wkb, bounds, analysis
                _let_go_freed()
                own = index.own_streams()
                side, side_buffers, side_header = side_work.result()
        finally:
            # However this thread stopped, the other does not wait for u.
            u_given.cancel()
    if changed:
        return build_in_turn(store)
    index.keep_fuzzy_side(side)
    return index, index.dump_of({**own, **side_buffers}, side_header)


def _name_side(
    names: pd.Series,
    analysed: queue.Queue[Analysis | BaseException],
    u_given: Future[dict[str, np.ndarray]],
) -> tuple[AssetSide, dict[str, pa.Buffer], dict[str, object]]:
    """Analyse ``names`` (handed to ``analysed`` at once, or what stopped it), then make
    the fuzzy side of them, with the u ``u_given``, and its tables of a dump."""
    try:
        analysis = Analysis.of(names)
    except BaseException as exc:
        analysed.put(exc)
        raise
    analysed.put(analysis)
    _let_go_freed()
    side = AssetSide.of_analysis(analysis, u=u_given.result)
    del analysis
    _let_go_freed()
    buffers, header = side_streams(side)
    return side, buffers, header


def _let_go_freed() -> None:
    """Return what this thread's Arrow allocator keeps of the memory it freed. Each
    thread has its own (mimalloc), and neither reuses the other's: kept, the two threads'
    freed Arrow buffers raised the build's peak by ~100 MiB at a million assets."""
    pa.default_memory_pool().release_unused()


def build_in_turn(store: SiteStore) -> tuple[AssetIndex, Dump]:
    """:func:`build_index` in one thread, from one read of the store."""
    frame, wkb, bounds = site_assets(store)
    index = AssetIndex.from_frame(frame, wkb=wkb, bounds=bounds)
    # The frame's texts are not needed to save the index.
    del frame, wkb, bounds
    return index, index.dump_parts()


def site_assets(store: SiteStore) -> tuple[pd.DataFrame, pa.Array, np.ndarray]:
    """The site's active assets as a frame of asset fields plus one column per code, their
    geometries as the store keeps them (WKB, binary; null when missing) and each one's box
    (xmin, ymin, xmax, ymax; NaN when missing or empty): what an index keeps, read without
    decoding a geometry (a million parcels' WKB took a second and a half to decode, for
    the boxes the store holds already)."""
    return assets_of(store.assets.columns(names=READ_COLUMNS))


def assets_of(raw: pa.Table) -> tuple[pd.DataFrame, pa.Array, np.ndarray]:
    """:func:`site_assets` of the store's columns :data:`READ_COLUMNS` as read."""
    # Straight from Arrow: a pandas frame of the rows held each WKB as a Python bytes
    # object, made and then read back (0.4 s of CPU at a million assets).
    frame = pd.DataFrame(
        {
            "id": _text(raw["id"]),
            "type": _text(raw["type"]),
            "code": _text(raw["code"]),
            "name": _text(raw["name"]),
            "friendly": _text(raw["friendly"]),
            "regionId": _text(raw["region_id"]),
            "source": _text(raw["source"]),
        }
    )
    if len(raw):
        extra = _extra_columns(raw["extra_info"])
        extra.index = frame.index
        for name in extra.columns:
            column = f"{name} (extra)" if name in ASSET_FIELDS else str(name)
            values = extra[name]
            frame[column] = values.astype("str").where(values.notna(), None)
    wkb = raw["geometry"].combine_chunks().cast(pa.large_binary())
    bounds = np.column_stack(
        [raw[name].to_numpy().astype(np.float64, copy=False) for name in AssetStore.BOUNDS_COLUMNS]
    ).reshape(len(raw), 4)
    # A geometry without a stored box: an empty one (its box is NaN too), or written by
    # something that left the box out; only those are decoded.
    unboxed = np.flatnonzero(
        wkb.is_valid().to_numpy(zero_copy_only=False) & np.isnan(bounds).any(axis=1)
    )
    if len(unboxed):
        chosen = wkb.take(pa.array(unboxed)).to_numpy(zero_copy_only=False)
        bounds[unboxed] = shapely.bounds(shapely.from_wkb(chosen))
    return frame, wkb, bounds


def _text(values: pa.ChunkedArray) -> pd.Series:
    """A column as pandas text (``str``, missing as NaN), converted in Arrow: numbers
    as their decimal digits, as ``astype("str")`` of the numbers writes them."""
    return pd.Series(values.cast(pa.large_string()), dtype=_STR)


_STR = pd.StringDtype("pyarrow", na_value=np.nan)


def _extra_columns(extra_info: pa.ChunkedArray) -> pd.DataFrame:
    """Every asset's extraInfo object as columns, parsed by Arrow's multithreaded reader."""
    # One line per object, joined in Arrow: the text never becomes a million Python strings.
    texts = extra_info.combine_chunks().cast(pa.large_string())
    newline, none = pa.scalar("\n", pa.large_string()), pa.scalar("", pa.large_string())
    lines = pc.binary_join_element_wise(texts, newline, none)
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset :]
    data = lines.buffers()[2][offsets[0] : offsets[len(lines)]]
    try:
        frame: pd.DataFrame = pa_json.read_json(pa.BufferReader(data)).to_pandas()
        return frame
    except pa.ArrowInvalid:
        # A code that is a number in one asset and text in another: the slower, lenient way.
        text = data.to_pybytes().decode("utf-8")
        return pd.read_json(io.StringIO(text), lines=True, dtype=False)
