"""The asset index: every key a lookup mode needs, computed once for a whole asset table.

Built with ``AssetIndex.from_frame(gdf)``; saved with ``save(folder)`` and reloaded with
``AssetIndex.load(folder)`` (Parquet tables + geometry as WKB + a JSON header carrying a
format version; only the spatial tree is rebuilt on load, which is cheap).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import shapely

from toolkit.errors import MatchingError
from toolkit.matching.address import address_keys, string_hashes

FORMAT_NAME = "toolkit-asset-index"
FORMAT_VERSION = 1

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


def normalise_codes(values: pd.Series) -> pd.Series:
    """Codes compare as trimmed, upper-case text; missing and blank become ``""``."""
    return values.astype("str").fillna("").str.strip().str.upper()


def code_keys(codes: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(exact key, digits-without-leading-zeros key) per normalised code; 0 = no key."""
    text = codes.to_numpy(dtype=object)
    exact = string_hashes(text)
    exact[codes.to_numpy(dtype=object) == ""] = 0
    digits = codes.str.fullmatch(r"[0-9]+").fillna(False).to_numpy(dtype=bool)
    stripped_text = ("#" + codes.str.lstrip("0").replace("", "0")).to_numpy(dtype=object)
    stripped = np.where(digits, string_hashes(stripped_text), np.uint64(0))
    return exact, stripped.astype(np.uint64)


