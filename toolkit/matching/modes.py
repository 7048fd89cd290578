"""The lookup modes, each a vectorised function of (index, a batch of queries, options).

Every mode returns a ``ModeResult``: per query the asset position (or -1), the number of
distinct candidate assets at the level that decided, the accuracy and an error text. A
query resolves only when exactly one candidate is left: ties are answered with no asset and
an ``err`` naming the number of tied candidates (never guess).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely
from numpy.dtypes import StringDType

from toolkit.errors import OptionError
from toolkit.matching import accuracy, probabilistic
from toolkit.matching.address import Analysis, Structure, Words
from toolkit.matching.asset_side import AssetSide
from toolkit.matching.index import (
    AssetIndex,
    KeyTable,
    normalise_codes,
    strip_leading_zeros,
)
from toolkit.matching.options import LookupOptions
from toolkit.matching.parsed import Parsed, rows_of_words, subset_words

# From this many point queries on, mode geo indexes the points instead of probing the
# asset tree once per point (and always when they are a tenth of the assets or more).
INVERSE_GEO_MIN = 50_000
NO_FUZZY_CANDIDATE = "no asset shares a number, street or locality with this address (fuzzy)"
_LAT_LON = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*[, ]\s*(-?\d+(?:\.\d+)?)\s*$")


@dataclass
class QueryBatch:
    """Queries as whole columns; their address analysis is done once, on first use."""

    text: pd.Series  # str, positional index 0..n-1
    geometry: np.ndarray | None = None  # shapely objects, None when missing
    _analysis: Analysis | None = field(default=None, repr=False)
    _keys: dict[str, np.ndarray] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return len(self.text)

    def analysis(self) -> Analysis:
        if self._analysis is None:
            self._analysis = Analysis.of(self.text)
        return self._analysis

    def keys(self) -> dict[str, np.ndarray]:
        """Matching keys of each query (``Analysis.keys``)."""
        if self._keys is None:
            self._keys = self.analysis().keys()
        return self._keys

    def texts(self) -> dict[str, np.ndarray]:
        """Canonical text of each query (``Analysis.texts``)."""
        return self.analysis().texts()

    def take(self, positions: np.ndarray) -> QueryBatch:
        """The sub-batch of ``positions`` (sorted, distinct); an analysis already done is
        shared, not redone."""
        if len(positions) == len(self):
            return self  # sorted distinct positions of every row: the batch itself
        return QueryBatch(
            self.text.iloc[positions].reset_index(drop=True),
            None if self.geometry is None else self.geometry[positions],
            None if self._analysis is None else self._analysis.take(positions),
            None if self._keys is None else {k: v[positions] for k, v in self._keys.items()},
        )


@dataclass
class ModeResult:
    """Per query: asset position or -1, candidate count, accuracy (NaN), err (None)."""

    asset: np.ndarray
    count: np.ndarray
    accuracy: np.ndarray
    err: np.ndarray
    # Long frame for review: query (position in the batch), asset, score.
    candidates: pd.DataFrame = field(
        default_factory=lambda: pd.DataFrame({"query": [], "asset": [], "score": []})
    )
    # Mode fuzzy's explanation of each query's best candidate (linked or not): its asset
    # position (-1 when none), match probability, and evidence in bits per component.
    explained: np.ndarray | None = None
    probability: np.ndarray | None = None
    evidence: np.ndarray | None = None

    @classmethod
    def empty(cls, n: int) -> ModeResult:
        return cls(
            np.full(n, -1, dtype=np.int64),
            np.zeros(n, dtype=np.int64),
            np.full(n, np.nan),
            np.full(n, None, dtype=object),
        )

    def take(self, positions: np.ndarray) -> ModeResult:
        """The results of ``positions`` (without candidates): of each row, its distinct
        query's."""

        def taken(values: np.ndarray | None) -> np.ndarray | None:
            return None if values is None else values[positions]

        return ModeResult(
            self.asset[positions],
            self.count[positions],
            self.accuracy[positions],
            self.err[positions],
            explained=taken(self.explained),
            probability=taken(self.probability),
            evidence=taken(self.evidence),
        )

    @classmethod
    def concat(cls, parts: list[ModeResult]) -> ModeResult:
        """Results of consecutive batches as one (without candidates)."""

        def joined(name: str) -> np.ndarray | None:
            values = [getattr(p, name) for p in parts]
            return None if any(v is None for v in values) else np.concatenate(values)

        asset, count, accuracy, err = (joined(n) for n in ("asset", "count", "accuracy", "err"))
        assert asset is not None and count is not None and accuracy is not None
        assert err is not None
        return cls(
            asset,
            count,
            accuracy,
            err,
            explained=joined("explained"),
            probability=joined("probability"),
            evidence=joined("evidence"),
        )


ModeFunction = Callable[[AssetIndex, QueryBatch, LookupOptions, int], ModeResult]


# --- shared helpers ---------------------------------------------------------------------


def _decide(
    result: ModeResult,
    rows: np.ndarray,
    table: KeyTable,
    keys: np.ndarray | pa.Array,
    score: float,
    what: str,
    k: int,
) -> np.ndarray:
    """Look ``keys`` (for batch ``rows``) up in ``table`` and settle rows with candidates.

    Returns the mask of ``rows`` that found at least one candidate (settled, won or tied).
    """
    first, count = table.lookup(keys)
    found = count > 0
    unique = count == 1
    settled = rows[found]
    result.count[settled] = count[found]
    won = rows[unique]
    result.asset[won] = table.assets[first[unique]]
    result.accuracy[won] = score
    result.err[won] = None
    tied = rows[count > 1]
    result.err[tied] = [f"{c} assets tied on {what}; none chosen" for c in count[count > 1]]
    if k:
        take = np.minimum(count[found], k)
        query = np.repeat(settled, take)
        slot = np.repeat(first[found], take) + _ranks(take)
        extra = pd.DataFrame({"query": query, "asset": table.assets[slot], "score": score})
        result.candidates = pd.concat([result.candidates, extra], ignore_index=True)
    return found


def _ranks(counts: np.ndarray) -> np.ndarray:
    """0..c-1 for each count c, concatenated."""
    total = int(counts.sum())
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    ranks: np.ndarray = np.arange(total) - starts
    return ranks


def _no_match(result: ModeResult, message: str) -> None:
    missing = (result.asset < 0) & (result.count == 0)
    result.err[missing & (result.err == None)] = message  # noqa: E711 (elementwise)


