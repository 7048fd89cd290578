"""The asset index: every key a lookup mode needs, computed once for a whole asset table.

Built with ``AssetIndex.from_frame(gdf)``; saved with ``save(folder)`` and reloaded with
``AssetIndex.load(folder)``, or as one byte string with ``dump`` and ``loads`` (the cache
kept in the site file): tables (Parquet files in a folder, Arrow IPC streams in a dump) +
geometry as WKB and its bounding boxes + a JSON header carrying a format version.
Loading decodes no geometry: the spatial tree is built from the saved boxes when mode
``geo`` first needs it, and only the geometries a lookup tests are decoded (a million
parcels' WKB took 2 s to decode on every load, for imports that test a few percent).
What is cheap to derive is not saved: each code field's normalised codes are made from
the asset columns when mode ``code`` first asks for that field.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property, partial
from pathlib import Path
from typing import IO, Any

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as ipc
import pyarrow.parquet as pq
import shapely

from toolkit.errors import MatchingError
from toolkit.matching.address import TEXT_NAMES, Analysis
from toolkit.matching.asset_side import KEY_TABLE, AssetSide
from toolkit.matching.boxes import BoxGrid
from toolkit.matching.sorted_search import sorted_positions, stable_order
from toolkit.matching.text_hash import text_hashes

log = logging.getLogger(__name__)

FORMAT_NAME = "toolkit-asset-index"
# 2: the fuzzy matcher's asset side is saved with the index (folder ``fuzzy`` of ``save``,
# tables ``fuzzy:*`` of ``dump``). 3: its u counts words one edit apart as near matches.
# 4: no ``codes`` table (each field's codes are derived from the asset columns when a
# lookup first needs them: a tenth of a second per field, against 80 MiB per 200,000
# assets kept in memory and saved). 5: a house number typed against its street's name
# (``14EMU ROAD``) is read apart, so a name holding one has other keys than before.
FORMAT_VERSION = 5
# The tables of a saved index, each a Parquet file (``save``) or part of one string (``dump``).
TABLES = ("assets", "names")
_MAGIC = b"toolkit-asset-index\n"
# How ``dump`` encodes its tables: Arrow IPC streams, zstd-compressed. Parquet (what dumps
# held before, still read: a header without ``encoding``) decoded a million assets' index
# in 4.2 s of CPU; IPC reads it in 2.1 s at about the same size.
DUMP_ENCODING = "arrow-ipc-zstd"
_READERS: dict[str, Callable[[pa.Buffer], pa.Table]] = {
    DUMP_ENCODING: lambda buffer: ipc.open_stream(buffer).read_all(),
    "parquet": lambda buffer: pq.read_table(pa.BufferReader(buffer)),
}

# Columns with a meaning in the spec's asset object (section 2.2). Every other column of the
# input frame is an extraInfo code, matched by mode ``code`` under its column name.
ASSET_FIELDS = (
    "id",
    "type",
    "code",
    "name",
    "friendly",
    "regionId",
    "active",
    "source",
    "friendlyType",
    "infoLabel",
    "infoUrl",
    "regionName",
)
REQUIRED_FIELDS = ("id", "name")
_FALSE_TEXT = frozenset({"0", "FALSE", "F", "NO", "N", "INACTIVE"})
# The columns of each geometry's bounding box in the saved ``assets`` table.
_BOUNDS = ("geometry_xmin", "geometry_ymin", "geometry_xmax", "geometry_ymax")


def normalise_codes(values: pd.Series) -> pa.Array:
    """Codes compare as trimmed, upper-case text; missing and blank become null."""
    text = pc.utf8_upper(pc.utf8_trim_whitespace(_arrow_text(values)))
    return pc.if_else(pc.equal(text, ""), pa.scalar(None, pa.large_string()), text)


def strip_leading_zeros(codes: pa.Array) -> pa.Array:
    """Digit-only codes without their leading zeros (``005123`` -> ``5123``); others null."""
    digits = pc.fill_null(pc.match_substring_regex(codes, r"^[0-9]+$"), False)
    # Only a code that starts with a zero has one to strip: the others (most, often all)
    # are left out of the replacement's pass (a million codes: 0.18 s of CPU).
    zeros = pc.and_(digits, pc.fill_null(pc.starts_with(codes, "0"), False))
    if not pc.any(zeros).as_py() and pc.all(digits).as_py():
        return codes  # all digits, none to strip: the codes themselves (the caller may tell)
    stripped = codes
    if pc.any(zeros).as_py():
        leading = pc.replace_substring_regex(pc.filter(codes, zeros), r"^0+([0-9])", r"\1")
        stripped = pc.replace_with_mask(codes, zeros, leading)
    return pc.if_else(digits, stripped, pa.scalar(None, pa.large_string()))


def as_text(values: pd.Series) -> pd.Series:
    """A column as ``str``; whole floats (integer codes read beside missing values,
    ``10.0``) are written as integers (``10``)."""
    if pd.api.types.is_float_dtype(values.dtype):
        present = values.dropna()
        if (present == present.round()).all():
            return values.astype("Int64").astype("str")
    return values.astype("str")


def names_of(values: pd.Series) -> pd.Series:
    """Asset names as an index keeps and analyses them: text, trimmed."""
    return as_text(values).str.strip()


def _arrow_text(values: pd.Series) -> pa.Array:
    array = pa.array(as_text(values).array, from_pandas=True)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return array.cast(pa.large_string())


def _grouped_by_hash(
    texts: pa.Array,
) -> tuple[np.ndarray, pa.Array, np.ndarray] | None:
    """Texts grouped by their hash (``text_hashes``): the code of each text among the
    distinct ones, the distinct texts in the order of their hashes, and those hashes
    (sorted, distinct); None when two different texts share a hash. Hashing each text once
    and sorting the hashes makes both the groups and the lookup's sorted hashes, where
    Arrow's dictionary encoding was followed by hashing the distinct texts again (a table
    of a million codes, built and ready for lookups, in alternating processes: 0.52-0.84
    s before, 0.45-0.69 s after)."""
    hashes = text_hashes(texts)
    order, ordered = stable_order(hashes)
    first = np.empty(len(ordered), dtype=bool)
    first[:1] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    run = np.cumsum(first) - 1
    leaders = order[first]
    # Every text is the text that leads its run of equal hashes, or two texts collide:
    # only the texts that follow a leader (a key repeated, mostly) need comparing.
    followers = np.flatnonzero(~first)
    if len(followers):
        same = pc.equal(
            texts.take(pa.array(order[followers])), texts.take(pa.array(leaders[run[followers]]))
        )
        if not pc.all(same).as_py():
            return None
    codes = np.empty(len(texts), dtype=np.int64)
    codes[order] = run
    return codes, texts.take(pa.array(leaders)), ordered[first]


@dataclass(frozen=True)
class KeyTable:
    """Assets grouped by key (uint64 name keys or code strings), for bulk exact lookups.

    Name keys are held sorted and found by binary search: a pandas index's hash table of a
    million keys held ~40 MiB beside them, for each of a rule's up to nine name tables (and
    took 0.17 s to build at the first part); a lookup of a part's keys takes milliseconds
    either way."""

    distinct: np.ndarray | pa.Array  # distinct keys: sorted uint64, or arrow strings
    start: np.ndarray  # first slot in ``assets`` of each distinct key
    count: np.ndarray  # number of distinct assets with that key
    assets: np.ndarray  # int64 asset positions, grouped by key

    @classmethod
    def build(
        cls, keys: np.ndarray | pa.Array, assets: np.ndarray, allowed: np.ndarray
    ) -> KeyTable:
        """Index ``keys[i] -> assets[i]``; 0 and null keys and disallowed assets left out."""
        by_hash = None
        if isinstance(keys, np.ndarray):
            keep = (keys != 0) & allowed[assets]
            kept = keys[keep].astype(np.uint64)
            # Sorted by key: a key's code is its place among the distinct keys.
            order, ordered = stable_order(kept)
            first = np.concatenate([[True], ordered[1:] != ordered[:-1]])[: len(ordered)]
            distinct: np.ndarray | pa.Array = ordered[first]
            codes = np.cumsum(first) - 1
            kept_assets = assets[keep][order]
            del kept, order, ordered, first
        else:
            keep = keys.is_valid().to_numpy(zero_copy_only=False) & allowed[assets]
            texts = keys.filter(pa.array(keep))
            by_hash = _grouped_by_hash(texts)
            if by_hash is None:
                encoded = pc.dictionary_encode(texts)
                codes = encoded.indices.to_numpy(zero_copy_only=False).astype(np.int64)
                distinct = encoded.dictionary
            else:
                codes, distinct, hashes = by_hash
            kept_assets = assets[keep]
        n_assets = int(assets.max(initial=0)) + 1
        # One sorted unique over code * n + asset both drops repeated (key, asset) pairs
        # and groups the assets by key.
        pairs = codes.astype(np.int64) * n_assets + kept_assets
        # A name key's assets come each once and, in the stable order of the keys, in
        # order: their pairs are sorted and distinct already (nine tables at a million
        # assets: 0.3 s of CPU spared).
        if not bool((pairs[1:] > pairs[:-1]).all()):
            pairs.sort()
            # (np.unique is hash-based in numpy 2 and several times slower than sort + diff.)
            pairs = pairs[np.concatenate([[True], np.diff(pairs) != 0])[: len(pairs)]]
        grouped_codes = pairs // n_assets
        count = np.bincount(grouped_codes, minlength=len(distinct))
        table = cls(distinct, np.cumsum(count) - count, count, pairs % n_assets)
        if by_hash is not None:
            # The distinct texts are in the order of their hashes: the lookup's sorted
            # hashes are made already (what ``_text_hashes`` would make).
            table.__dict__["_text_hashes"] = (hashes, np.arange(len(hashes), dtype=np.int64))
        return table

    def lookup(self, queries: np.ndarray | pa.Array) -> tuple[np.ndarray, np.ndarray]:
        """(first slot, number of distinct assets) per query key; 0/null finds nothing."""
        if isinstance(self.distinct, np.ndarray):
            position = sorted_positions(self.distinct, np.asarray(queries, dtype=np.uint64))
        else:
            given = (
                queries if isinstance(queries, pa.Array | pa.ChunkedArray) else pa.array(queries)
            )
            position = self._text_positions(given)
        hit = position >= 0
        safe = np.where(hit, position, 0)
        if not len(self.start):
            return np.zeros(len(position), dtype=np.int64), np.zeros(len(position), np.int64)
        return self.start[safe], np.where(hit, self.count[safe], 0)

    def warm(self) -> None:
        """Build now what the first lookup would (a text table's sorted hashes)."""
        if isinstance(self.distinct, pa.Array):
            _ = self._text_hashes

    @cached_property
    def _text_hashes(self) -> tuple[np.ndarray, np.ndarray] | None:
        """A 64-bit hash of each distinct text key, sorted, and each one's position among
        the keys; None if two texts share a hash."""
        assert isinstance(self.distinct, pa.Array)
        hashes = text_hashes(self.distinct)
        order, ordered = stable_order(hashes)
        if bool((ordered[1:] == ordered[:-1]).any()):
            return None
        return ordered, order

    def _text_positions(self, queries: pa.Array) -> np.ndarray:
        """Position of each text among ``distinct`` (-1: none, or null), found by its hash
        and checked against the text found. Arrow's ``index_in`` hashed every distinct key
        again on each call: 0.3 s of CPU at a million codes, per lookup."""
        hashes, distinct = self._text_hashes, self.distinct
        assert isinstance(distinct, pa.Array)
        if hashes is None or isinstance(queries, pa.ChunkedArray):
            found = pc.index_in(queries, value_set=distinct)
            position: np.ndarray = pc.fill_null(found, -1).to_numpy(zero_copy_only=False)
            return position
        ordered, order = hashes
        valid = queries.is_valid().to_numpy(zero_copy_only=False)
        at = sorted_positions(ordered, text_hashes(queries))
        position = order[at] if len(order) else at  # -1 where absent, stays -1 below
        position[at < 0] = -1
        position[~valid] = -1
        hit = np.flatnonzero(position >= 0)
        if len(hit):
            same = pc.equal(
                queries.take(pa.array(hit)).cast(pa.large_string()),
                distinct.take(pa.array(position[hit])).cast(pa.large_string()),
            ).to_numpy(zero_copy_only=False)
            position[hit[~same]] = -1
        return position


@dataclass
class AssetIndex:
    """Assets and their precomputed match keys. Build with ``from_frame``, not directly."""

    assets: pd.DataFrame  # asset fields as text (plus ``active`` as bool), one row per asset
    extra_fields: tuple[str, ...]  # extraInfo code columns, in input order
    extra: pd.DataFrame  # the extraInfo values as text ("" when missing)
    # Shapely geometries in EPSG:4326 (None when missing); after a load, None until first
    # used (``geometry``), decoded from ``_wkb``.
    _geometry: np.ndarray | None
    name_keys: pd.DataFrame  # address keys of each asset name (see address.address_keys)
    _tables: dict[tuple[str, str | None], KeyTable] = field(default_factory=dict, repr=False)
    # Derived arrays (class masks, columns as numpy), computed on first use.
    _masks: dict[tuple[str, str | None], np.ndarray] = field(default_factory=dict, repr=False)
    _tree: shapely.STRtree | None = field(default=None, repr=False)
    # Other derived structures (the fuzzy matcher's parsed names), built on first use.
    _derived: dict[str, Any] = field(default_factory=dict, repr=False)
    _tree_assets: np.ndarray | None = field(default=None, repr=False)
    # As loaded: each asset's geometry as WKB (an Arrow binary array, null when missing:
    # no Python object per asset) and bounding box (xmin, ymin, xmax, ymax; NaN when
    # missing or empty), or None (saved without boxes).
    _wkb: pa.Array | None = field(default=None, repr=False)
    _bounds: np.ndarray | None = field(default=None, repr=False)
    # The folder the index was loaded from (its saved fuzzy side is read from there).
    _folder: Path | None = field(default=None, repr=False)

    # --- building -----------------------------------------------------------------------

    @classmethod
    def from_frame(
        cls,
        frame: pd.DataFrame,
        *,
        wkb: pa.Array | None = None,
        bounds: np.ndarray | None = None,
        analysis: Analysis | None = None,
    ) -> AssetIndex:
        """Index a (Geo)DataFrame of assets: ``id`` and ``name`` required, others optional.

        A geometry column (EPSG:4326) may be missing or hold missing geometries; any other
        column that is not an asset field is kept as an extraInfo code under its name.
        ``wkb``: the same geometries as WKB (binary, null when missing), when the caller
        has them (the site's store): kept as they are, and the decoded geometries are let
        go once their boxes are taken, as in a loaded index. ``bounds`` with ``wkb`` and no
        geometry column: each WKB's box (xmin, ymin, xmax, ymax; NaN when missing or
        empty), as the store keeps them: no geometry is decoded. ``analysis``: the
        ``Analysis`` of the names (as :func:`names_of` gives them), when the caller has it.
        """
        if bounds is not None and (wkb is None or _geometry_column(frame) is not None):
            raise MatchingError("boxes are given with WKB geometries, not a geometry column")
        missing = [name for name in REQUIRED_FIELDS if name not in frame.columns]
        if missing:
            raise MatchingError(
                f"the asset table has no {', '.join(missing)} column; required: "
                f"{', '.join(REQUIRED_FIELDS)}; found: {', '.join(map(str, frame.columns))}"
            )
        geometry_name = _geometry_column(frame)
        if geometry_name is not None:
            crs = getattr(frame, "crs", None)
            if isinstance(frame, gpd.GeoDataFrame) and crs is not None and crs.to_epsg() != 4326:
                frame = frame.to_crs(4326)
                wkb = None  # of the geometries before their reprojection
            geometry = np.array(frame[geometry_name].array, dtype=object)
            geometry[shapely.is_missing(geometry)] = None
        else:
            geometry = np.full(len(frame), None, dtype=object)
        table = pd.DataFrame(frame.drop(columns=[geometry_name] if geometry_name else []))
        table = table.reset_index(drop=True)
        ids = normalise_codes(table["id"])
        if ids.null_count:
            rows = np.flatnonzero(ids.is_null().to_numpy(zero_copy_only=False))[:5].tolist()
            raise MatchingError(f"assets without an id at rows {rows} (0-based)")
        assets = pd.DataFrame(index=table.index)
        for name in ASSET_FIELDS:
            if name == "active":
                assets[name] = _active_flags(table[name]) if name in table else True
            elif name == "name":
                assets[name] = names_of(table[name])
            elif name in table:
                assets[name] = as_text(table[name]).str.strip()
            else:
                assets[name] = pd.Series(pd.NA, index=table.index, dtype="str")
        extra_fields = tuple(str(c) for c in table.columns if c not in ASSET_FIELDS)
        raw_extra = pd.DataFrame(
            {name: as_text(table[name]).fillna("").str.strip() for name in extra_fields},
            index=table.index,
        )
        # The names are analysed once: for their keys now, and for the fuzzy matcher's side
        # when it is first built (it takes the analysis and lets it go).
        if analysis is None:
            analysis = Analysis.of(assets["name"])
        elif len(analysis) != len(assets):
            raise MatchingError(f"an analysis of {len(analysis)} names for {len(assets)} assets")
        name_keys = pd.DataFrame({**analysis.keys(), **analysis.texts()}, index=assets.index)
        index = cls(
            assets=assets,
            extra_fields=extra_fields,
            extra=raw_extra,
            _geometry=geometry,
            name_keys=name_keys,
        )
        index._derived["analysis"] = analysis
        if wkb is not None:
            if len(wkb) != len(frame):
                raise MatchingError(f"{len(wkb)} WKB geometries for {len(frame)} assets")
            if bounds is None:
                bounds = shapely.bounds(geometry)
            elif bounds.shape != (len(frame), 4):
                raise MatchingError(f"{len(bounds)} boxes for {len(frame)} assets")
            index._bounds = np.asarray(bounds, dtype=np.float64)
            index._wkb, index._geometry = _binary(wkb), None
        return index

    @property
    def geometry(self) -> np.ndarray:
        """Every asset's shapely geometry (None when missing), decoded on first use."""
        if self._geometry is None:
            assert self._wkb is not None
            self._geometry = _from_wkb(self._wkb)
        return self._geometry

    def wkb(self) -> pa.Array:
        """Every asset's geometry as WKB (large binary, null when missing): as loaded or
        given (no geometry decoded), else encoded from the geometries now."""
        if self._wkb is not None:
            return self._wkb
        return _binary(pa.array(shapely.to_wkb(self.geometry), type=pa.large_binary()))

    def geometries(self, positions: np.ndarray) -> np.ndarray:
        """The geometries of the assets at ``positions``: only those are decoded, unless
        every geometry is already."""
        if self._geometry is not None or self._wkb is None:
            chosen: np.ndarray = self.geometry[positions]
            return chosen
        return _from_wkb(self._wkb.take(pa.array(np.asarray(positions, dtype=np.int64))))

    @property
    def with_geometry(self) -> np.ndarray:
        """The positions of the assets that have a geometry (perhaps an empty one)."""
        if "with_geometry" not in self._derived:
            if self._geometry is None and self._wkb is not None:
                has = self._wkb.is_valid().to_numpy(zero_copy_only=False)
            else:
                has = self.geometry != None  # noqa: E711 (elementwise)
            self._derived["with_geometry"] = np.flatnonzero(has).astype(np.int64)
        present: np.ndarray = self._derived["with_geometry"]
        return present

    @property
    def bounds(self) -> np.ndarray:
        """Each asset's bounding box (xmin, ymin, xmax, ymax; NaN when it has no geometry
        or an empty one): as saved, or computed once."""
        if self._bounds is None:
            self._bounds = np.asarray(shapely.bounds(self.geometry), dtype=np.float64)
        return self._bounds

    @property
    def box_grid(self) -> BoxGrid:
        """The grid of the assets' boxes that mode geo finds points' candidates through
        (a box's row is the asset's position): built on first use, then kept with the
        index, so every part of an import and every lookup reuses it."""
        grid: BoxGrid = self.derived("box_grid", lambda: BoxGrid.of(self.bounds))
        return grid

    def _build_tree(self) -> None:
        if self._geometry is None and self._bounds is not None:
            # The saved boxes: the tree holds the same envelopes as it would of the decoded
            # geometries, so it answers the same; an empty geometry (NaN box) is left out,
            # as the tree leaves out an empty one.
            present = self.with_geometry
            box = self._bounds[present]
            boxes = np.full(len(present), None, dtype=object)
            real = ~np.isnan(box).any(axis=1)
            boxes[real] = shapely.box(*box[real].T)
            self._tree = shapely.STRtree(boxes)
            self._tree_assets = present.astype(np.int64)
            return
        geometry = self.geometry
        present = np.flatnonzero(geometry != None)  # noqa: E711 (elementwise)
        # Prepared geometries make the bulk ``covers`` of mode geo several times faster.
        shapely.prepare(geometry[present])
        self._tree = shapely.STRtree(geometry[present])
        self._tree_assets = present.astype(np.int64)

    def __len__(self) -> int:
        return len(self.assets)

    def __getstate__(self) -> dict[str, Any]:
        """Pickle the tables only (for workers of a distributed engine); caches and the
        spatial tree are rebuilt on the other side."""
        state = dict(self.__dict__)
        # The folder stays: a worker reads the saved fuzzy side instead of rebuilding it.
        state.update(_tables={}, _masks={}, _derived={}, _tree=None, _tree_assets=None)
        if self._wkb is not None:
            state["_geometry"] = None  # decoded again where needed, from the WKB
        return state

    # --- lookups used by the modes --------------------------------------------------------

    @property
    def tree(self) -> tuple[shapely.STRtree, np.ndarray]:
        """The spatial tree and the asset position of each of its geometries (built on
        first use: many lookups need none)."""
        if self._tree is None:
            self._build_tree()
        assert self._tree is not None and self._tree_assets is not None
        return self._tree, self._tree_assets

    def allowed(self, asset_class: str | None) -> np.ndarray:
        """Mask of assets that may be returned: active, and of ``asset_class`` if given
        (compared trimmed and case-insensitively). Cached per class."""
        cache_key = ("allowed", asset_class)
        if cache_key not in self._masks:
            mask = self.assets["active"].to_numpy(dtype=bool)
            if asset_class is not None:
                types = self.assets["type"].fillna("").str.strip().str.upper()
                mask = mask & (types == asset_class.strip().upper()).to_numpy(dtype=bool)
            self._masks[cache_key] = mask
        return self._masks[cache_key]

    def derived(self, name: str, build: Callable[[], Any]) -> Any:
        """A structure derived from the assets, built by ``build`` on first use, cached."""
        if name not in self._derived:
            self._derived[name] = build()
        return self._derived[name]

    def lookup_structures(self) -> frozenset[tuple[str, object]]:
        """What the modes before fuzzy built in the index on first use and keep: key tables,
        text columns of the names, the grid of boxes (for ``let_go``)."""
        built: set[tuple[str, object]] = {("table", key) for key in self._tables}
        built |= {("mask", key) for key in self._masks if key[0] == "column"}
        built |= {("derived", name) for name in ("box_grid",) if name in self._derived}
        return frozenset(built)

    def let_go(self, structures: Iterable[tuple[str, object]]) -> None:
        """Drop ``structures`` (of ``lookup_structures``): built again if used again."""
        held: dict[str, dict[Any, Any]] = {
            "table": self._tables,
            "mask": self._masks,
            "derived": self._derived,
        }
        for kind, key in structures:
            held[kind].pop(key, None)

    def fuzzy_side(self) -> AssetSide:
        """The fuzzy matcher's asset side: read from the folder the index was loaded from,
        else built (once, then kept with the index)."""

        def build() -> AssetSide:
            if self._folder is not None:
                try:
                    return AssetSide.load(self._folder / "fuzzy", len(self))
                except MatchingError as exc:  # rebuilt: slower, never wrong
                    log.warning("rebuilding the fuzzy matching data: %s", exc)
            analysis = self._derived.pop("analysis", None)
            if analysis is None:
                analysis = Analysis.of(self.assets["name"])
            return AssetSide.of_analysis(analysis)

        side: AssetSide = self.derived("fuzzy", build)
        return side

    def keep_fuzzy_side(self, side: AssetSide) -> None:
        """Keep ``side``, built elsewhere from this index's analysis of its names (see
        ``from_frame``), as the fuzzy side :meth:`fuzzy_side` gives."""
        if len(side.codes) != len(self):
            raise MatchingError(f"a fuzzy side of {len(side.codes)} assets for {len(self)}")
        self._derived.pop("analysis", None)
        self._derived["fuzzy"] = side

    def name_column(self, name: str) -> np.ndarray:
        """One column of ``name_keys`` as a numpy array (object for text), cached."""
        cache_key = ("column", name)
        if cache_key not in self._masks:
            column = self.name_keys[name]
            self._masks[cache_key] = (
                column.to_numpy(dtype=object) if name in TEXT_NAMES else column.to_numpy()
            )
        return self._masks[cache_key]

    def output_column(self, name: str) -> np.ndarray:
        """An asset field or ``extra:<field>`` as an object array, None where empty; cached
        so that building many asset objects does not touch pandas per row."""
        cache_key = ("output", name)
        if cache_key not in self._masks:
            kind, _, extra_name = name.partition(":")
            column = self.extra[extra_name] if kind == "extra" else self.assets[name]
            values = column.to_numpy(dtype=object)
            values[pd.isna(values)] = None
            values[values == ""] = None
            self._masks[cache_key] = values
        return self._masks[cache_key]

    def classes(self) -> list[str]:
        """The distinct asset classes (``type`` values) of the index, sorted."""
        return sorted(self.assets["type"].dropna().unique().tolist())

    def table(self, key: str, asset_class: str | None) -> KeyTable:
        """The hash table of one key column, cached per class.

        Keys: a name-key column (``exact_street``...; suffix ``/bare`` keeps only assets whose
        name has no locality), ``code:<field>`` (``code:*`` = code and every extraInfo code,
        ``code:id`` = the id), ``stripped:<field>`` for digit codes without leading zeros.
        """
        cache_key = (key, asset_class)
        if cache_key not in self._tables:
            allowed = self.allowed(asset_class)
            key, _, restriction = key.partition("/")
            if restriction == "bare":
                # Only assets whose name gives no locality.
                allowed = allowed & ~self.name_keys["has_locality"].to_numpy(dtype=bool)
            if key in self.name_keys.columns:
                keys = self.name_keys[key].to_numpy(dtype=np.uint64)
                assets = np.arange(len(self), dtype=np.int64)
            else:
                kind, _, code_field = key.partition(":")
                # "All codes" are the asset's codes (code + extraInfo), not its id.
                names = self.code_fields()[1:] if code_field == "*" else [code_field]
                parts = [self._field_codes(name) for name in names]
                codes = [c if kind == "code" else strip_leading_zeros(c) for c, _ in parts]
                unchanged = all(s is c for s, (c, _) in zip(codes, parts, strict=True))
                if kind == "stripped" and unchanged:
                    # Every code is digits with no leading zero (property numbers, often):
                    # the codes' own table, not a copy of it (a million: 0.7 s of CPU).
                    self._tables[cache_key] = self.table(f"code:{code_field}", asset_class)
                    return self._tables[cache_key]
                keys = pa.concat_arrays(codes) if codes else pa.array([], pa.large_string())
                assets = np.concatenate([a for _, a in parts] or [np.zeros(0, np.int64)])
            self._tables[cache_key] = KeyTable.build(keys, assets, allowed)
        return self._tables[cache_key]

    def _field_codes(self, code_field: str) -> tuple[pa.Array, np.ndarray]:
        """One field's codes (normalised, nulls left out) and the asset of each: derived
        from the asset columns when first needed, not built for every index nor saved
        (most imports match one or two fields, if any)."""

        def build() -> tuple[pa.Array, np.ndarray]:
            if code_field in ("id", "code"):
                values = normalise_codes(self.assets[code_field])
            elif code_field in self.extra_fields:
                values = normalise_codes(self.extra[code_field])
            else:
                values = pa.nulls(len(self), pa.large_string())
            present = values.is_valid()
            positions = np.flatnonzero(present.to_numpy(zero_copy_only=False))
            return values.filter(present), positions.astype(np.int64)

        found: tuple[pa.Array, np.ndarray] = self.derived(f"codes:{code_field}", build)
        return found

    @property
    def codes(self) -> pd.DataFrame:
        """Every code of every asset as one long table (field, code, stripped, asset),
        fields in the order of ``code_fields``; built on first use, cached."""

        def build() -> pd.DataFrame:
            parts = []
            for name in self.code_fields():
                kept, positions = self._field_codes(name)
                parts.append(
                    pd.DataFrame(
                        {
                            "field": name,
                            "code": pd.Series(kept, dtype="str"),
                            "stripped": pd.Series(strip_leading_zeros(kept), dtype="str"),
                            "asset": positions,
                        }
                    )
                )
            return pd.concat(parts, ignore_index=True)

        table: pd.DataFrame = self.derived("codes", build)
        return table

    def code_fields(self) -> list[str]:
        """Fields mode ``code`` can match on: ``id``, ``code`` and every extraInfo column."""
        return ["id", "code", *self.extra_fields]

    # --- persistence ----------------------------------------------------------------------

    def _header(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "assets": len(self),
            "extra_fields": list(self.extra_fields),
        }

    def _arrow_tables(self) -> dict[str, pa.Table]:
        """The index as Arrow tables, by name (see :data:`TABLES`)."""
        assets = self.assets.copy()
        for name in self.extra_fields:
            assets[f"extra:{name}"] = self.extra[name]
        if self._geometry is None and self._wkb is not None and self._bounds is not None:
            wkb, bounds = self._wkb, self._bounds  # as loaded: nothing to encode
        else:
            wkb = _binary(pa.array(shapely.to_wkb(self.geometry), type=pa.large_binary()))
            bounds = shapely.bounds(self.geometry)
        table = pa.Table.from_pandas(assets, preserve_index=False)
        table = table.append_column("geometry_wkb", wkb)
        for i, name in enumerate(_BOUNDS):
            table = table.append_column(name, pa.array(np.ascontiguousarray(bounds[:, i])))
        # One chunk per column (the store's columns come in a hundred): a load then makes
        # one pandas array of each, not one per chunk (at a million assets 1.3 s -> 0.6 s).
        return {
            "assets": table.combine_chunks(),
            "names": pa.Table.from_pandas(self.name_keys, preserve_index=False).combine_chunks(),
        }

    def save(self, folder: str | Path) -> Path:
        """Write the index to ``folder`` (created); returns the folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        for name, table in self._arrow_tables().items():
            pq.write_table(table, folder / f"{name}.parquet")
        if self._folder is None or self._folder.resolve() != folder.resolve():
            self.fuzzy_side().save(folder / "fuzzy")
        (folder / "index.json").write_text(json.dumps(self._header(), indent=2), encoding="utf-8")
        return folder

    def dump(self, out: IO[bytes]) -> None:
        """Write the index to ``out`` as one byte string (for :meth:`loads`): a line
        naming the format, a line of JSON header with each table's size, then each table
        as an Arrow IPC stream (:data:`DUMP_ENCODING`)."""
        for part in self.dump_parts():
            out.write(part)

    def dump_parts(self) -> list[bytes | memoryview]:
        """The byte string of :meth:`dump` as the buffers it is made of, in order: the
        tables' as Arrow wrote them, so that a caller keeps them (200 MiB at a million
        assets) without a copy into a file first."""
        buffers = self.own_streams()
        side_buffers, side_header = side_streams(self.fuzzy_side())
        return self.dump_of({**buffers, **side_buffers}, side_header)

    def own_streams(self) -> dict[str, pa.Buffer]:
        """The index's own tables (:data:`TABLES`) as :func:`ipc_stream` buffers, by name."""
        return {name: ipc_stream(table) for name, table in self._arrow_tables().items()}

    def dump_of(
        self, buffers: dict[str, pa.Buffer], side_header: dict[str, Any]
    ) -> list[bytes | memoryview]:
        """:meth:`dump_parts` of tables written already: :meth:`own_streams`, then
        :func:`side_streams` of this index's fuzzy side (``side_header`` its header)."""
        header = {
            **self._header(),
            "encoding": DUMP_ENCODING,
            "tables": {name: b.size for name, b in buffers.items()},
            "fuzzy": side_header,
        }
        head = _MAGIC + json.dumps(header).encode("utf-8") + b"\n"
        return [head, *(memoryview(buffer) for buffer in buffers.values())]

    @classmethod
    def loads(
        cls, data: bytes | bytearray, place: str = "the site file", *, consume: bool = False
    ) -> AssetIndex:
        """Read an index written by :meth:`dump`; a foreign or corrupt one is a
        ``MatchingError`` naming ``place``.

        With ``consume``, a bytearray ``data`` is emptied once its tables are decoded, so
        its memory (200 MiB at a million assets) is let go before they become frames.
        """
        if not data.startswith(_MAGIC):
            raise MatchingError(f"{place} holds no asset index")
        start = len(_MAGIC)
        end = data.find(b"\n", start)
        try:
            header: dict[str, Any] = json.loads(data[start:end])
            _check_format(header, place)
            read = _READERS.get(header.get("encoding", "parquet"))
            if read is None:
                raise MatchingError(
                    f"{place} holds an asset index encoded as {header.get('encoding')!r}; "
                    f"this toolkit reads {', '.join(map(repr, _READERS))}"
                )
            buffer = pa.py_buffer(data)
            offset = end + 1
            tables = {}
            later: dict[str, Callable[[], pa.Table]] = {}
            # In the order written: the index's tables, then the fuzzy side's.
            for name, size in header["tables"].items():
                part = buffer.slice(offset, int(size))
                offset += int(size)
                if name.partition(":")[2] in KEY_TABLE and name.startswith("fuzzy:"):
                    # Read when first needed, from a copy (the whole string is let go).
                    later[name.partition(":")[2]] = partial(read, pa.py_buffer(part.to_pybytes()))
                else:
                    tables[name] = read(part)
            part = buffer = None
            if consume and isinstance(data, bytearray):
                _let_go(data)
        except (KeyError, ValueError, TypeError, AttributeError, pa.ArrowException) as exc:
            raise MatchingError(f"the asset index in {place} is corrupt: {exc}") from exc
        index = cls._from_tables(header, tables, place)
        side = {k.partition(":")[2]: t for k, t in tables.items() if k.startswith("fuzzy:")}
        try:
            index._derived["fuzzy"] = AssetSide.from_tables(
                side, header.get("fuzzy") or {}, len(index), place, later
            )
        except MatchingError as exc:  # rebuilt on first use: slower, never wrong
            log.warning("rebuilding the fuzzy matching data: %s", exc)
        # Decoding left freed buffers in Arrow's allocator, which keeps them for reuse:
        # 200 MiB at a million assets, held by every process that loads an index.
        del tables, side
        pa.default_memory_pool().release_unused()
        return index

    @classmethod
    def load(cls, folder: str | Path) -> AssetIndex:
        """Read an index written by ``save``; a missing, foreign or corrupt one is a
        ``MatchingError`` naming the folder."""
        folder = Path(folder)
        try:
            header: dict[str, Any] = json.loads((folder / "index.json").read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise MatchingError(f"{folder} is not an asset index: {exc}") from exc
        _check_format(header, str(folder))
        try:
            tables = {name: pq.read_table(folder / f"{name}.parquet") for name in TABLES}
        except (OSError, pa.ArrowException) as exc:
            raise MatchingError(f"the asset index in {folder} is corrupt: {exc}") from exc
        index = cls._from_tables(header, tables, str(folder))
        index._folder = folder
        return index

    @classmethod
    def _from_tables(
        cls, header: dict[str, Any], tables: dict[str, pa.Table], place: str
    ) -> AssetIndex:
        try:
            table = tables["assets"]
            wkb = _binary(table.column("geometry_wkb"))
            assets = table.drop_columns(["geometry_wkb"]).to_pandas()
            name_keys = tables["names"].to_pandas()
            extra_fields = tuple(header["extra_fields"])
            # Saved by an older toolkit without boxes: the geometries are decoded for them.
            bounds = (
                np.column_stack([assets.pop(b).to_numpy(dtype=np.float64) for b in _BOUNDS])
                if all(b in assets.columns for b in _BOUNDS)
                else None
            )
            extra = pd.DataFrame(
                {name: assets.pop(f"extra:{name}") for name in extra_fields}, index=assets.index
            )
        except (
            OSError,
            KeyError,
            ValueError,
            pa.ArrowException,
            shapely.errors.GEOSException,
        ) as exc:
            raise MatchingError(f"the asset index in {place} is corrupt: {exc}") from exc
        if not (len(assets) == len(name_keys) == header.get("assets")):
            raise MatchingError(f"the asset index in {place} is corrupt: table sizes differ")
        return cls(assets, extra_fields, extra, None, name_keys, _wkb=wkb, _bounds=bounds)

    @property
    def outdated(self) -> bool:
        """Loaded from a save of an older toolkit, without the geometries' boxes: saved
        again, it loads without decoding them."""
        return self._geometry is None and self._bounds is None


def ipc_stream(table: pa.Table) -> pa.Buffer:
    """One table of a dump: an Arrow IPC stream, zstd-compressed (:data:`DUMP_ENCODING`)."""
    sink = pa.BufferOutputStream()
    with ipc.new_stream(sink, table.schema, options=_DUMP_OPTIONS) as writer:
        writer.write_table(table)
    buffer: pa.Buffer = sink.getvalue()
    return buffer


_DUMP_OPTIONS = ipc.IpcWriteOptions(compression="zstd")


def side_streams(side: AssetSide) -> tuple[dict[str, pa.Buffer], dict[str, Any]]:
    """A fuzzy side's tables as the ``fuzzy:*`` tables of a dump, and its header."""
    tables, header = side.tables()
    return {f"fuzzy:{name}": ipc_stream(table) for name, table in tables.items()}, header


def _let_go(data: bytearray) -> None:
    """Empty ``data`` unless a decoded table still reads from it in place (Arrow keeps a
    buffer that zstd does not shrink as it is, and reads it without a copy)."""
    try:
        data.clear()
    except BufferError:
        log.debug("the asset index's bytes are still read in place; kept")


def dump_encoding(data: bytes | bytearray) -> str | None:
    """How the tables of a :meth:`AssetIndex.dump` are encoded (None: not a dump)."""
    if not data.startswith(_MAGIC):
        return None
    try:
        header = json.loads(data[len(_MAGIC) : data.find(b"\n", len(_MAGIC))])
        return str(header.get("encoding", "parquet"))
    except (ValueError, AttributeError):
        return None


def _check_format(header: dict[str, Any], place: str) -> None:
    if header.get("format") != FORMAT_NAME or header.get("version") != FORMAT_VERSION:
        raise MatchingError(
            f"{place} holds format {header.get('format')!r} version "
            f"{header.get('version')!r}; expected {FORMAT_NAME!r} version {FORMAT_VERSION}"
        )


def _geometry_column(frame: pd.DataFrame) -> str | None:
    name = getattr(frame, "_geometry_column_name", None)
    if name is not None and name in frame.columns:
        return str(name)
    return "geometry" if "geometry" in frame.columns else None


def _active_flags(values: pd.Series) -> pd.Series:
    """``active`` as bool: missing counts as active; 0/false/no/inactive as inactive."""
    if pd.api.types.is_bool_dtype(values):
        return values.fillna(True).astype(bool)
    text = values.astype("str").fillna("").str.strip().str.upper()
    return ~text.isin(_FALSE_TEXT)


def _binary(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """WKB as one Arrow array of large binary (the form an index keeps it in: 64-bit
    offsets, as a statewide table's geometries may pass 2 GiB)."""
    if not pa.types.is_large_binary(values.type):
        values = values.cast(pa.large_binary())
    if isinstance(values, pa.ChunkedArray):
        # A saved index's one chunk is taken as it is: combining copies even one (a
        # million parcels' WKB, 0.1-0.3 s of each load).
        values = values.chunk(0) if values.num_chunks == 1 else values.combine_chunks()
    return values


def _from_wkb(wkb: pa.Array) -> np.ndarray:
    """Shapely geometries of WKB values (None where null)."""
    return np.asarray(shapely.from_wkb(wkb.to_numpy(zero_copy_only=False)), dtype=object)