@dataclass(frozen=True)
class HashTable:
    """Sorted (key, asset position) pairs: bulk lookup of many keys with one searchsorted."""

    keys: np.ndarray  # uint64, sorted
    assets: np.ndarray  # int64, asset position of each key

    @classmethod
    def build(cls, keys: np.ndarray, assets: np.ndarray, allowed: np.ndarray | None) -> HashTable:
        keep = keys != 0
        if allowed is not None:
            keep &= allowed[assets]
        pairs = pd.DataFrame({"k": keys[keep], "a": assets[keep]}).drop_duplicates()
        order = np.lexsort((pairs["a"].to_numpy(), pairs["k"].to_numpy()))
        return cls(pairs["k"].to_numpy()[order], pairs["a"].to_numpy()[order].astype(np.int64))

    def lookup(self, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first slot, number of distinct assets) per query key; key 0 finds nothing."""
        first = np.searchsorted(self.keys, queries, side="left")
        last = np.searchsorted(self.keys, queries, side="right")
        count = np.where(queries == 0, 0, last - first)
        return first, count


@dataclass
class AssetIndex:
    """Assets and their precomputed match keys. Build with ``from_frame``, not directly."""

    assets: pd.DataFrame  # asset fields as text (plus ``active`` as bool), one row per asset
    extra_fields: tuple[str, ...]  # extraInfo code columns, in input order
    extra: pd.DataFrame  # the extraInfo values as text ("" when missing)
    geometry: np.ndarray  # shapely geometries in EPSG:4326, None when missing
    name_keys: pd.DataFrame  # address keys of each asset name (see address.address_keys)
    codes: pd.DataFrame  # long table: field, exact, stripped (uint64), asset (int64)
    _tables: dict[tuple[str, str | None], HashTable] = field(default_factory=dict, repr=False)
    _masks: dict[tuple[str, str | None], np.ndarray] = field(default_factory=dict, repr=False)
    _tree: shapely.STRtree | None = field(default=None, repr=False)
    _tree_assets: np.ndarray | None = field(default=None, repr=False)

    # --- building -----------------------------------------------------------------------

    @classmethod
    def from_frame(cls, frame: pd.DataFrame) -> AssetIndex:
        """Index a (Geo)DataFrame of assets: ``id`` and ``name`` required, others optional.

        A geometry column (EPSG:4326) may be missing or hold missing geometries; any other
        column that is not an asset field is kept as an extraInfo code under its name.
        """
        missing = [name for name in REQUIRED_FIELDS if name not in frame.columns]
        if missing:
            raise MatchingError(
                f"the asset table has no {', '.join(missing)} column; required: "
                f"{', '.join(REQUIRED_FIELDS)}; found: {', '.join(map(str, frame.columns))}"
            )
        geometry_name = _geometry_column(frame)
        if geometry_name is not None:
            crs = getattr(frame, "crs", None)
            if crs is not None and crs.to_epsg() != 4326:
                frame = frame.to_crs(4326)
            geometry = np.asarray(frame[geometry_name].array, dtype=object)
            geometry = np.where(shapely.is_missing(geometry), None, geometry)
        else:
            geometry = np.full(len(frame), None, dtype=object)
        table = pd.DataFrame(frame.drop(columns=[geometry_name] if geometry_name else []))
        table = table.reset_index(drop=True)
        ids = normalise_codes(table["id"])
        if (ids == "").any():
            rows = np.flatnonzero((ids == "").to_numpy())[:5].tolist()
            raise MatchingError(f"assets without an id at rows {rows} (0-based)")
        assets = pd.DataFrame(index=table.index)
        for name in ASSET_FIELDS:
            if name == "active":
                assets[name] = _active_flags(table[name]) if name in table else True
            elif name in table:
                assets[name] = table[name].astype("str").str.strip()
            else:
                assets[name] = pd.Series(pd.NA, index=table.index, dtype="str")
        extra_fields = tuple(str(c) for c in table.columns if c not in ASSET_FIELDS)
        extra = pd.DataFrame(
            {name: normalise_codes(table[name]) for name in extra_fields}, index=table.index
        )
        raw_extra = pd.DataFrame(
            {name: table[name].astype("str").fillna("").str.strip() for name in extra_fields},
            index=table.index,
        )
        index = cls(
            assets=assets,
            extra_fields=extra_fields,
            extra=raw_extra,
            geometry=geometry,
            name_keys=address_keys(assets["name"]),
            codes=_code_table(ids, normalise_codes(assets["code"]), extra),
        )
        index._build_tree()
        return index

    def _build_tree(self) -> None:
        present = np.flatnonzero(self.geometry != None)  # noqa: E711 (elementwise)
        self._tree = shapely.STRtree(self.geometry[present])
        self._tree_assets = present.astype(np.int64)

    def __len__(self) -> int:
        return len(self.assets)

    # --- lookups used by the modes --------------------------------------------------------

    @property
    def tree(self) -> tuple[shapely.STRtree, np.ndarray]:
        """The spatial tree and the asset position of each of its geometries."""
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

    def classes(self) -> list[str]:
        """The distinct asset classes (``type`` values) of the index, sorted."""
        return sorted(self.assets["type"].dropna().unique().tolist())

    def table(self, key: str, asset_class: str | None) -> HashTable:
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
                rows = self.codes
                # "All codes" are the asset's codes (code + extraInfo), not its id.
                if code_field == "*":
                    rows = rows[rows["field"] != "id"]
                else:
                    rows = rows[rows["field"] == code_field]
                column = "exact" if kind == "code" else "stripped"
                keys = rows[column].to_numpy(dtype=np.uint64)
                assets = rows["asset"].to_numpy(dtype=np.int64)
            self._tables[cache_key] = HashTable.build(keys, assets, allowed)
        return self._tables[cache_key]

    def code_fields(self) -> list[str]:
        """Fields mode ``code`` can match on: ``id``, ``code`` and every extraInfo column."""
        return ["id", "code", *self.extra_fields]

    # --- persistence ----------------------------------------------------------------------

    def save(self, folder: str | Path) -> Path:
        """Write the index to ``folder`` (created); returns the folder."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        assets = self.assets.copy()
        for name in self.extra_fields:
            assets[f"extra:{name}"] = self.extra[name]
        assets["geometry_wkb"] = shapely.to_wkb(self.geometry)
        pq.write_table(
            pa.Table.from_pandas(assets, preserve_index=False), folder / "assets.parquet"
        )
        pq.write_table(
            pa.Table.from_pandas(self.name_keys, preserve_index=False), folder / "names.parquet"
        )
        pq.write_table(
            pa.Table.from_pandas(self.codes, preserve_index=False), folder / "codes.parquet"
        )
        header = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "assets": len(self),
            "extra_fields": list(self.extra_fields),
        }
        (folder / "index.json").write_text(json.dumps(header, indent=2), encoding="utf-8")
        return folder

    @classmethod
    def load(cls, folder: str | Path) -> AssetIndex:
        """Read an index written by ``save``; a missing, foreign or corrupt one is a
        ``MatchingError`` naming the folder."""
        folder = Path(folder)
        try:
            header: dict[str, Any] = json.loads((folder / "index.json").read_text("utf-8"))
        except (OSError, ValueError) as exc:
            raise MatchingError(f"{folder} is not an asset index: {exc}") from exc
        if header.get("format") != FORMAT_NAME or header.get("version") != FORMAT_VERSION:
            raise MatchingError(
                f"{folder} holds format {header.get('format')!r} version "
                f"{header.get('version')!r}; expected {FORMAT_NAME!r} version {FORMAT_VERSION}"
            )
        try:
            assets = pq.read_table(folder / "assets.parquet").to_pandas()
            name_keys = pq.read_table(folder / "names.parquet").to_pandas()
            codes = pq.read_table(folder / "codes.parquet").to_pandas()
            extra_fields = tuple(header["extra_fields"])
            geometry = shapely.from_wkb(assets.pop("geometry_wkb").to_numpy(dtype=object))
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
            raise MatchingError(f"the asset index in {folder} is corrupt: {exc}") from exc
        if not (len(assets) == len(name_keys) == header.get("assets")):
            raise MatchingError(f"the asset index in {folder} is corrupt: table sizes differ")
        index = cls(
            assets, extra_fields, extra, np.asarray(geometry, dtype=object), name_keys, codes
        )
        index._build_tree()
        return index


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


def _code_table(ids: pd.Series, code: pd.Series, extra: pd.DataFrame) -> pd.DataFrame:
    """Long table of every code of every asset (id, code, extraInfo), keyed by hashes."""
    parts = []
    positions = np.arange(len(ids), dtype=np.int64)
    for name, values in [("id", ids), ("code", code), *extra.items()]:
        exact, stripped = code_keys(values)
        present = exact != 0
        parts.append(
            pd.DataFrame(
                {
                    "field": name,
                    "exact": exact[present],
                    "stripped": stripped[present],
                    "asset": positions[present],
                }
            )
        )
    return pd.concat(parts, ignore_index=True)