def _check_code_field(index: AssetIndex, code_field: str | None) -> str:
    if code_field is None:
        return "*"
    if code_field not in index.code_fields():
        raise OptionError(
            f"option codeField is {code_field!r}; this asset index has the code fields: "
            f"{', '.join(index.code_fields())}"
        )
    return code_field


# --- id and code ------------------------------------------------------------------------


def match_id(index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int) -> ModeResult:
    """The asset whose id equals the query (trimmed, case-insensitive)."""
    result = ModeResult.empty(len(batch))
    exact = normalise_codes(batch.text)
    rows = np.arange(len(batch))
    _decide(result, rows, index.table("code:id", options.asset_class), exact, 100.0, "id", k)
    _no_match(result, "no asset has this id")
    return result


def match_code(index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int) -> ModeResult:
    """The asset with this code in ``codeField`` (or in any code field when none is given).

    Digit-only codes also match without leading zeros (``005123`` = ``5123``), but only
    when the exact code matched nothing; several assets then are a tie, not a guess.
    """
    code_field = _check_code_field(index, options.code_field)
    result = ModeResult.empty(len(batch))
    exact = normalise_codes(batch.text)
    rows = np.arange(len(batch))
    what = "code" if code_field == "*" else f"code field {code_field}"
    table = index.table(f"code:{code_field}", options.asset_class)
    found = _decide(result, rows, table, exact, accuracy.EXACT, what, k)
    stripped = strip_leading_zeros(exact)
    rest = ~found & stripped.is_valid().to_numpy(zero_copy_only=False)
    table = index.table(f"stripped:{code_field}", options.asset_class)
    _decide(
        result,
        rows[rest],
        table,
        stripped.filter(pa.array(rest)),
        accuracy.CODE_WITHOUT_LEADING_ZEROS,
        f"{what} (ignoring leading zeros)",
        k,
    )
    _no_match(result, f"no asset has this {what}")
    return result


# --- names: exact, sounds-like ----------------------------------------------------------

_LEVEL_KEYS = {
    1: ("exact_full", "exact_street"),
    2: ("sound_full", "sound_street"),
    3: ("anyorder_full", "anyorder_street"),
}


def _name_level(
    index: AssetIndex,
    batch: QueryBatch,
    result: ModeResult,
    rows: np.ndarray,
    level: int,
    score: float,
    what: str,
    options: LookupOptions,
    k: int,
) -> np.ndarray:
    """Settle ``rows`` at one name level; returns the mask of ``rows`` that found candidates.

    A query naming a locality is compared with the asset's street and locality (or with
    the street of assets that name none); a query without one is compared with the
    street part only, so ``12 SMITH ST`` in two suburbs is a tie, not a guess.
    """
    keys = batch.keys()
    full_col, street_col = _LEVEL_KEYS[level]
    has_locality = keys["has_locality"][rows]
    found = np.zeros(len(rows), dtype=bool)
    cls = options.asset_class
    with_loc = np.flatnonzero(has_locality)
    full = keys[full_col][rows]
    street = keys[street_col][rows]
    found[with_loc] = _decide(
        result, rows[with_loc], index.table(full_col, cls), full[with_loc], score, what, k
    )
    bare = with_loc[~found[with_loc]]
    found[bare] = _decide(
        result, rows[bare], index.table(f"{street_col}/bare", cls), street[bare], score, what, k
    )
    without = np.flatnonzero(~has_locality)
    found[without] = _decide(
        result, rows[without], index.table(street_col, cls), street[without], score, what, k
    )
    _postcode_veto(index, batch, result, rows[found])
    return found


def _postcode_veto(
    index: AssetIndex, batch: QueryBatch, result: ModeResult, rows: np.ndarray
) -> None:
    """A match whose postcode differs from the query's is not a match (both must have one)."""
    won = rows[result.asset[rows] >= 0]
    query_postcode = batch.keys()["postcode"][won]
    asset_postcode = index.name_column("postcode")[result.asset[won]]
    veto = won[(query_postcode != 0) & (asset_postcode != 0) & (query_postcode != asset_postcode)]
    result.asset[veto] = -1
    result.accuracy[veto] = np.nan
    result.err[veto] = "the only candidate has a different postcode"


def match_soundex(
    index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int
) -> ModeResult:
    """Rank 1 exact words, 2 all words sound alike in order, 3 in any order; up to
    ``maxRank``, the best rank that finds candidates decides. Numbers compare exactly."""
    result = ModeResult.empty(len(batch))
    rows = np.arange(len(batch))
    for rank in range(1, options.max_rank + 1):
        if not len(rows):
            break
        found = _name_level(
            index,
            batch,
            result,
            rows,
            rank,
            accuracy.SOUNDEX_BY_RANK[rank],
            f"soundex rank {rank}",
            options,
            k,
        )
        rows = rows[~found]
    _no_match(result, f"no asset name sounds like this (soundex, maxRank {options.max_rank})")
    return result


def match_name(index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int) -> ModeResult:
    """The asset whose name (normalised), code or lookup code equals the query.

    A query that names one asset by name and another by code is a tie.
    """
    by_name = ModeResult.empty(len(batch))
    rows = np.arange(len(batch))
    _name_level(index, batch, by_name, rows, 1, accuracy.EXACT, "name", options, k)
    by_code = match_code(index, batch, LookupOptions(asset_class=options.asset_class), k)
    result = by_name
    code_only = (by_name.count == 0) & (by_code.count > 0)
    for column in ("asset", "count", "accuracy", "err"):
        getattr(result, column)[code_only] = getattr(by_code, column)[code_only]
    both = (by_name.count > 0) & (by_code.count > 0)
    same = both & (by_name.asset == by_code.asset) & (by_name.asset >= 0)
    conflict = both & ~same
    total = by_name.count[conflict] + by_code.count[conflict]
    result.asset[conflict] = -1
    result.accuracy[conflict] = np.nan
    result.count[conflict] = total
    result.err[conflict] = [f"{c} assets tied on name and code; none chosen" for c in total]
    if k:
        result.candidates = pd.concat(
            [by_name.candidates, by_code.candidates], ignore_index=True
        ).drop_duplicates(["query", "asset"])
    _no_match(result, "no asset has this name or code")
    return result


