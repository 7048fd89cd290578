"""A small asset table for the matching tests, built in code (no fixture files).

Parcels ``A1`` and ``A2`` share the edge at longitude 144.001; ``A4`` has no geometry;
``A5`` and ``A6`` have the same name (a tie); ``A7`` has a non-ASCII name; ``A9`` is inactive.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import geopandas as gpd
import pandas as pd
import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import shapely

SHARED_EDGE_LON = 144.001


def asset_frame() -> gpd.GeoDataFrame:
    return gpd.GeoDataFrame(
        {
            "id": ["A1", "A2", "A3", "A4", "A5", "A6", "A7", "A8", "A9", "A10"],
            "type": [
                "Property",
                "Property",
                "Property",
                "Property",
                "Property",
                "Property",
                "Property",
                "Hydrant",
                "Property",
                "Property",
            ],
            "code": ["C1", "C2", "C3", "C4", "C5", "C6", "C7", "H1", "C9", "C10"],
            "name": [
                "12 Smith Street, Richmond VIC 3121",
                "12 SMITH ROAD KEW",
                "1/14 High St, Richmond",
                "14 HIGH STREET RICHMOND",
                "7 TWIN COURT CARLTON",
                "7 TWIN COURT CARLTON",
                "5 Café Lane, Fitzroy",
                "HYDRANT OUTSIDE 12 SMITH STREET",
                "3 OLD ROAD KEW",
                "12 SMITH STREET KEW",
            ],
            "friendly": [
                "12 Smith Street, Richmond",
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
                None,
            ],
            "regionId": ["R1", None, None, None, None, None, None, None, None, None],
            "active": [True, True, True, True, True, True, True, True, False, True],
            "propnum": [
                "005123",
                "5124",
                "77",
                None,
                "5123",
                "99",
                "0042",
                None,
                "31",
                "610",
            ],
            "valnum": ["V-1", None, None, None, None, None, None, None, None, None],
        },
        geometry=[
            shapely.box(144.000, -37.001, SHARED_EDGE_LON, -37.000),
            shapely.box(SHARED_EDGE_LON, -37.001, 144.002, -37.000),
            shapely.box(144.010, -37.011, 144.011, -37.010),
            None,
            shapely.box(144.020, -37.021, 144.021, -37.020),
            shapely.box(144.030, -37.031, 144.031, -37.030),
            shapely.Polygon(
                [(144.04, -37.04), (144.05, -37.04), (144.05, -37.05), (144.04, -37.05)],
                holes=[[(144.044, -37.044), (144.046, -37.044), (144.046, -37.046)]],
            ),
            shapely.Point(144.0005, -37.0005),
            shapely.box(144.060, -37.061, 144.061, -37.060),
            shapely.LineString([(144.07, -37.07), (144.08, -37.08)]),
        ],
        crs=4326,
    )


def queries(*texts: str) -> pd.DataFrame:
    return pd.DataFrame({"query": pd.array(list(texts), dtype="str")})


def rewritten_dump(
    data: bytes, encode: Callable[[str, pa.Table], bytes], drop: tuple[str, ...] = ()
) -> bytes:
    """An ``AssetIndex.dump`` (Arrow IPC tables) with each table written again by
    ``encode(name, table)`` and the header keys ``drop`` left out: an older format."""
    first = data.index(b"\n") + 1
    end = data.index(b"\n", first)
    header = json.loads(data[first:end])
    offset, tables = end + 1, []
    for name, size in header["tables"].items():
        table = ipc.open_stream(data[offset : offset + size]).read_all()
        tables.append(encode(name, table))
        header["tables"][name] = len(tables[-1])
        offset += size
    for key in drop:
        del header[key]
    return data[:first] + json.dumps(header).encode() + b"\n" + b"".join(tables)


def ipc_bytes(table: pa.Table) -> bytes:
    """``table`` as one Arrow IPC stream."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue().to_pybytes())


def parquet_dump(data: bytes) -> bytes:
    """An ``AssetIndex.dump`` written as before Arrow IPC: each table as Parquet, and no
    ``encoding`` in the header."""

    def parquet(_name: str, table: pa.Table) -> bytes:
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        return bytes(sink.getvalue().to_pybytes())

    return rewritten_dump(data, parquet, drop=("encoding",))
