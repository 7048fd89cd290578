"""The fuzzy matcher's asset side: built once per asset index, saved and loaded with it.

Parsing a million asset names, grouping their blocking keys and estimating u from random
pairs takes seconds; a saved index keeps the result as plain arrays (``.npy``, mapped from
disk on load, so what a batch does not touch is never read) and its texts as Parquet.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from toolkit.errors import MatchingError
from toolkit.matching.address import Analysis
from toolkit.matching.blocking import KeyGroups
from toolkit.matching.parsed import ASSET_FIELDS, Parsed, Shapes, subset_words
from toolkit.matching.probabilistic import (
    COMPONENTS,
    estimate_u,
    random_pairs,
    term_frequencies,
)

FORMAT_NAME = "toolkit-fuzzy-side"
FORMAT_VERSION = 1
# The arrays of the full (row, key) table: needed only to group the keys of some assets
# (a class filter), so a side read from one string leaves them encoded until then (a
# million assets' 18 million keys take 220 MiB decoded).
KEY_TABLE = ("key_rows", "keys")


@dataclass(frozen=True)
class AssetSide:
    """What the matcher needs of an asset table: the parsed distinct names, each asset's
    row among them, u from random pairs of them, the term frequencies of their streets
    and localities, and their blocking keys grouped."""

    parsed: Parsed  # ASSET_FIELDS only; its key table may be left out (see key_table)
    codes: np.ndarray  # int64: distinct-name row of each asset
    u: dict[str, np.ndarray]
    street_tf: np.ndarray  # per distinct name: share of names with its street
    locality_tf: np.ndarray
    groups: KeyGroups  # every asset's keys, grouped
    # Reads the (row, key) table when ``parsed`` was made without it; then the table.
    _key_source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # The groups of some names (``groups_for``) by a digest of which.
    _some_groups: dict[bytes, KeyGroups] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def of(cls, names: pd.Series) -> AssetSide:
        return cls.of_analysis(Analysis.of(names))

    @classmethod
    def of_analysis(
        cls, analysis: Analysis, u: Callable[[], dict[str, np.ndarray]] | None = None
    ) -> AssetSide:
        """The side of asset names already analysed (the index's own analysis of them).
        ``u``: gives :func:`u_of_analysis` of them, worked out by another thread meanwhile."""
        # The readings of the words (READING_FIELDS) serve only u's random pairs, which
        # parse them for the rows those pairs name.
        full = Parsed.of_words(analysis.words, analysis.parts, readings=False)
        parsed = full.restricted(ASSET_FIELDS)
        del full
        return cls(
            parsed,
            analysis.codes,
            u_of_analysis(analysis) if u is None else u(),
            term_frequencies(parsed.codes["street"]),
            term_frequencies(parsed.codes["locality"]),
            KeyGroups.of(parsed.key_rows, parsed.keys),
        )

    def groups_for(self, allowed_rows: np.ndarray) -> KeyGroups:
        """The key groups of only the allowed distinct names (a mask). Those of some names
        are made from the whole key table (at a million assets 0.2 s, after 0.8 s to read
        that table), so they are kept for the same names: a class's, asked for by each
        batch of a job's texts and each lookup."""
        if bool(allowed_rows.all()):
            return self.groups
        which = hashlib.blake2b(np.packbits(allowed_rows).tobytes(), digest_size=16).digest()
        if which not in self._some_groups:
            key_rows, keys = self.key_table()
            self._some_groups[which] = KeyGroups.of(key_rows, keys, allowed_rows)
        return self._some_groups[which]

    def key_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Every distinct name's blocking keys (rows, keys; sorted by key), read on first
        use when the side was read without them; a side sent without them (to a pairing
        process) has none to read, which is an error, not an empty table."""
        if self._key_source.get("left_out"):
            raise MatchingError("the fuzzy side was sent without its key table")
        if "load" not in self._key_source:
            return self.parsed.key_rows, self.parsed.keys
        if "table" not in self._key_source:
            self._key_source["table"] = self._key_source["load"]()
        table: tuple[np.ndarray, np.ndarray] = self._key_source["table"]
        return table

    # --- saving and loading ------------------------------------------------------------

    def _arrays(self) -> dict[str, np.ndarray]:
        shapes = self.parsed.shapes
        return {
            **{f"code_{f}": self.parsed.codes[f] for f in ASSET_FIELDS},
            "street_words": self.parsed.street_words,
            "locality_words": self.parsed.locality_words,
            **dict(zip(KEY_TABLE, self.key_table(), strict=True)),
            "codes": self.codes,
            "street_tf": self.street_tf,
            "locality_tf": self.locality_tf,
            "group_keys": self.groups.keys,
            "group_start": self.groups.start,
            "group_rows": self.groups.rows,
            **{f"shape_{f}": getattr(shapes, f) for f in Shapes.__dataclass_fields__},
        }

    def _header(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "rows": len(self.parsed),
            "assets": len(self.codes),
            "u": {c: self.u[c].tolist() for c in COMPONENTS},
        }

    def save(self, folder: Path) -> None:
        """Write the side into ``folder`` (created). Each file is written beside and then
        renamed over the old one, so a process reading the old files keeps them intact."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, values in self._arrays().items():
            _replace(folder / f"{name}.npy", lambda path, v=values: np.save(path, v))
        vocabulary = pa.table({"text": pa.array(self.parsed.vocabulary, type=pa.large_string())})
        _replace(folder / "vocabulary.parquet", lambda path: pq.write_table(vocabulary, path))
        header = self._header()
        _replace(
            folder / "side.json",
            lambda path: path.write_text(json.dumps(header, indent=1), encoding="utf-8"),
        )

    def tables(self) -> tuple[dict[str, pa.Table], dict[str, Any]]:
        """The side as one-column Arrow tables by name, and its header (JSON-ready): for an
        index written as one string (``AssetIndex.dump``)."""
        tables = {name: pa.table({"v": values}) for name, values in self._arrays().items()}
        vocabulary = pa.array(self.parsed.vocabulary, type=pa.large_string())
        tables["vocabulary"] = pa.table({"v": vocabulary})
        return tables, self._header()

    @classmethod
    def from_tables(
        cls,
        tables: dict[str, pa.Table],
        header: dict[str, Any],
        n_assets: int,
        place: str,
        later: dict[str, Callable[[], pa.Table]] | None = None,
    ) -> AssetSide:
        """Read a side from ``tables``; anything missing or inconsistent is a
        ``MatchingError`` naming ``place``. ``later``: readers of tables of
        :data:`KEY_TABLE` left encoded, called when the key table is first needed."""
        later = later or {}
        try:
            arrays = {
                name: tables[name]["v"].to_numpy()
                for name in _ARRAY_NAMES
                if not (name in KEY_TABLE and name in later)
            }
            vocabulary = tables["vocabulary"]["v"]
        except (KeyError, ValueError, pa.ArrowException) as exc:
            raise MatchingError(f"the fuzzy matching data in {place} is unusable: {exc}") from exc
        if not all(name in arrays or name in later for name in KEY_TABLE):
            raise MatchingError(f"the fuzzy matching data in {place} is unusable: no key table")
        source: dict[str, Any] = {}
        if any(name in later for name in KEY_TABLE):
            read = {name: arrays[name] for name in KEY_TABLE if name in arrays}

            def load() -> tuple[np.ndarray, np.ndarray]:
                try:
                    key_rows, keys = (
                        read[name] if name in read else later[name]()["v"].to_numpy()
                        for name in KEY_TABLE
                    )
                except (KeyError, ValueError, pa.ArrowException) as exc:
                    raise MatchingError(
                        f"the fuzzy matching data in {place} is unusable: {exc}"
                    ) from exc
                if len(key_rows) != len(keys):
                    raise MatchingError(f"the fuzzy matching data in {place} is corrupt")
                return key_rows, keys

            source["load"] = load
            empty = (np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.uint64))
            arrays.update(zip(KEY_TABLE, empty, strict=True))
        return cls._assemble(arrays, vocabulary, header, n_assets, place, source)

    @classmethod
    def load(cls, folder: Path, n_assets: int) -> AssetSide:
        """Read a side written by ``save`` for an index of ``n_assets`` assets; anything
        missing, foreign or inconsistent is a ``MatchingError``."""
        try:
            header: dict[str, Any] = json.loads((folder / "side.json").read_text("utf-8"))
            arrays = {
                name: np.asarray(np.load(folder / f"{name}.npy", mmap_mode="r"))
                for name in _ARRAY_NAMES
            }
            vocabulary = pq.read_table(folder / "vocabulary.parquet")["text"]
        except (OSError, ValueError, KeyError, pa.ArrowException) as exc:
            raise MatchingError(f"the fuzzy matching data in {folder} is unusable: {exc}") from exc
        return cls._assemble(arrays, vocabulary, header, n_assets, str(folder))

    @classmethod
    def _assemble(
        cls,
        arrays: dict[str, np.ndarray],
        vocabulary: Any,
        header: dict[str, Any],
        n_assets: int,
        place: str,
        key_source: dict[str, Any] | None = None,
    ) -> AssetSide:
        if header.get("format") != FORMAT_NAME or header.get("version") != FORMAT_VERSION:
            raise MatchingError(
                f"the fuzzy matching data in {place} has format {header.get('format')!r} "
                f"{header.get('version')!r}; expected {FORMAT_NAME!r} {FORMAT_VERSION}"
            )
        try:
            u = {c: np.asarray(header["u"][c], dtype=np.float64) for c in COMPONENTS}
        except (KeyError, TypeError, ValueError) as exc:
            raise MatchingError(f"the fuzzy matching data in {place} is unusable: {exc}") from exc
        if header.get("assets") != n_assets or len(arrays["codes"]) != n_assets:
            raise MatchingError(f"the fuzzy matching data in {place} is for another asset table")
        if len(arrays["street_words"]) != int(header.get("rows", -1)):
            raise MatchingError(f"the fuzzy matching data in {place} is corrupt")
        parsed = Parsed(
            np.asarray(vocabulary.to_numpy(), dtype=object),
            {f: arrays[f"code_{f}"] for f in ASSET_FIELDS},
            arrays["street_words"],
            arrays["locality_words"],
            arrays["key_rows"],
            arrays["keys"],
        )
        # Saved with the side, so no batch recomputes them.
        parsed.__dict__["shapes"] = Shapes(
            *(arrays[f"shape_{f}"] for f in Shapes.__dataclass_fields__)
        )
        groups = KeyGroups(arrays["group_keys"], arrays["group_start"], arrays["group_rows"])
        return cls(
            parsed,
            arrays["codes"],
            u,
            arrays["street_tf"],
            arrays["locality_tf"],
            groups,
            key_source or {},
        )


def u_of_analysis(analysis: Analysis) -> dict[str, np.ndarray]:
    """``estimate_u`` of the distinct names of ``analysis``, parsing only the rows its
    random pairs name (at most 2 * RANDOM_PAIRS of a million), with the readings of their
    words (READING_FIELDS), which serve only these pairs: the same pairs, texts and levels
    as a parse of all."""
    left, right = random_pairs(analysis.words.n_rows)
    named = Analysis(np.concatenate([left, right]), analysis.words, analysis.parts)
    words, parts, row = subset_words(named)
    sample = Parsed.of_words(words, parts, blocking=False)
    return estimate_u(sample, pairs=(row[: len(left)], row[len(left) :]))


_ARRAY_NAMES = (
    *(f"code_{f}" for f in ASSET_FIELDS),
    "street_words", "locality_words", "key_rows", "keys", "codes",
    "street_tf", "locality_tf", "group_keys", "group_start", "group_rows",
    *(f"shape_{f}" for f in Shapes.__dataclass_fields__),
)  # fmt: skip


def _replace(path: Path, write: Any) -> None:
    """Write ``path`` through a temporary file renamed over it."""
    temporary = path.with_name(path.name + ".tmp" + path.suffix)
    write(temporary)
    temporary.replace(path)