def match_contains(
    index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int
) -> ModeResult:
    """The one asset whose normalised name contains the normalised query.

    Scans the names once per distinct query (pyarrow substring kernel): meant for
    interactive and small batches, not for a million queries.
    """
    result = ModeResult.empty(len(batch))
    allowed = np.flatnonzero(index.allowed(options.asset_class))
    names = pa.array(index.name_column("normalised")[allowed], type=pa.large_string())
    name_lengths = pc.utf8_length(names).to_numpy()
    query_text = batch.texts()["normalised"]
    codes, distinct = pd.factorize(pd.Series(query_text, dtype=object))
    frames = []
    for code, text in enumerate(distinct):
        if not text:
            continue
        hits = np.flatnonzero(pc.match_substring(names, text).to_numpy(zero_copy_only=False))
        rows = np.flatnonzero(codes == code)
        scores = 100.0 * len(text) / name_lengths[hits]
        result.count[rows] = len(hits)
        if len(hits) == 1:
            result.asset[rows] = allowed[hits[0]]
            result.accuracy[rows] = scores[0]
        elif len(hits) > 1:
            result.err[rows] = f"{len(hits)} asset names contain this text; none chosen"
        if k and len(hits):
            top = np.argsort(-scores, kind="stable")[:k]
            frames.append(
                pd.DataFrame(
                    {
                        "query": np.repeat(rows, len(top)),
                        "asset": np.tile(allowed[hits[top]], len(rows)),
                        "score": np.tile(scores[top], len(rows)),
                    }
                )
            )
    if frames:
        result.candidates = pd.concat([result.candidates, *frames], ignore_index=True)
    _no_match(result, "no asset name contains this text")
    return result


# --- geo ----------------------------------------------------------------------------------


def query_geometry(batch: QueryBatch) -> np.ndarray:
    """The batch's geometry column, else its text read as WKT or ``latitude, longitude``."""
    if batch.geometry is not None:
        return np.asarray(batch.geometry, dtype=object)
    text = batch.text.fillna("").to_numpy(dtype=object)
    geometry = shapely.from_wkt(text, on_invalid="ignore")
    pairs = batch.text.fillna("").str.extract(_LAT_LON).astype(float)
    latlon = pairs.notna().all(axis=1).to_numpy()
    points = np.asarray(shapely.points(pairs[1].to_numpy(), pairs[0].to_numpy()), dtype=object)
    located: np.ndarray = np.where(latlon, points, geometry)
    return located


def match_geo(index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int) -> ModeResult:
    """The asset whose geometry covers the query's point or geometry.

    ``covers`` counts the boundary as inside, so a point on the boundary two parcels
    share is covered by both: that is a tie (no asset), not a coin toss.
    """
    result = ModeResult.empty(len(batch))
    geometry = query_geometry(batch)
    located = ~shapely.is_missing(geometry) & ~shapely.is_empty(geometry)
    query, asset = _geo_pairs(index, geometry, located, index.allowed(options.asset_class))
    count = np.bincount(query, minlength=len(batch))
    result.count[:] = count
    one = count[query] == 1
    result.asset[query[one]] = asset[one]
    result.accuracy[query[one]] = accuracy.GEO
    tied = np.flatnonzero(count > 1)
    result.err[tied] = [f"{c} assets cover this location; none chosen" for c in count[tied]]
    if k:
        order = np.argsort(query, kind="stable")
        query, asset = query[order], asset[order]
        per_query = np.bincount(query, minlength=len(batch))
        rank = _ranks(per_query[per_query > 0])
        take = rank < k
        result.candidates = pd.DataFrame(
            {"query": query[take], "asset": asset[take], "score": accuracy.GEO}
        )
    result.err[~located] = "the query has no location (a geometry, WKT or 'latitude, longitude')"
    _no_match(result, "no asset covers this location")
    return result


