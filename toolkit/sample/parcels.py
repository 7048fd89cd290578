"""The sample town's parcels: layout, polygons, the zipped Shapefile, points inside them.

:func:`layout` lays out localities of blocks around Ballarat (GDA2020 / MGA zone 55), with
lots along both sides of each street, some subdivided into units, some in two pieces
(multipart) and a few crossed (bow-ties); :func:`write_parcels` writes them reproducibly.
"""

from __future__ import annotations

import math
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.sample.columns import join_text, probabilities, repeated, take_strings, to_text
from toolkit.sample.vocab import (
    LAND_USE_CLASSES,
    LAND_USE_WEIGHTS,
    LOCALITIES,
    NAME_EXPANSIONS,
    STREET_NAMES,
    STREET_TYPE_WEIGHTS,
    STREET_TYPES,
)

PARCEL_CRS: Final = "EPSG:7855"
ITEM_CRS: Final = "EPSG:4326"
PARCEL_FIELDS: Final = (
    "id",
    "type",
    "code",
    "name",
    "propnum",
    "house_no",
    "street",
    "locality",
    "postcode",
    "lu_class",
)

# The town's shape, in metres: blocks of two rows of lots back to back, between road reserves.
_LOTS_PER_ROW = 10
_BLOCK_WIDTH = 200.0
_BLOCK_DEPTH = 80.0
ROAD_WIDTH = 20.0
_DIVIDER_JITTER = 2.0  # how far a lot boundary leans, so lots are irregular quadrilaterals
_NEW_STREET_SHARE = 0.45  # chance that a street changes name at a cross street
# The middle of Ballarat (lon 143.85, lat -37.56) in MGA zone 55.
_CENTRE_E, _CENTRE_N = 221_750.0, 5_838_350.0
_UNIT_LOT_SHARE = 0.06  # lots subdivided into 2-4 units
_RANGE_LOT_SHARE = 0.015  # lots numbered as a range, such as 12-14
_MULTIPART_SHARE = 0.02
_BOWTIE_SHARE = 0.0005
_MULTIPART_FRONT, _MULTIPART_BACK = 0.6, 0.66  # depth fractions of the two pieces' inner edges
_FIXED_DATE = (2026, 1, 1, 0, 0, 0)  # stamped in the zip and the DBF so output is reproducible


@dataclass
class Parcels:
    """The generated parcels as parallel arrays (one element per parcel)."""

    corners: np.ndarray  # (n, 4, 2): front-left, front-right, back-right, back-left
    facing: np.ndarray  # +1 when the road lies north of the front edge, -1 when south
    locality: np.ndarray
    street_name: np.ndarray  # index into STREET_NAMES
    street_type: np.ndarray  # index into STREET_TYPES
    unit: np.ndarray  # unit number, 0 for a whole lot
    house: np.ndarray  # the (first) house number
    lu_class: np.ndarray  # index into LAND_USE_CLASSES
    multipart: np.ndarray  # parcel indices
    bowtie: np.ndarray  # parcel indices
    streets: int
    table: pa.Table  # the DBF attributes, PARCEL_FIELDS
    number_text: pa.Array  # the address number as the name spells it: 12, 12-14, UNIT 1 12


