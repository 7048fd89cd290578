"""Synthetic council data at any scale: property parcels, damage-assessment items, their truth.

:func:`generate` lays out a town of localities, streets and lots around Ballarat (in
GDA2020 / MGA zone 55), writes the lots as a zipped Shapefile of parcels, and writes register
items that refer to those parcels through the kinds of faulty addresses, property numbers,
coordinates and WKT that real field data has, with the true parcel of every item row beside
them in a truth file. Everything is built on whole arrays (numpy, shapely 2, pyarrow compute);
the only loops are over localities, kinds and output files. Output is byte-identical for a seed.
"""

from __future__ import annotations

import math
import shutil
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.errors import OptionError, ToolkitError
from toolkit.progress import Progress, no_progress
from toolkit.sample.vocab import (
    ABSENT_STREET_NAMES,
    DAMAGE_LEVELS,
    DAMAGE_WEIGHTS,
    HABITABLE_VALUES,
    HABITABLE_WEIGHTS,
    INSPECTORS,
    LAND_USE_CLASSES,
    LAND_USE_WEIGHTS,
    LOCALITIES,
    NAME_EXPANSIONS,
    NON_ASCII_INSPECTORS,
    NOTE_WEIGHTS,
    NOTES,
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
ITEM_COLUMNS: Final = (
    "Reference",
    "Address",
    "Suburb",
    "Property Number",
    "Latitude",
    "Longitude",
    "WKT",
    "Damage Level",
    "Inspection Date",
    "Habitable",
    "Occupants",
    "Inspector",
    "Notes",
)
TRUTH_COLUMNS: Final = ("Reference", "asset_id", "kind")
ASSET_COLUMNS: Final = ("id", "type", "name", "code", "friendly", "wkt", "asset_no")
USER_COLUMNS: Final = (
    "Username",
    "First Name",
    "Last Name",
    "Email",
    "Phone",
    "Position",
    "Organisation",
)

Kind = Literal[
    "exact",
    "abbreviated",
    "expanded",
    "typo",
    "unit",
    "missing_suburb",
    "swapped",
    "case_space",
    "field",
    "propnum_only",
    "coords_only",
    "wkt_only",
    "bad_address",
    "bad_latitude",
    "bad_wkt",
    "bad_date",
    "bad_occupants",
]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
# Share of item rows of each kind; "exact" takes what is left. Every kind gets at least one
# row once there are as many rows as kinds.
KIND_SHARES: Final[dict[Kind, float]] = {
    "abbreviated": 0.15,
    "expanded": 0.02,
    "typo": 0.10,
    "unit": 0.07,
    "missing_suburb": 0.08,
    "swapped": 0.05,
    "case_space": 0.08,
    "field": 0.15,
    "propnum_only": 0.05,
    "coords_only": 0.05,
    "wkt_only": 0.03,
    "bad_address": 0.002,
    "bad_latitude": 0.002,
    "bad_wkt": 0.002,
    "bad_date": 0.002,
    "bad_occupants": 0.002,
}
# Bad rows whose true parcel cannot be recovered from the row: their truth asset_id is empty.
NO_PARCEL_KINDS: Final[frozenset[Kind]] = frozenset({"bad_address", "bad_latitude", "bad_wkt"})

MAX_ASSETS: Final = 5_000_000  # beyond this a locality runs out of distinct street names

# The town's shape, in metres: blocks of two rows of lots back to back, between road reserves.
_LOTS_PER_ROW = 10
_BLOCK_WIDTH = 200.0
_BLOCK_DEPTH = 80.0
_ROAD_WIDTH = 20.0
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


@dataclass(frozen=True)
class GenerateResult:
    """What :func:`generate` wrote."""

    out_dir: Path
    files: dict[str, Path]
    seed: int
    assets: int
    items: int
    localities: int
    streets: int
    unit_parcels: int
    multipart_parcels: int
    invalid_parcels: int
    kinds: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return {
            "outDir": str(self.out_dir),
            "files": {name: str(path) for name, path in self.files.items()},
            "seed": self.seed,
            "assets": self.assets,
            "items": self.items,
            "localities": self.localities,
            "streets": self.streets,
            "unitParcels": self.unit_parcels,
            "multipartParcels": self.multipart_parcels,
            "invalidParcels": self.invalid_parcels,
            "kinds": dict(self.kinds),
        }


@dataclass
class _Parcels:
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


def generate(
    out_dir: Path,
    *,
    assets: int,
    items: int,
    seed: int = 0,
    items_name: str = "items",
    extras: bool = False,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> GenerateResult:
    """Write ``parcels.zip``, ``<items_name>.csv`` and ``<items_name>_truth.csv`` into ``out_dir``.

    With ``extras`` also ``assets.csv`` (other council assets, WKT in EPSG:4326) and
    ``users.csv``. Files are built in a temporary folder beside them and moved into place
    only when all are written, so a failure leaves nothing half-written.
    """
    report = progress or no_progress
    _check_counts(assets, items)
    if not items_name or "/" in items_name or "\\" in items_name or items_name.startswith("."):
        raise OptionError(f"items name {items_name!r} must be a plain file name without a folder")
    names = {
        "parcels": "parcels.zip",
        "items": f"{items_name}.csv",
        "truth": f"{items_name}_truth.csv",
    }
    if extras:
        names |= {"assets": "assets.csv", "users": "users.csv"}
    out_dir = Path(out_dir)
    targets = {key: out_dir / name for key, name in names.items()}
    if not overwrite:
        for path in targets.values():
            if path.exists():
                raise ToolkitError(
                    f"{path} already exists; pass overwrite=True (--overwrite) to replace it"
                )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolkitError(f"cannot create output folder {out_dir}: {exc}") from exc

    rng = np.random.default_rng(seed)
    steps = 5 if extras else 4
    report("generate", 0, steps)
    parcels = _layout(assets, rng)
    report("generate", 1, steps)
    with tempfile.TemporaryDirectory(prefix=".toolkit-sample-", dir=out_dir) as tmp:
        staging = Path(tmp)
        _write_parcels(parcels, staging / names["parcels"], staging / "shp")
        report("generate", 2, steps)
        item_table, truth_table = _items(parcels, items, rng)
        report("generate", 3, steps)
        _write_csv(item_table, staging / names["items"])
        _write_csv(truth_table, staging / names["truth"])
        report("generate", 4, steps)
        if extras:
            _write_csv(_assets_table(parcels, rng), staging / names["assets"])
            _write_csv(_users_table(), staging / names["users"])
            report("generate", 5, steps)
        for key, name in names.items():
            (staging / name).replace(targets[key])

    kinds = pc.value_counts(truth_table["kind"]).to_pylist()
    counts = {entry["values"]: entry["counts"] for entry in kinds}
    return GenerateResult(
        out_dir=out_dir,
        files=targets,
        seed=seed,
        assets=assets,
        items=items,
        localities=int(np.unique(parcels.locality).size),
        streets=parcels.streets,
        unit_parcels=int(np.count_nonzero(parcels.unit)),
        multipart_parcels=int(parcels.multipart.size),
        invalid_parcels=int(parcels.bowtie.size),
        kinds={kind: counts.get(kind, 0) for kind in KINDS},
    )


def _check_counts(assets: int, items: int) -> None:
    if not 1 <= assets <= MAX_ASSETS:
        raise OptionError(f"assets must be between 1 and {MAX_ASSETS:,}, not {assets}")
    if items < 0:
        raise OptionError(f"items must be 0 or more, not {items}")


# ---------------------------------------------------------------------------------------------
# Parcels


def _layout(n: int, rng: np.random.Generator) -> _Parcels:
    """Lay out ``n`` parcels: localities of blocks, lots along both sides of each street."""
    n_lots = min(n, max(1, round(n / (1 + _UNIT_LOT_SHARE * 2))))
    units_per_lot = _units_per_lot(n_lots, n - n_lots, rng)
    n_loc = max(1, min(len(LOCALITIES), max(3, n // 500), n_lots))
    quota = np.full(n_loc, n_lots // n_loc)
    quota[: n_lots % n_loc] += 1
    per_loc = int(quota.max())
    blocks = -(-per_loc // (2 * _LOTS_PER_ROW))
    # Roughly square localities: blocks are wider than they are deep.
    bx = max(1, math.ceil(math.sqrt(blocks * (_BLOCK_DEPTH + _ROAD_WIDTH) / _BLOCK_WIDTH)))
    by = -(-blocks // bx)

    # One row per (locality, block row, block column, side); side 0 faces the road below.
    loc, brow, bcol, side = (
        a.ravel()
        for a in np.meshgrid(
            np.arange(n_loc), np.arange(by), np.arange(bx), np.arange(2), indexing="ij"
        )
    )
    rows = loc.size
    loc_w = bx * (_BLOCK_WIDTH + _ROAD_WIDTH) + _ROAD_WIDTH
    loc_h = by * (_BLOCK_DEPTH + _ROAD_WIDTH) + _ROAD_WIDTH
    nlx = math.ceil(math.sqrt(n_loc))
    nly = -(-n_loc // nlx)
    origin_x = round(_CENTRE_E - nlx * loc_w / 2)
    origin_y = round(_CENTRE_N - nly * loc_h / 2)
    x0 = origin_x + (loc % nlx) * loc_w + _ROAD_WIDTH + bcol * (_BLOCK_WIDTH + _ROAD_WIDTH)
    y0 = origin_y + (loc // nlx) * loc_h + _ROAD_WIDTH + brow * (_BLOCK_DEPTH + _ROAD_WIDTH)

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

    street_lu = rng.choice(len(LAND_USE_CLASSES), n_streets, p=_weights(LAND_USE_WEIGHTS))
    lot_lu = np.where(
        rng.random(n_lots) < 0.85,
        street_lu[lot_street],
        rng.choice(len(LAND_USE_CLASSES), n_lots, p=_weights(LAND_USE_WEIGHTS)),
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

    table, number_text = _parcel_table(
        n=n,
        locality=lot_loc[lot],
        street_name=street_name[lot_street[lot]],
        street_type=street_type[lot_street[lot]],
        unit=unit,
        house=house[lot],
        is_range=is_range[lot],
        lu_class=lot_lu[lot],
        rng=rng,
    )
    return _Parcels(
        corners=corners,
        facing=np.where(lot_side[lot] == 0, -1, 1),
        locality=lot_loc[lot],
        street_name=street_name[lot_street[lot]],
        street_type=street_type[lot_street[lot]],
        unit=unit,
        house=house[lot],
        lu_class=lot_lu[lot],
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
    expandable = np.flatnonzero([_expanded(name) != name for name in STREET_NAMES])
    names = np.empty(n_streets, np.int64)
    types = np.empty(n_streets, np.int64)
    for i in range(n_loc):  # a loop over localities: each draws distinct (name, type) pairs
        count = int(loc_end[i] - loc_start[i])
        # Every locality has a SMITH STREET or a SMITH ROAD (so the same name comes in several
        # types and places) and a street whose name officers write out (MT/MOUNT, ST/SAINT).
        forced = [
            smith_pairs[i % 2],
            int(rng.choice(expandable)) * n_types
            + int(rng.choice(n_types, p=_weights(STREET_TYPE_WEIGHTS))),
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
    house_text = _text(house)
    is_unit = pa.array(unit > 0)
    unit_text = _text(unit)
    number_text = pc.if_else(
        is_unit,
        _join("UNIT", unit_text, house_text),
        pc.if_else(pa.array(is_range), _join(house_text, _text(house + 2), sep="-"), house_text),
    )
    house_no = pc.if_else(is_unit, _join(unit_text, house_text, sep="/"), number_text)
    street = _join(_take(STREET_NAMES, street_name), _take(tuple(STREET_TYPES), street_type))
    locality_text = _take([name for name, _ in LOCALITIES], locality)
    postcode = _take([code for _, code in LOCALITIES], locality)
    # PFI-style codes rise through the town with gaps, as state parcel ids do.
    code = _text(200_000_000 + np.cumsum(rng.integers(1, 150, n)))
    width = 6 if n <= 900_000 else 7  # six digits until they run short, then seven
    propnum = pc.utf8_lpad(_text(rng.choice(10**width - 1, n, replace=False) + 1), width, "0")
    table = pa.table(
        {
            "id": _text(100_001 + np.arange(n)),
            "type": _const("Property", n),
            "code": code,
            "name": _join(number_text, street, locality_text, postcode),
            "propnum": propnum,
            "house_no": house_no,
            "street": street,
            "locality": locality_text,
            "postcode": postcode,
            "lu_class": _take(LAND_USE_CLASSES, lu_class),
        }
    )
    return table, number_text


def _geometries(parcels: _Parcels) -> np.ndarray:
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


def _write_parcels(parcels: _Parcels, zip_path: Path, shp_dir: Path) -> None:
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
        [*parcels.table.columns, pa.array(shapely.to_wkb(_geometries(parcels)))],
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


def _inner_points(parcels: _Parcels, index: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random point well inside each given parcel (its front piece when multipart), in MGA."""
    quads = parcels.corners[index]
    u = rng.uniform(0.25, 0.75, index.size)[:, None]
    v = rng.uniform(0.25, 0.75, index.size)[:, None]
    v = np.where(np.isin(index, parcels.multipart)[:, None], v * _MULTIPART_FRONT, v)
    front = quads[:, 0] + u * (quads[:, 1] - quads[:, 0])
    back = quads[:, 3] + u * (quads[:, 2] - quads[:, 3])
    points: np.ndarray = front + v * (back - front)
    return points


def _to_lonlat(points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    from pyproj import Transformer

    transformer = Transformer.from_crs(PARCEL_CRS, ITEM_CRS, always_xy=True)
    lon, lat = transformer.transform(points[:, 0], points[:, 1])
    return np.round(np.asarray(lon), 6), np.round(np.asarray(lat), 6)


# ---------------------------------------------------------------------------------------------
# Items


def _kind_counts(m: int) -> dict[Kind, int]:
    counts: dict[Kind, int] = {kind: math.floor(share * m) for kind, share in KIND_SHARES.items()}
    if m >= len(KINDS):
        counts = {kind: max(1, count) for kind, count in counts.items()}
    # Tiny sets: every kind once may be more than the shares allow; the largest give way.
    while sum(counts.values()) > m and max(counts.values()) > 1:
        counts[max(counts, key=lambda kind: counts[kind])] -= 1
    counts["exact"] = max(0, m - sum(counts.values()))
    return counts


def _items(parcels: _Parcels, m: int, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """The register items and their truth: the parcel each row refers to and how it was spoilt."""
    n = parcels.corners.shape[0]
    everything = np.arange(n)
    located = np.setdiff1d(everything, parcels.bowtie)  # points inside a bow-tie are ambiguous
    expandable = np.array([_expanded(name) != name for name in STREET_NAMES])
    abbreviable = np.array([STREET_TYPES[t][0] != t for t in STREET_TYPES])
    pools: dict[Kind, np.ndarray] = {
        "unit": np.flatnonzero(parcels.unit > 0),
        "expanded": np.flatnonzero(expandable[parcels.street_name]),
        "abbreviated": np.flatnonzero(abbreviable[parcels.street_type]),
        "coords_only": located,
        "wkt_only": located,
        "bad_latitude": located,
        "bad_wkt": located,
    }

    counts = _kind_counts(m)
    for kind, pool in pools.items():
        if pool.size == 0 and counts[kind]:  # too few parcels to have any of this kind
            counts["exact"] += counts[kind]
            counts[kind] = 0
    kind_of_row = np.repeat(np.arange(len(KINDS)), [counts[kind] for kind in KINDS])
    rng.shuffle(kind_of_row)
    rows_of = {kind: np.flatnonzero(kind_of_row == i) for i, kind in enumerate(KINDS)}
    target = np.empty(m, np.int64)
    for kind, rows in rows_of.items():
        pool = pools.get(kind, everything)
        if rows.size:
            target[rows] = rng.choice(pool, rows.size, replace=rows.size > pool.size)

    columns: dict[str, list[tuple[np.ndarray, pa.Array]]] = {
        "Address": [],
        "Suburb": [],
        "Property Number": [],
        "Latitude": [],
        "Longitude": [],
        "WKT": [],
    }
    for kind, rows in rows_of.items():
        if rows.size:
            for column, values in _spoil(kind, parcels, target[rows], rng).items():
                part_rows, part_values = values
                columns[column].append((rows[part_rows], part_values))

    width = max(6, len(str(m)))
    reference = _join("DA", pc.utf8_lpad(_text(np.arange(1, m + 1)), width, "0"), sep="-")
    damage = rng.choice(len(DAMAGE_LEVELS), m, p=_weights(DAMAGE_WEIGHTS))
    days = np.datetime64("2026-02-01") + rng.integers(0, 45, m).astype("timedelta64[D]")
    iso = pa.array(np.datetime_as_string(days, unit="D"))
    australian = _join(
        pc.utf8_slice_codeunits(iso, 8, 10),
        pc.utf8_slice_codeunits(iso, 5, 7),
        pc.utf8_slice_codeunits(iso, 0, 4),
        sep="/",
    )
    date = pc.if_else(pa.array(rng.random(m) < 0.15), australian, iso)
    occupants = _text(rng.choice(7, m, p=_weights((25, 20, 25, 12, 10, 5, 3))))
    inspector = rng.choice(len(INSPECTORS), m)
    if m >= 2:  # make sure the non-ASCII names are there
        for row, name in zip(rng.choice(m, 2, replace=False), NON_ASCII_INSPECTORS, strict=True):
            inspector[row] = INSPECTORS.index(name)
    bad_date, bad_occupants = rows_of["bad_date"], rows_of["bad_occupants"]
    date = _assemble(
        m, [(bad_date, _take(("31/02/2026", "30/02/2026", "2026-02-30"), bad_date % 3))], date
    )
    occupants = _assemble(
        m, [(bad_occupants, _take(("three", "two", "four"), bad_occupants % 3))], occupants
    )

    items = pa.table(
        {
            "Reference": reference,
            **{column: _assemble(m, parts) for column, parts in columns.items()},
            "Damage Level": _take(DAMAGE_LEVELS, damage),
            "Inspection Date": date,
            "Habitable": _take(
                HABITABLE_VALUES,
                rng.choice(len(HABITABLE_VALUES), m, p=_weights(HABITABLE_WEIGHTS)),
            ),
            "Occupants": occupants,
            "Inspector": _take(INSPECTORS, inspector),
            "Notes": _take(NOTES, rng.choice(len(NOTES), m, p=_weights(NOTE_WEIGHTS))),
        }
    )
    no_parcel = np.isin(kind_of_row, [KINDS.index(kind) for kind in NO_PARCEL_KINDS])
    truth = pa.table(
        {
            "Reference": reference,
            "asset_id": pc.if_else(
                pa.array(no_parcel),
                pa.scalar(None, pa.string()),
                pc.take(parcels.table["id"], target),
            ),
            "kind": _take(KINDS, kind_of_row),
        }
    )
    return items, truth


_Spoilt = dict[str, tuple[np.ndarray, pa.Array]]


def _spoil(kind: Kind, parcels: _Parcels, target: np.ndarray, rng: np.random.Generator) -> _Spoilt:
    """The columns a row of this kind fills, each as (positions within ``target``, values)."""
    count = target.size
    every = np.arange(count)
    number = pc.take(parcels.number_text, target)
    name_idx = parcels.street_name[target]
    type_idx = parcels.street_type[target]
    name = _take(STREET_NAMES, name_idx)
    full_type = _take(tuple(STREET_TYPES), type_idx)
    locality = _take([loc for loc, _ in LOCALITIES], parcels.locality[target])
    suburb = pc.if_else(pa.array(rng.random(count) < 0.3), pc.utf8_title(locality), locality)
    street = _join(name, full_type)
    address = _join(number, street)

    def with_suburb(values: pa.Array) -> _Spoilt:
        return {"Address": (every, values), "Suburb": (every, suburb)}

    if kind in ("exact", "bad_date", "bad_occupants"):
        # A quarter of officers type the whole address, locality and postcode included.
        whole = pc.take(parcels.table["name"], target)
        return with_suburb(pc.if_else(pa.array(rng.random(count) < 0.25), whole, address))
    if kind == "abbreviated":
        return with_suburb(_join(number, name, _abbreviation(type_idx, rng)))
    if kind == "expanded":
        expanded = _take([_expanded(s) for s in STREET_NAMES], name_idx)
        return with_suburb(_join(number, expanded, full_type))
    if kind == "typo":
        return with_suburb(_join(number, _typo(name_idx, rng), full_type))
    if kind == "unit":
        unit = _text(parcels.unit[target])
        house = _text(parcels.house[target])
        form = rng.integers(0, 4, count)
        unit_part = _choose(
            form,
            [
                _join(unit, house, sep="/"),
                _join("UNIT", unit, house),
                _join(_join("U", unit, sep=""), house),
                _join("FLAT", unit, house),
            ],
        )
        street_type = pc.if_else(
            pa.array(rng.random(count) < 0.5), _abbreviation(type_idx, rng), full_type
        )
        return with_suburb(_join(unit_part, name, street_type))
    if kind == "missing_suburb":
        return {"Address": (every, address)}
    if kind == "swapped":
        # Either the number after the street, or address and suburb typed in each other's column.
        in_columns = rng.random(count) < 0.4
        swapped = np.flatnonzero(in_columns)
        kept = np.flatnonzero(~in_columns)
        return {
            "Address": (
                np.r_[kept, swapped],
                pa.concat_arrays([_join(street, number).take(kept), suburb.take(swapped)]),
            ),
            "Suburb": (
                np.r_[kept, swapped],
                pa.concat_arrays([suburb.take(kept), address.take(swapped)]),
            ),
        }
    if kind == "case_space":
        form = rng.integers(0, 5, count)
        messy = _choose(
            form,
            [
                pc.utf8_title(address),
                pc.utf8_lower(address),
                pc.replace_substring(address, " ", "  ", max_replacements=1),
                _join("", address, " ", sep=" "),
                _join(address, ".", sep=""),
            ],
        )
        return with_suburb(messy)
    if kind == "field":
        spoilt, kept = _field_noise(address, rng)
        suburb_noise = rng.random(count)
        typed = _typo_text(pc.utf8_upper(suburb).to_numpy(zero_copy_only=False), rng)
        field_suburb = pc.if_else(pa.array(suburb_noise < 0.15), typed, suburb)
        # A fifth of the rows lose the suburb; never both the suburb and the number.
        has_suburb = (suburb_noise >= 0.35) | ~kept
        rows = np.flatnonzero(has_suburb)
        return {
            "Address": (every, spoilt),
            "Suburb": (rows, field_suburb.take(pa.array(rows))),
        }
    if kind == "propnum_only":
        propnum = pc.take(parcels.table["propnum"], target)
        # Excel drops leading zeros when a column is opened as numbers.
        stripped = pc.utf8_ltrim(propnum, "0")
        return {
            "Property Number": (
                every,
                pc.if_else(pa.array(rng.random(count) < 0.4), stripped, propnum),
            )
        }
    if kind in ("coords_only", "bad_latitude", "wkt_only", "bad_wkt"):
        lon, lat = _to_lonlat(_inner_points(parcels, target, rng))
        if kind == "coords_only":
            return {"Latitude": (every, _text(lat)), "Longitude": (every, _text(lon))}
        if kind == "bad_latitude":  # a slipped decimal point puts it out of range
            return {
                "Latitude": (every, _text(np.round(lat * 10, 5))),
                "Longitude": (every, _text(lon)),
            }
        lon_text, lat_text = _text(lon), _text(lat)
        if kind == "wkt_only":
            return {"WKT": (every, _join("POINT (", _join(lon_text, lat_text), ")", sep=""))}
        broken = _choose(
            every % 3,
            [
                _join(_join("POINT (", lon_text, sep=""), lat_text),  # unclosed
                _join(_join("POINT (", lon_text, ",", sep=""), lat_text, ")", sep=""),
                _join("POINT (", lon_text, ")", sep=""),  # one coordinate
            ],
        )
        return {"WKT": (every, broken)}
    if kind == "bad_address":
        absent = _take(ABSENT_STREET_NAMES, rng.integers(0, len(ABSENT_STREET_NAMES), count))
        real_street_far = _join(_text(9000 + parcels.house[target]), street)
        made_up = _join(number, absent, full_type)
        return with_suburb(pc.if_else(pa.array(every % 2 == 0), made_up, real_street_far))
    raise AssertionError(f"unhandled kind {kind}")


def _abbreviation(type_idx: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """Abbreviated street types: mostly the standard form, sometimes another common one."""
    abbreviations = list(STREET_TYPES.values())
    standard = _take([forms[0] for forms in abbreviations], type_idx)
    other = _take([forms[-1] for forms in abbreviations], type_idx)
    return pc.if_else(pa.array(rng.random(type_idx.size) < 0.8), standard, other)


def _expanded(street_name: str) -> str:
    return " ".join(NAME_EXPANSIONS.get(word, word) for word in street_name.split(" "))


def _typo(name_idx: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """Each name with one letter substituted, dropped or swapped with the next (never the first)."""
    return _typo_text(np.asarray(STREET_NAMES, dtype=object)[name_idx], rng)


# Sounds-alike spellings officers write (one applied per row that gets a phonetic slip).
_PHONETIC = (("PH", "F"), ("CK", "K"), ("EE", "EA"), ("OU", "OW"), ("IE", "Y"), ("C", "K"))
_FIELD_OPS = ("typo", "drop_number", "drop_type", "double", "swap", "join", "split", "phonetic")


def _field_noise(address: pa.Array, rng: np.random.Generator) -> tuple[pa.Array, np.ndarray]:
    """``number name type`` addresses spoilt as field data is: per row one of a typo in any
    word (the street type included), the number or the street type left out, a word
    doubled, two words swapped, two words joined, a word split, or a sounds-alike spelling.
    Returns the spoilt text and whether each row still holds its house number."""
    count = len(address)
    lists = pc.split_pattern(address, " ")
    offsets = lists.offsets.to_numpy().astype(np.int64)
    words = np.asarray(lists.flatten().to_numpy(zero_copy_only=False), dtype=object)
    length = np.diff(offsets)
    op = rng.integers(0, len(_FIELD_OPS), count)
    op[(length < 3) & (op == _FIELD_OPS.index("drop_type"))] = 0
    # Only a house number is left out, not a unit's UNIT keyword.
    first_digits = pc.match_substring_regex(pc.list_element(lists, 0), "^[0-9]").to_numpy(
        zero_copy_only=False
    )
    op[~first_digits & (op == _FIELD_OPS.index("drop_number"))] = 0
    # A word of each row, never its number (the first word): the street name or type.
    which = offsets[:-1] + 1 + (rng.random(count) * (length - 1)).astype(np.int64)
    which = np.minimum(which, offsets[1:] - 1)
    # Words with digits (a unit's house number) are left alone: the row's last word instead.
    digits = pc.match_substring_regex(pa.array(words, pa.string()), "[0-9]").to_numpy(
        zero_copy_only=False
    )
    which = np.where(digits[which], offsets[1:] - 1, which)
    # Joins are of two words of the name (or name and type), never the number.
    join_rows = op == _FIELD_OPS.index("join")
    which[join_rows] = np.minimum(
        np.maximum(which[join_rows], offsets[:-1][join_rows] + 2), offsets[1:][join_rows] - 1
    )
    op[join_rows & (length < 3)] = 0
    repeat = np.ones(len(words), dtype=np.int64)
    kept = np.ones(count, dtype=bool)

    def rows(name: str) -> np.ndarray:
        return np.flatnonzero(op == _FIELD_OPS.index(name))

    at = which[rows("typo")]
    words[at] = np.asarray(_typo_text(words[at], rng).to_pylist(), dtype=object)
    at = offsets[:-1][rows("drop_number")]
    repeat[at] = 0
    kept[rows("drop_number")] = False
    repeat[offsets[1:][rows("drop_type")] - 1] = 0
    repeat[which[rows("double")]] = 2
    swap = rows("swap")
    first, second = which[swap] - 1, which[swap]
    words[first], words[second] = words[second].copy(), words[first].copy()
    join = rows("join")
    left = which[join] - 1
    words[left] = words[left] + words[which[join]]
    repeat[which[join]] = 0
    split = which[rows("split")]
    cut = [max(1, len(w) // 2) for w in words[split]]
    words[split] = [w[:c] + " " + w[c:] for w, c in zip(words[split], cut, strict=True)]
    phonetic = which[rows("phonetic")]
    pattern = rng.integers(0, len(_PHONETIC), phonetic.size)
    spelt = words[phonetic]
    for i, (old, new) in enumerate(_PHONETIC):
        chosen = pattern == i
        spelt[chosen] = [w.replace(old, new, 1) for w in spelt[chosen]]
    words[phonetic] = spelt
    row = np.repeat(np.arange(count), length)
    row, words = np.repeat(row, repeat), np.repeat(words, repeat)
    new_offsets = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=count))])
    joined = pc.binary_join(
        pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), pa.array(words, pa.string())),
        " ",
    )
    return joined, kept


def _typo_text(texts: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """Each text with one letter substituted, dropped or swapped with the next, never the
    first letter (texts of fewer than three letters are left alone)."""
    if not len(texts):
        return pa.array([], pa.string())
    width = max(len(str(t)) for t in texts) + 1
    text = np.asarray(texts, dtype=f"<U{width}")
    short = np.char.str_len(text) < 3
    chars = text.view(np.uint32).reshape(-1, width).copy()
    length = np.char.str_len(text)
    rows = np.arange(chars.shape[0])
    pos = 1 + (rng.random(rows.size) * (length - 2)).astype(np.int64)  # 1 .. length-2
    op = rng.integers(0, 3, rows.size)
    # Swapping two equal letters (the LL in RUSSELL) changes nothing: substitute instead.
    op[(op == 2) & (chars[rows, pos] == chars[rows, pos + 1])] = 0
    letter = chars[rows, pos].astype(np.int64)
    replacement = (letter - 65 + rng.integers(1, 26, rows.size)) % 26 + 65
    sub = op == 0
    chars[rows[sub], pos[sub]] = replacement[sub]
    swap = op == 2
    a, b = chars[rows[swap], pos[swap]], chars[rows[swap], pos[swap] + 1]
    chars[rows[swap], pos[swap]], chars[rows[swap], pos[swap] + 1] = b, a
    drop = op == 1
    columns = np.arange(width)[None, :]
    shifted = np.minimum(columns + (columns >= pos[drop, None]), width - 1)
    chars[drop] = np.take_along_axis(chars[drop], shifted, axis=1)
    chars[drop, width - 1] = 0
    spoilt = chars.view(f"<U{width}").ravel()
    return pa.array(np.where(short, text, spoilt))


# ---------------------------------------------------------------------------------------------
# Extras for the committed sample: other assets and users


def _assets_table(parcels: _Parcels, rng: np.random.Generator) -> pa.Table:
    """A few dozen other council assets in the same town: points, lines across roads, parks."""
    import pandas as pd
    import shapely

    plain = np.setdiff1d(
        np.flatnonzero(parcels.unit == 0), np.r_[parcels.multipart, parcels.bowtie]
    )
    plain = plain[rng.permutation(plain.size)]  # so each street's first is a random lot
    # Sites on distinct streets, community land first, so names and places do not repeat.
    street_key = (parcels.locality * 1000 + parcels.street_name) * 100 + parcels.street_type
    _, first = np.unique(street_key[plain], return_index=True)
    candidates = plain[first]
    not_community = parcels.lu_class[candidates] != LAND_USE_CLASSES.index("COMMUNITY")
    candidates = candidates[np.lexsort((rng.random(candidates.size), not_community))]
    site = np.sort(candidates[:24])
    crossing = np.sort(candidates[24:32])
    kinds = np.array(["Evacuation Centre"] * 8 + ["Fire Station"] * 6 + ["School"] * 10)[
        : site.size
    ]
    suffix = _take(
        ("COMMUNITY HALL", "FIRE STATION", "PRIMARY SCHOOL"),
        np.searchsorted(["Evacuation Centre", "Fire Station", "School"], kinds),
    )
    # Named after the locality, or after the street when the locality has one already.
    place = pd.DataFrame({"kind": kinds, "locality": parcels.locality[site]})
    locality = pc.if_else(
        pa.array(place.duplicated().to_numpy()),
        _take(STREET_NAMES, parcels.street_name[site]),
        _take([loc for loc, _ in LOCALITIES], parcels.locality[site]),
    )
    centre = parcels.corners[site].mean(axis=1)
    point_geoms = shapely.points(np.round(np.column_stack(_to_lonlat(centre)), 6))

    # Bridges and culverts: short lines across the road in front of a lot.
    front_mid = parcels.corners[crossing][:, :2].mean(axis=1)
    far_side = front_mid + np.column_stack(
        [np.zeros(crossing.size), parcels.facing[crossing] * _ROAD_WIDTH]
    )
    lon0, lat0 = _to_lonlat(front_mid)
    lon1, lat1 = _to_lonlat(far_side)
    line_geoms = shapely.linestrings(
        np.stack([np.column_stack([lon0, lat0]), np.column_stack([lon1, lat1])], axis=1)
    )
    line_kinds = np.array(["Bridge"] * 5 + ["Culvert"] * 3)[: crossing.size]
    street = _flat(pc.take(parcels.table["street"], crossing))
    line_names = pc.if_else(
        pa.array(line_kinds == "Bridge"),
        _join(street, "BRIDGE"),
        _join("CULVERT", street, _join("CH", _text(rng.integers(1, 40, crossing.size) * 10))),
    )

    # Parks and reserves: open land just north of the built-up area.
    top = parcels.corners[:, :, 1].max()
    left = parcels.corners[:, :, 0].min()
    park_names = ("VICTORIA PARK", "PRINCES PARK", "LAKE RESERVE", "MOUNT BUNINYONG RESERVE")
    x = left + 60.0 + np.arange(len(park_names)) * 500.0
    y = np.full(len(park_names), top + 60.0)
    w = rng.uniform(200.0, 400.0, len(park_names))
    h = rng.uniform(150.0, 300.0, len(park_names))
    boxes = np.stack(
        [np.column_stack(c) for c in ((x, y), (x + w, y), (x + w, y + h), (x, y + h))], axis=1
    )
    lon, lat = _to_lonlat(boxes.reshape(-1, 2))
    park_geoms = shapely.polygons(np.column_stack([lon, lat]).reshape(-1, 4, 2))

    count = site.size + crossing.size + len(park_names)
    asset_type = np.r_[
        kinds, line_kinds, ["Reserve" if "RESERVE" in p else "Park" for p in park_names]
    ]
    name = pa.concat_arrays(
        [
            _join(locality, suffix),
            line_names,
            pa.array(park_names),
        ]
    )
    friendly = pa.concat_arrays(
        [
            _join(_join(locality, suffix), _flat(pc.take(parcels.table["name"], site)), sep=", "),
            _join(
                line_names,
                _take([loc for loc, _ in LOCALITIES], parcels.locality[crossing]),
                sep=", ",
            ),
            pa.array(park_names),
        ]
    )
    prefix = {"Evacuation Centre": "EC", "Fire Station": "FS", "School": "SCH", "Bridge": "BR"}
    code_prefix = np.array([prefix.get(t, "CV" if t == "Culvert" else "PK") for t in asset_type])
    geoms = np.concatenate([point_geoms, line_geoms, park_geoms])
    return pa.table(
        {
            "id": _text(900_001 + np.arange(count)),
            "type": pa.array(asset_type),
            "name": name,
            "code": _join(
                pa.array(code_prefix), pc.utf8_lpad(_text(np.arange(1, count + 1)), 3, "0"), sep="-"
            ),
            "friendly": friendly,
            "wkt": pa.array(shapely.to_wkt(geoms, rounding_precision=6)),
            "asset_no": _join(
                "A", _text(rng.choice(90_000, count, replace=False) + 10_000), sep=""
            ),
        }
    )


_USERS: Final[tuple[tuple[str, ...], ...]] = (
    (
        "apiuser",
        "Integration",
        "Service",
        "api@ballarat.vic.gov.au",
        "03 5320 5500",
        "API User",
        "City of Ballarat",
    ),
    (
        "smitchell",
        "Sarah",
        "Mitchell",
        "sarah.mitchell@ballarat.vic.gov.au",
        "0412 345 678",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "dchen",
        "David",
        "Chen",
        "david.chen@ballarat.vic.gov.au",
        "0423 456 789",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "psharma",
        "Priya",
        "Sharma",
        "priya.sharma@ballarat.vic.gov.au",
        "0434 567 890",
        "Recovery Officer",
        "City of Ballarat",
    ),
    (
        "tobrien",
        "Tom",
        "O'Brien",
        "tom.obrien@ballarat.vic.gov.au",
        "0445 678 901",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "ewilson",
        "Emma",
        "Wilson",
        "emma.wilson@ballarat.vic.gov.au",
        "03 5320 5501",
        "Municipal Recovery Manager",
        "City of Ballarat",
    ),
    (
        "lkelly",
        "Liam",
        "Kelly",
        "liam.kelly@ballarat.vic.gov.au",
        "0456 789 012",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "arahman",
        "Aisha",
        "Rahman",
        "aisha.rahman@ballarat.vic.gov.au",
        "0467 890 123",
        "Recovery Officer",
        "City of Ballarat",
    ),
    (
        "jthompson",
        "Jack",
        "Thompson",
        "jack.thompson@ballarat.vic.gov.au",
        "0478 901 234",
        "Emergency Management Coordinator",
        "City of Ballarat",
    ),
    (
        "mlin",
        "Mei",
        "Lin",
        "mei.lin@ballarat.vic.gov.au",
        "03 5320 5502",
        "GIS Officer",
        "City of Ballarat",
    ),
    (
        "bharris",
        "Ben",
        "Harris",
        "ben.harris@ballarat.vic.gov.au",
        "0489 012 345",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "znguyen",
        "Zoë",
        "Nguyễn",
        "zoe.nguyen@ballarat.vic.gov.au",
        "0490 123 456",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "jalvarez",
        "José",
        "Álvarez",
        "jose.alvarez@ballarat.vic.gov.au",
        "0401 234 567",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "rpatel",
        "Raj",
        "Patel",
        "raj.patel@ballarat.vic.gov.au",
        "03 5320 5503",
        "Customer Service Officer",
        "City of Ballarat",
    ),
    (
        "kobrien",
        "Kate",
        "O'Brien",
        "kate.obrien@ballarat",
        "0413 222 333",
        "Recovery Officer",
        "City of Ballarat",
    ),
    (
        "gwatson",
        "Greg",
        "Watson",
        "greg.watson@cfa.vic.gov.au",
        "0424 333 444",
        "Incident Controller",
        "CFA",
    ),
    (
        "hmurphy",
        "Helen",
        "Murphy",
        "helen.murphy@cfa.vic.gov.au",
        "0435 444 555",
        "Field Inspector",
        "CFA",
    ),
    (
        "ncampbell",
        "Nathan",
        "Campbell",
        "nathan.campbell@ses.vic.gov.au",
        "0446 555 666",
        "Field Inspector",
        "VICSES",
    ),
    (
        "ojames",
        "Olivia",
        "James",
        "olivia.james@ses.vic.gov.au",
        "0457 666 777",
        "Recovery Officer",
        "VICSES",
    ),
    (
        "sking",
        "Steven",
        "King",
        "steven.king@redcross.org.au",
        "0468 777 888",
        "Relief Centre Coordinator",
        "Australian Red Cross",
    ),
    (
        "cyoung",
        "Chloe",
        "Young",
        "chloe.young@redcross.org.au",
        "0479 888 999",
        "Recovery Officer",
        "Australian Red Cross",
    ),
    (
        "mevans",
        "Mark",
        "Evans",
        "mark.evans@ballarat.vic.gov.au",
        "03 5320 5504",
        "Building Surveyor",
        "City of Ballarat",
    ),
    (
        "lnguyen",
        "Linh",
        "Nguyen",
        "linh.nguyen@ballarat.vic.gov.au",
        "0480 999 000",
        "Environmental Health Officer",
        "City of Ballarat",
    ),
    (
        "reporting",
        "Reporting",
        "Service",
        "reports@ballarat.vic.gov.au",
        "03 5320 5505",
        "API User",
        "City of Ballarat",
    ),
)


def _users_table() -> pa.Table:
    """Two dozen users of the service; one has a malformed email address on purpose."""
    return pa.table({name: [user[i] for user in _USERS] for i, name in enumerate(USER_COLUMNS)})


# ---------------------------------------------------------------------------------------------
# Column helpers


def _write_csv(table: pa.Table, path: Path, batch_rows: int = 200_000) -> None:
    """UTF-8 CSV as a spreadsheet writes it: fields quoted only when they hold a quote, comma or
    line break; empty for missing values; one ``\n`` per row."""
    with path.open("wb") as out:
        out.write((",".join(table.column_names) + "\n").encode("utf-8"))
        for start in range(0, table.num_rows, batch_rows):
            batch = table.slice(start, batch_rows)
            fields = [_csv_field(_flat(column)) for column in batch.columns]
            lines = pc.binary_join_element_wise(
                *fields, ",", null_handling="replace", null_replacement=""
            )
            lines = pc.binary_join_element_wise(lines, "", "\n")
            # The rows lie end to end in the array's data buffer: write it in one piece.
            offsets = np.frombuffer(lines.buffers()[1], np.int32, lines.offset + len(lines) + 1)
            begin, end = int(offsets[lines.offset]), int(offsets[-1])
            out.write(memoryview(lines.buffers()[2])[begin:end])


def _csv_field(values: pa.Array) -> pa.Array:
    needs_quotes = pc.match_substring_regex(values, '[",\r\n]')
    quoted = _join('"', pc.replace_substring(values, '"', '""'), '"', sep="")
    return pc.if_else(needs_quotes, quoted, values)


def _take(vocabulary: Any, index: np.ndarray) -> pa.Array:
    """Strings of ``vocabulary`` at ``index``, without making a Python string per row."""
    return pc.take(pa.array(list(vocabulary), pa.string()), pa.array(index))


def _text(values: np.ndarray) -> pa.Array:
    return pc.cast(pa.array(values), pa.string())


def _const(value: str, count: int) -> pa.Array:
    return _take((value,), np.zeros(count, np.int64))


def _join(*parts: Any, sep: str = " ") -> pa.Array:
    """Element-wise join of string arrays (and plain strings, repeated)."""
    return pc.binary_join_element_wise(*parts, sep)


def _choose(which: np.ndarray, options: list[pa.Array]) -> pa.Array:
    """Per element, the value of ``options[which[i]]``."""
    return pc.choose(pa.array(which.astype(np.int8)), *options)


def _assemble(
    m: int,
    parts: list[tuple[np.ndarray, pa.Array]],
    default: pa.Array | pa.ChunkedArray | None = None,
) -> pa.Array:
    """One column of ``m`` values from parts given as (row positions, values); the rest from
    ``default``, or null (written as an empty field). Values may come chunked: pyarrow
    splits an array made from a large numpy string array (the item dates from about 1.7
    million rows), and computing over it keeps the chunks."""
    rows = [r for r, _ in parts]
    values = [_flat(v) for _, v in parts]
    covered = np.zeros(m, bool)
    for r in rows:
        covered[r] = True
    rest = np.flatnonzero(~covered)
    rows.append(rest)
    values.append(
        _flat(default).take(pa.array(rest))
        if default is not None
        else pa.nulls(rest.size, pa.string())
    )
    order = np.concatenate(rows) if rows else np.empty(0, np.int64)
    inverse = np.empty(m, np.int64)
    inverse[order] = np.arange(m)
    return pc.take(pa.concat_arrays(values), pa.array(inverse))


def _flat(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One string array, whether compute handed back an array or a chunked array."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    return values.cast(pa.string())


def _weights(weights: tuple[float, ...]) -> np.ndarray:
    array = np.asarray(weights, float)
    return array / float(array.sum())