def _geo_pairs(
    index: AssetIndex, geometry: np.ndarray, located: np.ndarray, allowed: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Every (query, asset) pair where an allowed asset's geometry covers the query's."""
    points = located & (shapely.get_type_id(geometry) == 0)
    with_geometry = index.with_geometry
    queries: list[np.ndarray] = []
    assets: list[np.ndarray] = []

    def keep_covered(query: np.ndarray, asset: np.ndarray) -> None:
        """Of candidate pairs (by bounding box), keep those of allowed assets that cover
        the query's geometry."""
        keep = allowed[asset]
        query, asset = query[keep], asset[keep]
        inside = _covers(index.geometries(asset), geometry[query])
        queries.append(query[inside])
        assets.append(asset[inside])

    if points.sum() >= max(INVERSE_GEO_MIN, len(with_geometry) // 10):
        # Many points: index the points and query with the prepared asset geometries (one
        # pass over the assets, as geopandas' sjoin does for "within"); cheaper than
        # millions of point lookups in the asset tree.
        point_rows = np.flatnonzero(points)
        candidates = with_geometry[allowed[with_geometry]]
        pairs = shapely.STRtree(geometry[point_rows]).query(
            index.geometry[candidates], predicate="covers"
        )
        queries.append(point_rows[pairs[1]])
        assets.append(candidates[pairs[0]])
        located = located & ~points
        points[:] = False
    point_rows = np.flatnonzero(points)
    found = (
        index.box_grid.holding(
            shapely.get_x(geometry[point_rows]), shapely.get_y(geometry[point_rows])
        )
        if len(point_rows)
        else None
    )
    if found is not None:
        # Fewer points: the assets whose box holds each point, found through the index's
        # grid of the saved boxes (built once, no spatial tree), then the exact test.
        keep_covered(point_rows[found[0]], found[1])
        located = located & ~points
    # Otherwise bounding-box candidates from the asset tree, then one vectorised test over
    # the pairs.
    rows = np.flatnonzero(located)
    if not len(rows):
        return np.concatenate(queries or [rows]), np.concatenate(assets or [rows])
    tree, tree_assets = index.tree
    pairs = tree.query(geometry[rows])
    keep_covered(rows[pairs[0]], tree_assets[pairs[1]])
    return np.concatenate(queries), np.concatenate(assets)


def _covers(assets: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """``covers`` pair by pair; for point queries the cheaper ``intersects_xy`` (the same
    thing for a point: on the boundary counts)."""
    inside = np.zeros(len(queries), dtype=bool)
    points = shapely.get_type_id(queries) == 0
    inside[points] = shapely.intersects_xy(
        assets[points], shapely.get_x(queries[points]), shapely.get_y(queries[points])
    )
    inside[~points] = shapely.covers(assets[~points], queries[~points])
    return inside


# --- fuzzy ----------------------------------------------------------------------------


def fuzzy_model(
    index: AssetIndex,
    texts: Sequence[pd.Series],
    options: LookupOptions,
    folder: Path | None = None,
) -> probabilistic.Model | None:
    """The model ``match_fuzzy`` fits on a batch of the distinct texts of ``texts`` (None
    when no query has a candidate): fitted once on a Dask client from the texts each
    partition gives mode fuzzy (``FuzzyTexts``; a blank one too, when its query has a
    point), in partition order, it is the model of the job matched as one batch.
    Paired a partition at a time, the pairs waiting in ``folder`` if given, not all in
    memory at once: the pairing's thread takes the partitions from the first, this one
    from the last (``FuzzyPairing.model``). A million-row job's 236,712 texts in 20
    partitions: 10.1-10.2 s with a traced peak of 137-140 MiB, against 8.1-8.8 s and
    453-498 MiB paired at once, a peak that grew with the file."""
    with FuzzyPairing(index, options, folder=folder) as pairing:
        for partition in texts:
            pairing.add(partition)
        return pairing.model()


class FuzzyTexts:
    """A stand-in for ``match_fuzzy`` that only notes the texts of the queries it is given
    (a job's first pass: what the model is fitted on) and settles none of them."""

    def __init__(self) -> None:
        self.texts: list[pd.Series] = []

    def __call__(
        self, index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int
    ) -> ModeResult:
        self.texts.append(batch.text)
        return ModeResult.empty(len(batch))

    def distinct(self) -> pd.Series:
        """The distinct texts noted, in first-occurrence order."""
        if not self.texts:
            return pd.Series([], dtype=object)
        return pd.Series(pd.unique(pd.concat(self.texts, ignore_index=True)))


# Distinct queries parsed and paired at once by ``FuzzyAnswers`` (a multiple of the ranges
# ``compared_candidates`` pairs, so its ranges are those of one pass over them all).
PAIR_QUERIES = 3 * probabilistic.RANGE_QUERIES
# Distinct queries whose pairs are scored at once by ``FuzzyAnswers``: their evidence (seven
# floats a pair, up to MAX_CANDIDATES pairs a query) stays a few tens of MiB.
ANSWER_QUERIES = 20_000
# Threads that score those ranges (``FuzzyPairing.answers``).
ANSWER_THREADS = 2


@dataclass(frozen=True)
class FuzzyAnswers:
    """Mode fuzzy's answer to every distinct text of a job, matched at once with the model
    fitted on them all (``fuzzy_model``): a stand-in for ``match_fuzzy`` with that model
    on each part of the job. A query's answer depends only on its text, the model and the
    allowed assets, so a part gets exactly what matching it would give, without parsing,
    pairing and comparing its texts again. Texts it has no answer for, and candidates
    (``k``), are matched as ``match_fuzzy`` would."""

    texts: pd.Index
    result: ModeResult
    model: probabilistic.Model | None
    asset_class: str | None

    @classmethod
    def of(cls, index: AssetIndex, texts: pd.Series, options: LookupOptions) -> FuzzyAnswers:
        """The model fitted on ``texts`` (distinct, in first-occurrence order, as
        ``fuzzy_model``) and each text's answer (``FuzzyPairing`` of them all at once)."""
        with FuzzyPairing(index, options, threaded=False) as pairing:
            pairing.add(texts)
            return pairing.answers()

    def __call__(
        self, index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int
    ) -> ModeResult:
        where = self.texts.get_indexer(pd.Index(batch.text))
        if k or options.asset_class != self.asset_class or bool((where < 0).any()):
            return match_fuzzy(index, batch, options, k, model=self.model)
        return self.result.take(where)


# Queries ``FuzzyPairing`` pairs and compares at once in its thread, beside the caller's
# linking (``probabilistic.RANGE_QUERIES`` when nothing else runs).
BESIDE_RANGE_QUERIES = 5_000


@dataclass(frozen=True)
class PairingState:
    """What pairing a job's texts takes of the index: its fuzzy side, the assets that may
    be returned, how many of them hold each asset row (distinct name), and their class.
    A pairing process is sent it (``portable``)."""

    side: AssetSide
    allowed: np.ndarray
    per_row: np.ndarray
    asset_class: str | None

    @classmethod
    def of(cls, index: AssetIndex, options: LookupOptions) -> PairingState:
        side = index.fuzzy_side()
        allowed = index.allowed(options.asset_class)
        per_row = _assets_per_row(side, allowed)
        # The key groups of the class's names, made now (and kept by the side): a process
        # sent the side without its whole key table could not make them.
        side.groups_for(per_row > 0)
        return cls(side, allowed, per_row, options.asset_class)

    def portable(self) -> PairingState:
        """This state without the side's table of every key (pairing reads the groups
        made of it): at a million assets 80 MiB to send, not 300."""
        parsed = replace(
            self.side.parsed,
            key_rows=np.zeros(0, dtype=np.int32),
            keys=np.zeros(0, dtype=np.uint64),
        )
        left_out = {"left_out": True}  # asked for, it is an error (``key_table``)
        return replace(self, side=replace(self.side, parsed=parsed, _key_source=left_out))


@dataclass(frozen=True)
class _PairedTexts:
    """What ``FuzzyPairing`` made of one batch of texts: each text's parsed row (query),
    the number of queries and of those with a candidate, and their pairs (query rows from
    0, sorted), held here or saved to ``path`` (``load`` gives them either way)."""

    text_rows: np.ndarray
    n_queries: int
    n_present: int
    pairs: tuple[np.ndarray, probabilistic.Comparison] | None
    path: Path | None = None

    def load(self) -> tuple[np.ndarray, probabilistic.Comparison]:
        if self.pairs is not None:
            return self.pairs
        assert self.path is not None
        with np.load(self.path) as saved:  # saved by this process, for this job
            return saved["q"].astype(np.int64), probabilistic.Comparison(
                saved["levels"], saved["a"].astype(np.int64)
            )


class FuzzyPairing:
    """The candidate pairs of the distinct texts a job gives mode fuzzy, made as the texts
    are found, and then its answers (``FuzzyAnswers``).

    A job's first pass adds each part's texts (``add``): those new to the job are parsed,
    paired and compared in a thread of its own (``threaded``) while the next part is linked,
    where the pairing of them all waited for the last part (a million-row job: 5-7 s of
    pairing, mostly without the GIL, beside 6-7 s of linking at 1.2 cores; in nine
    alternating pairs of runs on a noisy two-core machine its link stage took 24.9 s on
    average before, 23.2 s after, each pair from 7 s faster to 3 s slower; its peak
    1,682-1,760 MiB before, 1,743-1,772 after). A text's parse and pairs are its own, so
    the pairs are those of one batch of every text in first-occurrence order; ``answers``
    (once) fits the model on them all and answers each text. With a ``folder`` each
    batch's pairs wait there, not in memory, and are read back batch by batch: what the
    pairs hold follows the part, not the file (22 pairs a text, 4.8 million pairs at a
    million rows). Leaving the context stops the thread (pairing not begun is dropped)."""

    def __init__(
        self,
        index: AssetIndex,
        options: LookupOptions,
        *,
        threaded: bool = True,
        folder: Path | None = None,
    ):
        # Taken here, in the caller's thread: the pairing thread only reads them.
        self._begin(PairingState.of(index, options), threaded, threaded, folder)

    @classmethod
    def of_state(
        cls, state: PairingState, *, beside: bool, folder: Path | None = None
    ) -> FuzzyPairing:
        """A pairing in the caller's thread from ``state`` (a pairing process's: see
        ``pairing_process``), pairing as the thread does beside a job's linking if
        ``beside``."""
        pairing = cls.__new__(cls)
        pairing._begin(state, False, beside, folder)
        return pairing

    def _begin(
        self, state: PairingState, threaded: bool, beside: bool, folder: Path | None
    ) -> None:
        self.state = state
        self.side, self.allowed, self.per_row = state.side, state.allowed, state.per_row
        self.asset_class = state.asset_class
        self.folder = folder
        self.beside = beside
        self._texts: list[pd.Series] = []
        self._seen: set[str] = set()
        self._paired: list[Future[_PairedTexts]] = []
        self._pool = (
            ThreadPoolExecutor(1, thread_name_prefix="toolkit-fuzzy-pairs") if threaded else None
        )

    def __enter__(self) -> FuzzyPairing:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)

    def add(self, texts: pd.Series) -> None:
        """Pair the texts among ``texts`` not added before (in their first-occurrence
        order), in the thread if there is one; raises what stopped an earlier pairing
        (the job fails at the part after, not after its last part)."""
        for earlier in self._paired:
            if earlier.done() and earlier.exception() is not None:
                earlier.result()
        distinct = self.taken(texts)
        if distinct is None:
            return
        batch = len(self._paired)
        if self._pool is not None:
            self._paired.append(self._pool.submit(self._pair, distinct, batch))
            return
        done: Future[_PairedTexts] = Future()
        done.set_result(self._pair(distinct, batch))
        self._paired.append(done)

    @property
    def taken_texts(self) -> list[pd.Series]:
        """The texts taken so far, a batch a part (each distinct and new)."""
        return self._texts

    def taken(self, texts: pd.Series) -> pd.Series | None:
        """The texts among ``texts`` not taken before, in their first-occurrence order,
        now taken; None when none is new."""
        text = pd.unique(texts.fillna("").astype("str").to_numpy(dtype=object))
        # The texts of earlier parts are kept in a set, probed once per distinct text of
        # this part: pandas' isin hashed every earlier text again at each part (0.8 s a
        # part once a million texts were seen; 11 ms by the set).
        new = np.fromiter((t not in self._seen for t in text), dtype=bool, count=len(text))
        if not new.any():
            return None
        distinct = pd.Series(text[new], dtype=object)
        self._seen.update(distinct)
        self._texts.append(distinct)
        return distinct

    def _pair_waiting_parts(self) -> None:
        """Pair here, from the last back, the parts still waiting for the pairing thread,
        which goes on from the first until the two meet: with no part left to link, this
        thread would only wait for it. Beside the linking the thread falls behind (a
        million-row job: a part's pairing took 1.6 s there, 0.75 s alone), and three of
        eight parts were still to pair at the last part's end, at one core."""
        if self._pool is None:
            return
        for i in range(len(self._paired) - 1, -1, -1):
            if not self._paired[i].cancel():
                return  # begun or done: the thread has every part before it
            paired: Future[_PairedTexts] = Future()
            paired.set_result(self._pair(self._texts[i], i))
            self._paired[i] = paired

    def _pair(self, texts: pd.Series, batch: int) -> _PairedTexts:
        """``texts``' parsed rows and their pairs (saved to the folder, if there is one, as
        batch number ``batch``); the texts' analysis and words are let go before their
        pairs are joined (``_paired``)."""
        analysed = QueryBatch(texts)
        words, parts, codes = subset_words(analysed.analysis())
        del analysed  # its analysis: every text's words again
        if not self.beside:
            pieces = _paired(self.side, words, parts, self.per_row)
        else:
            # Beside the caller's linking, one thread compares (a second would take the
            # core the caller links on), in small ranges: their temporaries are held beside
            # the caller's (a million-row job's peak: 1,906-1,910 MiB in ranges of 20,000
            # queries, 1,744-1,772 in ranges of 5,000; the pairing took the same time).
            pieces = _paired(self.side, words, parts, self.per_row, 1, BESIDE_RANGE_QUERIES)
        q, comparison = _joined(pieces)
        n_present = int(probabilistic.present_queries(q)[-1]) + 1 if len(q) else 0
        if self.folder is None:
            return _PairedTexts(codes, words.n_rows, n_present, (q, comparison))
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.folder / f"pairs-{batch:05d}.npz"
        # Query and asset rows fit 32 bits (a part's queries, the side's rows).
        np.savez(
            path, q=q.astype(np.int32), levels=comparison.levels, a=comparison.a.astype(np.int32)
        )
        return _PairedTexts(codes, words.n_rows, n_present, None, path)

    def answers(self) -> FuzzyAnswers:
        """The model fitted on every text added and each text's answer: fitted on the
        queries ``probabilistic.fit`` would choose among them all, each batch's pairs then
        scored on their own (a query's answer depends on its own pairs alone)."""
        batches = self._batches()
        text = pd.Index(pd.concat([pd.Series([], dtype=object), *self._texts], ignore_index=True))
        starts = np.cumsum([0] + [b.n_queries for b in batches])
        every = np.concatenate(
            [np.zeros(0, dtype=np.int64)]
            + [b.text_rows + start for b, start in zip(batches, starts[:-1], strict=True)]
        )
        if not sum(b.n_present for b in batches):
            result = ModeResult.empty(len(every))
            _no_match(result, NO_FUZZY_CANDIDATE)
            return FuzzyAnswers(text, result, None, self.asset_class)
        model = self._fitted(batches, int(starts[-1]))
        row_asset = _row_assets(self.side, self.allowed)
        n_allowed = int(self.allowed.sum())
        decided: list[ModeResult] = []
        # The ranges are scored in threads, in order (numpy's work on them lets go of the
        # GIL): the job's other threads have ended, and this would leave a core idle.
        with ThreadPoolExecutor(ANSWER_THREADS, thread_name_prefix="toolkit-answers") as pool:
            for batch in batches:
                q, comparison = batch.load()
                n_queries = batch.n_queries
                # Pairs are sorted by query: a range of queries is a range of pairs, scored
                # alone as match_fuzzy would score it among other queries.
                bounds = np.arange(0, n_queries + ANSWER_QUERIES, ANSWER_QUERIES)
                bounds = bounds.clip(max=n_queries)
                ends = np.searchsorted(q, bounds)
                answered = partial(
                    _answered_range, q, comparison, model, n_allowed, self.per_row, row_asset
                )
                decided.extend(
                    pool.map(
                        answered,
                        bounds[:-1].tolist(),
                        bounds[1:].tolist(),
                        ends[:-1].tolist(),
                        ends[1:].tolist(),
                    )
                )
                del q, comparison, answered
        result = ModeResult.concat(decided).take(every)
        return FuzzyAnswers(text, result, model, self.asset_class)

    def model(self) -> probabilistic.Model | None:
        """The model fitted on every text added, as ``answers`` fits it, without answering
        the texts (None when no query has a candidate): a Dask job's client fits it, and
        its workers answer their own rows."""
        batches = self._batches()
        if not sum(b.n_present for b in batches):
            return None
        return self._fitted(batches, sum(b.n_queries for b in batches))

    def _batches(self) -> list[_PairedTexts]:
        """Every batch paired (what stopped a pairing is raised here), once."""
        self._pair_waiting_parts()
        batches = [paired.result() for paired in self._paired]
        self._paired.clear()
        return batches

    def _fitted(self, batches: list[_PairedTexts], n_queries: int) -> probabilistic.Model:
        """``probabilistic.fit`` on the pairs of every batch (their queries numbered one
        after another), reading only the pairs of the queries it chooses."""
        chosen = probabilistic.fit_chosen(sum(b.n_present for b in batches), n_queries)
        levels, rows = [], []
        query_start = present_start = 0
        for batch in batches:
            q, comparison = batch.load()
            keep = (
                slice(None)
                if chosen is None
                else chosen[present_start + probabilistic.present_queries(q)]
            )
            levels.append(comparison.levels[keep])
            rows.append(q[keep] + query_start)
            query_start += batch.n_queries
            present_start += batch.n_present
            del q, comparison
        side = self.side
        return probabilistic.fit_levels(
            side.parsed,
            np.concatenate(levels),
            np.concatenate(rows),
            n_queries if chosen is None else probabilistic.FIT_QUERIES,
            side.u,
            (side.street_tf, side.locality_tf),
        )


def _answered_range(
    q: np.ndarray,
    comparison: probabilistic.Comparison,
    model: probabilistic.Model,
    n_allowed: int,
    per_row: np.ndarray,
    row_asset: np.ndarray,
    lo: int,
    hi: int,
    first: int,
    end: int,
) -> ModeResult:
    """The answers to queries ``lo`` to ``hi`` of a batch, whose pairs are ``first`` to
    ``end`` of its pairs (query rows ``q``, sorted), scored alone as ``match_fuzzy`` would
    score them among other queries."""
    part = probabilistic.Comparison(comparison.levels[first:end], comparison.a[first:end])
    scored = probabilistic.score(q[first:end] - lo, part, model, hi - lo, n_allowed, per_row)
    return _fuzzy_decided(scored, per_row, row_asset)


def _assets_per_row(side: AssetSide, allowed: np.ndarray) -> np.ndarray:
    """How many allowed assets hold each asset row (distinct name) of the fuzzy side."""
    counts: np.ndarray = np.bincount(
        side.codes[np.flatnonzero(allowed)], minlength=len(side.parsed)
    )
    return counts


def _paired(
    side: AssetSide,
    words: Words,
    parts: Structure,
    per_row: np.ndarray,
    threads: int | None = None,
    range_queries: int | None = None,
) -> list[tuple[np.ndarray, probabilistic.Comparison]]:
    """The candidate pairs of the distinct queries ``words`` (``subset_words``) among the
    asset rows some allowed asset holds (``per_row``), and their comparison, parsed and
    paired ``PAIR_QUERIES`` queries at a time, only their pairs kept (``_joined`` makes
    them one): parsing a million-row job's every text at once, beside its pairing's
    temporaries, was the import's highest point of memory. A query's parse and pairs are
    its own, so the pairs are those of one pass, in the same order."""
    groups = side.groups_for(per_row > 0)

    def compared(queries: Parsed, start: int) -> tuple[np.ndarray, probabilistic.Comparison]:
        q, comparison = probabilistic.compared_candidates(
            queries, side.parsed, groups, threads=threads, range_queries=range_queries
        )
        # Kept as 32-bit rows until every group is paired (query and asset rows fit).
        return (
            (q + start).astype(np.int32),
            probabilistic.Comparison(comparison.levels, comparison.a.astype(np.int32)),
        )

    def parsed(start: int) -> Parsed:
        stop = min(start + PAIR_QUERIES, words.n_rows)
        return Parsed.of_words(*rows_of_words(words, parts, start, stop), field_data=True)

    starts = range(0, words.n_rows, PAIR_QUERIES)
    if len(starts) < 2:
        return [compared(parsed(start), start) for start in starts]
    # Each group is compared (in threads of its own, mostly without the GIL) while the
    # next is parsed here, which would otherwise wait: one group ahead at most.
    pieces: list[tuple[np.ndarray, probabilistic.Comparison]] = []
    with ThreadPoolExecutor(1, thread_name_prefix="toolkit-pairs") as comparing:
        pending: Future[tuple[np.ndarray, probabilistic.Comparison]] | None = None
        for start in starts:
            queries = parsed(start)
            if pending is not None:
                pieces.append(pending.result())
            pending = comparing.submit(compared, queries, start)
            del queries
        assert pending is not None
        pieces.append(pending.result())
    return pieces


def _joined(
    pieces: list[tuple[np.ndarray, probabilistic.Comparison]],
) -> tuple[np.ndarray, probabilistic.Comparison]:
    """Consecutive groups' pairs (query rows, comparison) as one, each group let go as it is
    copied in (``pieces`` is emptied): not every group beside the whole at once."""
    total = sum(len(q) for q, _ in pieces)
    width = pieces[0][1].levels.shape[1] if pieces else len(probabilistic.COMPONENTS)
    q = np.empty(total, dtype=np.int64)
    levels = np.empty((total, width), dtype=np.int8)
    a = np.empty(total, dtype=np.int64)
    at = 0
    pieces.reverse()
    while pieces:
        piece_q, piece = pieces.pop()
        end = at + len(piece_q)
        q[at:end], levels[at:end], a[at:end] = piece_q, piece.levels, piece.a
        at = end
        del piece_q, piece
    return q, probabilistic.Comparison(levels, a)


# A mode's answers on a job's first pass (``TextRecord``): its name, the distinct texts it
# left without an asset (None: it was given points, and answers by them), its answer to each.
RecordedCall = tuple[str, pd.Index | None, ModeResult]


class TextRecord:
    """Stand-ins for the mode functions of a way on a job's first pass: the answers of each
    mode called before fuzzy to the texts it left without an asset are kept by text, in
    call order (a mode answers a text the same in any batch); fuzzy only notes its texts
    (``FuzzyTexts``) and settles nothing. The second pass, over the rows fuzzy was given,
    gives ``replayed_by_text`` the calls."""

    def __init__(self) -> None:
        self.calls: list[RecordedCall] = []
        self.fuzzy = FuzzyTexts()
        self._fuzzy_called = False

    def functions(self) -> dict[str, ModeFunction]:
        def call(
            name: str, index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int
        ) -> ModeResult:
            if name == "fuzzy":
                self._fuzzy_called = True
                return self.fuzzy(index, batch, options, k)
            result = MODE_FUNCTIONS[name](index, batch, options, k)
            if self._fuzzy_called:  # what follows fuzzy depends on it: run anew then
                return result
            if batch.geometry is not None:
                self.calls.append((name, None, result))
                return result
            # Only what the mode left without an asset goes on to fuzzy: a second pass over
            # the rows fuzzy was given asks the mode for nothing else.
            left = np.flatnonzero(result.asset < 0)
            codes, texts = pd.factorize(batch.text.to_numpy(dtype=object)[left])
            first = np.empty(len(texts), dtype=np.int64)
            first[codes[::-1]] = left[::-1]  # each text's first row
            self.calls.append((name, pd.Index(texts, dtype=object), result.take(first)))
            return result

        return {name: partial(call, name) for name in MODE_FUNCTIONS}


def replayed_by_text(calls: list[RecordedCall], fuzzy: ModeFunction) -> dict[str, ModeFunction]:
    """Stand-ins for the mode functions on a job's second pass over some rows of a way: a
    mode called before fuzzy answers each text as it did on the first pass (``TextRecord``:
    the same modes come in the same order, though a mode given none of these rows is not
    called); fuzzy is ``fuzzy``, and any mode after it, given points or asked for
    candidates runs anew."""
    given = 0
    fuzzy_called = False

    def call(
        name: str, index: AssetIndex, batch: QueryBatch, options: LookupOptions, k: int
    ) -> ModeResult:
        nonlocal given, fuzzy_called
        if name == "fuzzy":
            fuzzy_called = True
            return fuzzy(index, batch, options, k)
        if fuzzy_called:
            return MODE_FUNCTIONS[name](index, batch, options, k)
        for i in range(given, len(calls)):
            called, texts, result = calls[i]
            if called != name:
                continue
            given = i + 1
            if texts is None or batch.geometry is not None or k:
                return MODE_FUNCTIONS[name](index, batch, options, k)
            where = texts.get_indexer(pd.Index(batch.text.to_numpy(dtype=object)))
            if bool((where < 0).any()):
                break
            return result.take(where)
        raise RuntimeError(f"mode {name} was not called so on the first pass")

    return {name: partial(call, name) for name in MODE_FUNCTIONS}


def _fuzzy_pairs(
    index: AssetIndex,
    batch: QueryBatch,
    options: LookupOptions,
    model: probabilistic.Model | None = None,
) -> (
    tuple[int, np.ndarray, np.ndarray, np.ndarray, probabilistic.Comparison, probabilistic.Model]
    | None
):
    """How many distinct queries the batch has, each row's among them, assets per asset
    row, the candidate pairs and their comparison, and ``model`` (fitted on them when
    None); None when no query has a candidate."""
    side = index.fuzzy_side()
    # Only the distinct strings of this batch are parsed (a fallback batch shares the
    # analysis of the whole batch).
    words, parts, codes = subset_words(batch.analysis())
    per_row = _assets_per_row(side, index.allowed(options.asset_class))
    n_queries = words.n_rows
    q, comparison = _joined(_paired(side, words, parts, per_row))
    if not len(q):
        return None
    if model is None:
        model = probabilistic.fit(
            side.parsed, q, comparison, side.u, (side.street_tf, side.locality_tf), n_queries
        )
    return n_queries, codes, per_row, q, comparison, model


def match_fuzzy(
    index: AssetIndex,
    batch: QueryBatch,
    options: LookupOptions,
    k: int,
    *,
    model: probabilistic.Model | None = None,
) -> ModeResult:
    """Probabilistic address matching (``probabilistic``): candidates from several blocking
    keys, a Fellegi–Sunter match probability for each, fitted on this batch unless a
    ``model`` fitted for the whole job (``fuzzy_model``) is given. A query links when its
    best candidate's probability reaches ``LINK_PROBABILITY``; ties (two assets about
    equally likely) therefore never link. ``accuracy`` is that probability x 100.
    """
    fitted = _fuzzy_pairs(index, batch, options, model)
    if fitted is None:
        result = ModeResult.empty(len(batch))
        _no_match(result, NO_FUZZY_CANDIDATE)
        return result
    n_queries, codes, per_row, q, comparison, model = fitted
    side = index.fuzzy_side()
    allowed = index.allowed(options.asset_class)
    scored = probabilistic.score(q, comparison, model, n_queries, int(allowed.sum()), per_row)
    result = _fuzzy_decided(scored, per_row, _row_assets(side, allowed)).take(codes)
    if k:
        result.candidates = _fuzzy_candidates(scored, codes, per_row, side, allowed, k)
    return result


def _row_assets(side: AssetSide, allowed: np.ndarray) -> np.ndarray:
    """Per asset row (distinct name) of the fuzzy side, an allowed asset holding it (-1:
    none)."""
    allowed_assets = np.flatnonzero(allowed)
    row_asset = np.full(len(side.parsed), -1, dtype=np.int64)
    row_asset[side.codes[allowed_assets]] = allowed_assets
    return row_asset


def _fuzzy_decided(
    scored: probabilistic.Scored, per_row: np.ndarray, row_asset: np.ndarray
) -> ModeResult:
    """Mode fuzzy's answer to each distinct query ``scored``: linked, or why not."""
    n = len(scored.best)
    result = ModeResult.empty(n)
    if not len(scored.q):  # none of these queries has a candidate
        result.explained = np.full(n, -1, dtype=np.int64)
        result.probability = np.full(n, np.nan)
        result.evidence = np.full((n, len(probabilistic.COMPONENTS)), np.nan)
        _no_match(result, NO_FUZZY_CANDIDATE)
        return result
    best = scored.best
    has = best >= 0
    safe = np.maximum(best, 0)
    p_best = np.where(has, scored.probability[safe], np.nan)
    result.explained = np.where(has, row_asset[scored.a[safe]], -1)
    result.probability = p_best
    result.evidence = np.where(has[:, None], scored.bits(safe), np.nan)
    n_same = np.where(has, per_row[scored.a[safe]], 0)
    second = scored.second
    p_second = np.where(second >= 0, scored.probability[np.maximum(second, 0)], 0.0)
    # Candidate assets worth a look: those within review distance.
    reviewable = scored.probability >= probabilistic.REVIEW_PROBABILITY
    per_query_near = np.bincount(
        scored.q, weights=reviewable * per_row[scored.a], minlength=n
    ).astype(np.int64)
    link = has & (p_best >= probabilistic.LINK_PROBABILITY) & (n_same == 1)
    result.asset[link] = row_asset[scored.a[safe[link]]]
    result.accuracy[link] = np.round(100.0 * p_best[link], 1)
    result.count[:] = np.where(link, np.maximum(per_query_near, 1), per_query_near)
    shared = has & ~link & (n_same > 1)
    result.err[shared] = _texts(
        n_same[shared].astype(StringDType()),
        " assets have this address (",
        _percent(p_best[shared]),
        " likely); none chosen",
    )
    close = has & ~link & ~shared & (p_second >= p_best / 2)
    result.err[close] = _texts(
        "the best candidates are about equally likely (",
        _percent(p_best[close]),
        ", ",
        _percent(p_second[close]),
        "); none chosen",
    )
    weak = has & ~link & ~shared & ~close
    result.err[weak] = _texts(
        "the best candidate is ",
        _percent(p_best[weak]),
        f" likely, below the {probabilistic.LINK_PROBABILITY:.0%} needed to link",
    )
    _no_match(result, NO_FUZZY_CANDIDATE)
    return result


def _percent(shares: np.ndarray) -> np.ndarray:
    """Each share as ``f"{share:.0%}"`` writes it (the same rounding: to the nearest
    whole percent, a tie to the even one), on the whole column."""
    whole = np.rint(shares * 100.0).astype(np.int64).astype(StringDType())
    percent: np.ndarray = np.strings.add(whole, "%")
    return percent


def _texts(*pieces: str | np.ndarray) -> np.ndarray:
    """The pieces (texts, or columns of text of one length) joined row by row, as objects
    (a hundred thousand reasons: several times faster than an f-string a row)."""
    joined: np.ndarray | str = ""
    for piece in pieces:
        joined = np.strings.add(joined, piece)
    return np.asarray(joined, dtype=object)


def _fuzzy_candidates(
    scored: probabilistic.Scored,
    codes: np.ndarray,
    per_row: np.ndarray,
    side: AssetSide,
    allowed: np.ndarray,
    k: int,
) -> pd.DataFrame:
    """The top ``k`` candidate assets of each query, scored by probability x 100."""
    pairs = pd.DataFrame(
        {"q": scored.q, "row": scored.a, "score": np.round(100.0 * scored.probability, 1)}
    )
    assets = pd.DataFrame({"row": side.codes, "asset": np.arange(len(side.codes))})[allowed]
    pairs = pairs.merge(assets, on="row").sort_values(["q", "score"], ascending=[True, False])
    pairs = pairs.groupby("q", sort=False).head(k)
    batch = pd.DataFrame({"query": np.arange(len(codes)), "q": codes})
    found = batch.merge(pairs, on="q").sort_values(["query", "score"], ascending=[True, False])
    return found[["query", "asset", "score"]].reset_index(drop=True)


def warm_work(index: AssetIndex, options: LookupOptions) -> dict[str, Callable[[], object]]:
    """What the index builds on first use for ``options``' mode and fallback, by name, each
    piece independent of the others (a caller builds them, in threads of its own if it
    likes, after ``index.allowed`` of the class), so the modes then find them ready: its
    key tables, and for geo its grid of boxes.
    Mode fuzzy's side is loaded with the index, and mode contains builds nothing. Raises
    ``OptionError`` for a code field the index lacks."""
    cls = options.asset_class
    work: dict[str, Callable[[], object]] = {}

    def tables(*keys: str) -> Callable[[], object]:
        def build() -> None:
            for key in keys:
                index.table(key, cls).warm()

        return build

    for mode in dict.fromkeys(m for m in (options.mode, options.fallback_mode) if m):
        if mode == "id":
            work["code:id"] = tables("code:id")
        if mode in ("code", "name", "auto"):
            field = "*" if mode != "code" else _check_code_field(index, options.code_field)
            # One piece: both tables are made from the field's codes, derived once.
            work[f"code:{field}"] = tables(f"code:{field}", f"stripped:{field}")
        if mode in ("soundex", "name", "auto"):
            ranks = range(1, 2 if mode == "name" else options.max_rank + 1)
            for rank in ranks:
                full, street = _LEVEL_KEYS[rank]
                for key in (full, f"{street}/bare", street):
                    work[key] = tables(key)
            work["postcode"] = partial(index.name_column, "postcode")
        if mode == "geo":
            # The grid of boxes (built on first use, as the positions with a geometry).
            work["geo"] = lambda: (index.with_geometry, index.box_grid)
    return work


MODE_FUNCTIONS: dict[str, ModeFunction] = {
    "id": match_id,
    "code": match_code,
    "name": match_name,
    "contains": match_contains,
    "soundex": match_soundex,
    "geo": match_geo,
    "fuzzy": match_fuzzy,
}