def layout(n: int, rng: np.random.Generator) -> Parcels:
    """Lay out ``n`` parcels: localities of blocks, lots along both sides of each street."""
    n_lots = min(n, max(1, round(n / (1 + _UNIT_LOT_SHARE * 2))))
    units_per_lot = _units_per_lot(n_lots, n - n_lots, rng)
    n_loc = max(1, min(len(LOCALITIES), max(3, n // 500), n_lots))
    quota = np.full(n_loc, n_lots // n_loc)
    quota[: n_lots % n_loc] += 1
    per_loc = int(quota.max())
    blocks = -(-per_loc // (2 * _LOTS_PER_ROW))
    # Roughly square localities: blocks are wider than they are deep.
    bx = max(1, math.ceil(math.sqrt(blocks * (_BLOCK_DEPTH + ROAD_WIDTH) / _BLOCK_WIDTH)))
    by = -(-blocks // bx)

    # One row per (locality, block row, block column, side); side 0 faces the road below.
    loc, brow, bcol, side = (
        a.ravel()
        for a in np.meshgrid(
            np.arange(n_loc), np.arange(by), np.arange(bx), np.arange(2), indexing="ij"
        )
    )
    rows = loc.size
    loc_w = bx * (_BLOCK_WIDTH + ROAD_WIDTH) + ROAD_WIDTH
    loc_h = by * (_BLOCK_DEPTH + ROAD_WIDTH) + ROAD_WIDTH
    nlx = math.ceil(math.sqrt(n_loc))
    nly = -(-n_loc // nlx)
    origin_x = round(_CENTRE_E - nlx * loc_w / 2)
    origin_y = round(_CENTRE_N - nly * loc_h / 2)
    x0 = origin_x + (loc % nlx) * loc_w + ROAD_WIDTH + bcol * (_BLOCK_WIDTH + ROAD_WIDTH)
    y0 = origin_y + (loc // nlx) * loc_h + ROAD_WIDTH + brow * (_BLOCK_DEPTH + ROAD_WIDTH)

    widths = rng.uniform(0.75, 1.25, (rows, _LOTS_PER_ROW))
    edges = np.zeros((rows, _LOTS_PER_ROW + 1))
    edges[:, 1:] = np.cumsum(widths, axis=1) / widths.sum(axis=1, keepdims=True)
    lean = np.zeros((2, rows, _LOTS_PER_ROW + 1))
    lean[:, :, 1:-1] = rng.uniform(-_DIVIDER_JITTER, _DIVIDER_JITTER, (2, rows, _LOTS_PER_ROW - 1))
    x_front = x0[:, None] + edges * _BLOCK_WIDTH + lean[0]
    x_back = x0[:, None] + edges * _BLOCK_WIDTH + lean[1]
    middle = np.repeat(rng.uniform(-4.0, 4.0, rows // 2), 2)  # one back line per block
    y_front = np.where(side == 0, y0, y0 + _BLOCK_DEPTH)
    y_back = y0 + _BLOCK_DEPTH / 2 + middle

    # Lots: (row, position); keep each locality's first `quota` lots (the town's edge is ragged).
    k = np.tile(np.arange(_LOTS_PER_ROW), rows)
    row_of = np.repeat(np.arange(rows), _LOTS_PER_ROW)
    rank_in_loc = row_of % (by * bx * 2) * _LOTS_PER_ROW + k
    keep = rank_in_loc < quota[loc[row_of]]
    row_of, k = row_of[keep], k[keep]
    lot_corners = np.empty((row_of.size, 4, 2))
    lot_corners[:, 0] = np.column_stack([x_front[row_of, k], y_front[row_of]])
    lot_corners[:, 1] = np.column_stack([x_front[row_of, k + 1], y_front[row_of]])
    lot_corners[:, 2] = np.column_stack([x_back[row_of, k + 1], y_back[row_of]])
    lot_corners[:, 3] = np.column_stack([x_back[row_of, k], y_back[row_of]])
    lot_loc, lot_side, lot_col = loc[row_of], side[row_of], bcol[row_of]

    # Streets run along the road lines between block rows, changing name at some cross streets.
    line = brow[row_of] + lot_side
    segment = (lot_loc * (by + 1) + line) * bx + lot_col
    new_street = rng.random(n_loc * (by + 1) * bx) < _NEW_STREET_SHARE
    new_street[::bx] = True
    street_of_segment = np.cumsum(new_street) - 1
    lot_street = street_of_segment[segment]
    n_streets = int(street_of_segment[-1]) + 1
    street_name, street_type = _name_streets(street_of_segment[::bx], by, n_loc, n_streets, rng)

    # House numbers: odd on one side of the street, even on the other, rising along it;
    # a range lot (12-14) takes two numbers.
    is_range = (rng.random(n_lots) < _RANGE_LOT_SHARE) & (units_per_lot == 1)
    step = np.where(is_range, 4, 2)
    order = np.lexsort((k, lot_col, lot_side, lot_street))
    group = lot_street[order] * 2 + lot_side[order]
    starts = np.flatnonzero(np.r_[True, group[1:] != group[:-1]])
    taken = np.cumsum(step[order]) - step[order]
    before = np.repeat(taken[starts], np.diff(np.r_[starts, order.size]))
    house = np.empty(n_lots, np.int64)
    house[order] = taken - before + np.where(lot_side[order] == 0, 1, 2)

    street_lu = rng.choice(len(LAND_USE_CLASSES), n_streets, p=probabilities(LAND_USE_WEIGHTS))
    lot_lu = np.where(
        rng.random(n_lots) < 0.85,
        street_lu[lot_street],
        rng.choice(len(LAND_USE_CLASSES), n_lots, p=probabilities(LAND_USE_WEIGHTS)),
    )
    lot_lu[units_per_lot > 1] = 0  # units are homes

    # Parcels: each lot, or each unit of a subdivided lot (slices from front to back).
    lot = np.repeat(np.arange(n_lots), units_per_lot)
    first = np.repeat(np.cumsum(units_per_lot) - units_per_lot, units_per_lot)
    piece = np.arange(n) - first
    pieces = units_per_lot[lot]
    unit = np.where(pieces > 1, piece + 1, 0)
    # Lot corners are whole centimetres; unit and multipart pieces are cut from them unrounded,
    # so a cut's end lies on the neighbour's boundary instead of a rounding step off it.
    corners = _slice(np.round(lot_corners, 2)[lot], piece / pieces, (piece + 1) / pieces)

    chosen = rng.permutation(n)
    n_multi = round(n * _MULTIPART_SHARE)
    n_bow = min(max(3, round(n * _BOWTIE_SHARE)), n // 20)
    multipart = np.sort(chosen[:n_multi])
    bowtie = np.sort(chosen[n_multi : n_multi + n_bow])

    # Each parcel takes its lot's locality, street, house number and land use.
    parcel_locality, parcel_house, parcel_lu = lot_loc[lot], house[lot], lot_lu[lot]
    parcel_name, parcel_type = street_name[lot_street[lot]], street_type[lot_street[lot]]
    table, number_text = _parcel_table(
        n=n,
        locality=parcel_locality,
        street_name=parcel_name,
        street_type=parcel_type,
        unit=unit,
        house=parcel_house,
        is_range=is_range[lot],
        lu_class=parcel_lu,
        rng=rng,
    )
    return Parcels(
        corners=corners,
        facing=np.where(lot_side[lot] == 0, -1, 1),
        locality=parcel_locality,
        street_name=parcel_name,
        street_type=parcel_type,
        unit=unit,
        house=parcel_house,
        lu_class=parcel_lu,
        multipart=multipart,
        bowtie=bowtie,
        streets=int(np.unique(lot_street).size),
        table=table,
        number_text=number_text,
    )


def _units_per_lot(n_lots: int, extra: int, rng: np.random.Generator) -> np.ndarray:
    """How many parcels each lot becomes, adding up to ``n_lots + extra`` exactly."""
    units = np.ones(n_lots, np.int64)
    if extra <= 0:
        return units
    candidates = rng.permutation(n_lots)[:extra]
    added = rng.integers(1, 4, candidates.size)  # 2 to 4 units
    total = np.cumsum(added)
    last = int(np.searchsorted(total, extra))
    added = added[: last + 1]
    added[last] -= total[last] - extra
    units[candidates[: last + 1]] += added
    return units


def _name_streets(
    first_street_of_line: np.ndarray,
    by: int,
    n_loc: int,
    n_streets: int,
    rng: np.random.Generator,
) -> tuple[np.ndarray, np.ndarray]:
    """A (name, type) for each street, distinct within its locality, common names recurring."""
    # Street ids are numbered locality by locality, so each locality owns one run of ids.
    loc_start = first_street_of_line[:: by + 1]
    loc_end = np.r_[loc_start[1:], n_streets]
    # Zipf-like popularity of names, so common names recur across localities and types.
    name_w = 1.0 / np.arange(1, len(STREET_NAMES) + 1) ** 1.0
    name_w = name_w[rng.permutation(len(STREET_NAMES))]
    pair_w = np.outer(name_w, np.asarray(STREET_TYPE_WEIGHTS, float)).ravel()
    n_types = len(STREET_TYPES)
    smith = STREET_NAMES.index("SMITH") * n_types
    smith_pairs = (
        smith + list(STREET_TYPES).index("STREET"),
        smith + list(STREET_TYPES).index("ROAD"),
    )
    expandable = np.flatnonzero([expanded_name(name) != name for name in STREET_NAMES])
    names = np.empty(n_streets, np.int64)
    types = np.empty(n_streets, np.int64)
    for i in range(n_loc):  # a loop over localities: each draws distinct (name, type) pairs
        count = int(loc_end[i] - loc_start[i])
        # Every locality has a SMITH STREET or a SMITH ROAD (so the same name comes in several
        # types and places) and a street whose name officers write out (MT/MOUNT, ST/SAINT).
        forced = [
            smith_pairs[i % 2],
            int(rng.choice(expandable)) * n_types
            + int(rng.choice(n_types, p=probabilities(STREET_TYPE_WEIGHTS))),
        ][:count]
        weights = pair_w.copy()
        weights[[*smith_pairs, *forced]] = 0.0
        drawn = rng.choice(
            pair_w.size, count - len(forced), replace=False, p=weights / weights.sum()
        )
        pairs = np.r_[forced, drawn].astype(np.int64)
        names[loc_start[i] : loc_end[i]] = pairs // n_types
        types[loc_start[i] : loc_end[i]] = pairs % n_types
    return names, types


def expanded_name(street_name: str) -> str:
    """The street name as written out in full: MT to MOUNT, ST to SAINT."""
    return " ".join(NAME_EXPANSIONS.get(word, word) for word in street_name.split(" "))


def _slice(quads: np.ndarray, t0: np.ndarray, t1: np.ndarray) -> np.ndarray:
    """The part of each quadrilateral between depth fractions ``t0`` and ``t1`` (front = 0)."""
    front_left, front_right, back_right, back_left = (quads[:, i] for i in range(4))
    t0, t1 = t0[:, None], t1[:, None]
    out = np.empty_like(quads)
    out[:, 0] = front_left + t0 * (back_left - front_left)
    out[:, 1] = front_right + t0 * (back_right - front_right)
    out[:, 2] = front_right + t1 * (back_right - front_right)
    out[:, 3] = front_left + t1 * (back_left - front_left)
    return out


def _parcel_table(
    *,
    n: int,
    locality: np.ndarray,
    street_name: np.ndarray,
    street_type: np.ndarray,
    unit: np.ndarray,
    house: np.ndarray,
    is_range: np.ndarray,
    lu_class: np.ndarray,
    rng: np.random.Generator,
) -> tuple[pa.Table, pa.Array]:
    """The DBF attributes in state style, and the number part of each address."""
    house_text = to_text(house)
    is_unit = pa.array(unit > 0)
    unit_text = to_text(unit)
    number_text = pc.if_else(
        is_unit,
        join_text("UNIT", unit_text, house_text),
        pc.if_else(
            pa.array(is_range), join_text(house_text, to_text(house + 2), sep="-"), house_text
        ),
    )
    house_no = pc.if_else(is_unit, join_text(unit_text, house_text, sep="/"), number_text)
    street = join_text(
        take_strings(STREET_NAMES, street_name), take_strings(tuple(STREET_TYPES), street_type)
    )
    locality_text = take_strings([name for name, _ in LOCALITIES], locality)
    postcode = take_strings([code for _, code in LOCALITIES], locality)
    # PFI-style codes rise through the town with gaps, as state parcel ids do.
    code = to_text(200_000_000 + np.cumsum(rng.integers(1, 150, n)))
    width = 6 if n <= 900_000 else 7  # six digits until they run short, then seven
    propnum = pc.utf8_lpad(to_text(rng.choice(10**width - 1, n, replace=False) + 1), width, "0")
    table = pa.table(
        {
            "id": to_text(100_001 + np.arange(n)),
            "type": repeated("Property", n),
            "code": code,
            "name": join_text(number_text, street, locality_text, postcode),
            "propnum": propnum,
            "house_no": house_no,
            "street": street,
            "locality": locality_text,
            "postcode": postcode,
            "lu_class": take_strings(LAND_USE_CLASSES, lu_class),
        }
    )
    return table, number_text


def geometries(parcels: Parcels) -> np.ndarray:
    """Shapely polygons; the chosen multipart parcels in two pieces, the bow-ties crossed."""
    import shapely

    corners = parcels.corners
    geoms = shapely.polygons(corners)
    assert isinstance(geoms, np.ndarray)  # an array of corners gives an array of polygons
    if parcels.bowtie.size:
        geoms[parcels.bowtie] = shapely.polygons(corners[parcels.bowtie][:, [0, 1, 3, 2]])
    if parcels.multipart.size:
        quads = corners[parcels.multipart]
        count = quads.shape[0]
        front = _slice(quads, np.zeros(count), np.full(count, _MULTIPART_FRONT))
        back = _slice(quads, np.full(count, _MULTIPART_BACK), np.ones(count))
        pieces = shapely.polygons(np.stack([front, back], axis=1).reshape(-1, 4, 2))
        assert isinstance(pieces, np.ndarray)
        geoms[parcels.multipart] = shapely.multipolygons(
            pieces, indices=np.repeat(np.arange(count), 2)
        )
    return geoms


def write_parcels(parcels: Parcels, zip_path: Path, shp_dir: Path) -> None:
    """Write the parcels as a Shapefile (UTF-8 .cpg, EPSG:7855 .prj) and zip it reproducibly."""
    import pyogrio
    import shapely

    shp_dir.mkdir()
    # Each text field exactly as wide (in bytes) as its longest value: GDAL would otherwise
    # make every field 80 bytes wide, and shrinking them afterwards (RESIZE) is slow.
    fields = [
        pa.field(name, pa.string(), metadata={"GDAL:OGR:width": str(_byte_width(column))})
        for name, column in zip(parcels.table.column_names, parcels.table.columns, strict=True)
    ]
    table = pa.table(
        [*parcels.table.columns, pa.array(shapely.to_wkb(geometries(parcels)))],
        schema=pa.schema([*fields, pa.field("geometry", pa.binary())]),
    )
    pyogrio.write_arrow(
        table,
        shp_dir / "parcels.shp",
        driver="ESRI Shapefile",
        geometry_name="geometry",
        geometry_type="Polygon",
        crs=PARCEL_CRS,
        encoding="UTF-8",
        # A fixed DBF date keeps the bytes the same from one day to the next.
        layer_options={"DBF_DATE_LAST_UPDATE": "2026-01-01"},
    )
    with zipfile.ZipFile(zip_path, "w") as archive:
        for suffix in ("shp", "shx", "dbf", "prj", "cpg"):
            member = shp_dir / f"parcels.{suffix}"
            info = zipfile.ZipInfo(member.name, date_time=_FIXED_DATE)
            info.compress_type = zipfile.ZIP_DEFLATED
            # Level 1 is several times faster than the default 6 on a million parcels and
            # only ~15% larger; ZipFile.open() reads the level from this attribute.
            info._compresslevel = 1  # type: ignore[attr-defined]  # private (public in 3.13)
            info.external_attr = 0o644 << 16
            with member.open("rb") as source, archive.open(info, "w") as target:
                shutil.copyfileobj(source, target, 1 << 20)


def _byte_width(column: pa.ChunkedArray) -> int:
    longest = pc.max(pc.binary_length(column)).as_py()
    return max(1, longest or 0)


def inner_points(parcels: Parcels, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random point well inside each given parcel (its front piece when multipart), in MGA."""
    quads = parcels.corners[index]
    u = rng.uniform(0.25, 0.75, index.size)[:, None]
    v = rng.uniform(0.25, 0.75, index.size)[:, None]
    v = np.where(np.isin(index, parcels.multipart)[:, None], v * _MULTIPART_FRONT, v)
    front = quads[:, 0] + u * (quads[:, 1] - quads[:, 0])
    back = quads[:, 3] + u * (quads[:, 2] - quads[:, 3])
    points: np.ndarray = front + v * (back - front)
    return points


def to_lonlat(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from pyproj import Transformer

    transformer = Transformer.from_crs(PARCEL_CRS, ITEM_CRS, always_xy=True)
    lon, lat = transformer.transform(points[:, 0], points[:, 1])
    return np.round(np.asarray(lon), 6), np.round(np.asarray(lat), 6)
