"""Linking import rows to assets: the rule's ways, tried in order, on whole columns.

An item rule's :class:`~toolkit.importing.rules.AssetLink` names up to four ways: an
asset id column, a code column matched on a code field (the spec's
``asset_lookup``/``asset_codefield``), the row's own point inside an asset, and
an address from some columns (``asset_friendly``) with lookup options. Each way
runs only on the rows still without an asset, so the most certain way wins.
Ties are never broken by guessing: a tied row stays unlinked with the reason.

The address way may end with an external lookup (the site's gazetteer, a geocoding
service) when the rule's options ask for it (``useExternalLookups``; imports leave it off
unless they do). A place found there links nothing by itself; with
``upgradeExternalLookupToInternalAsset`` it is kept in :attr:`LinkResult.places`, and the
import's write makes it an asset of ``assetClass`` (in its own transaction, so a dry run
makes none) and links the row to it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from toolkit.errors import MatchingError, OptionError
from toolkit.geocoding import Places, pending_places
from toolkit.importing.rules import ImportRule, Prepared
from toolkit.matching import AssetIndex, Geocoder, LookupOptions, resolve
from toolkit.matching.modes import (
    MODE_FUNCTIONS,
    ModeFunction,
    RecordedCall,
    TextRecord,
    replayed_by_text,
    warm_work,
)
from toolkit.matching.probabilistic import COMPONENTS
from toolkit.matching.review import apply_decisions
from toolkit.model.fieldjson import rounded_numbers_json
from toolkit.progress import Progress, no_progress

LINK_COLUMNS = (
    "row",
    "reference",
    "query",
    "asset_id",
    "mode",
    "accuracy",
    "candidates",
    "err",
    # Where fuzzy matching scored the row: its best candidate's match probability, and that
    # candidate's evidence in bits per address component as a JSON object.
    "probability",
    "evidence",
)


@dataclass(frozen=True)
class LinkResult:
    """Per source row: the asset id (Int64, missing when unlinked) and how it was decided."""

    asset_ids: pd.Series
    reasons: pd.Series
    links: pd.DataFrame
    # Places found outside that are to become assets (upgradeExternalLookupToInternalAsset);
    # ``row_place`` is by row position.
    places: Places | None = None

    def counts(self) -> dict[str, int]:
        """How many rows each way linked, how many wait for a place to become an asset
        (``external``), and how many stayed unlinked."""
        linked = self.links["mode"].where(self.asset_ids.notna().to_numpy())
        counts = {str(k): int(v) for k, v in linked.value_counts().items()}
        waiting = self.waiting()
        if waiting.any():
            counts["external"] = counts.get("external", 0) + int(waiting.sum())
        counts["unlinked"] = int((self.asset_ids.isna().to_numpy() & ~waiting).sum())
        return counts

    def waiting(self) -> np.ndarray:
        """Mask of the rows whose place is to become an asset."""
        if self.places is None:
            return np.zeros(len(self.asset_ids), dtype=bool)
        return self.places.row_place >= 0


def _frame_text(frame: pd.DataFrame, column: str | None) -> pd.Series | None:
    if column is None:
        return None
    by_key = {c.strip().casefold(): c for c in frame.columns}
    heading = by_key.get(column.strip().casefold())
    if heading is None:
        return None
    text = frame[heading].astype("string").str.strip()
    return text.mask(text == "")


@dataclass(frozen=True)
class LinkDraft:
    """What a job's first pass keeps of a part's links (on disk, with the part), so that
    its second pass decides only the rows mode fuzzy was given: the per-row arrays after
    every way; the positions of the rows whose address reached fuzzy (every row of a text
    it was given: the modes before it answer by text) and their arrays before the address
    way; and, by text, what each mode before fuzzy answered there (``TextRecord``)."""

    arrays: dict[str, np.ndarray]
    rows: np.ndarray
    before: dict[str, np.ndarray]
    calls: list[RecordedCall]


def link_rows(
    index: AssetIndex,
    frame: pd.DataFrame,
    prepared: Prepared,
    rule: ImportRule,
    *,
    reference_field: str | None = None,
    decisions: pd.DataFrame | None = None,
    progress: Progress = no_progress,
    geocoder: Geocoder | None = None,
    fuzzy: ModeFunction | None = None,
    modes: Mapping[str, ModeFunction] | None = None,
    draft: LinkDraft | None = None,
) -> LinkResult:
    """Link every row of ``frame`` that the rule's asset link can place. ``decisions``
    (reviewers' ``query`` -> ``asset_id``, see ``matching.review``) settle the address
    rows whose text they name, before any matcher's answer; ``geocoder`` is the address
    way's external last resort, when the rule's options ask for one. Progress counts the
    rows settled: linked, then every row once the last way has been tried. ``fuzzy``
    stands in for mode fuzzy on the address way, ``modes`` for the mode functions they name
    on every way (``resolve``). With a first pass's ``draft`` of these rows
    (``draft_links``), only the rows it left to mode fuzzy are linked (``fuzzy``: its
    answers), the others keep what the first pass gave them: every row ends as it would
    linked here at once."""
    linker = _Linker(index, frame, rule, decisions, progress, geocoder, modes)
    if draft is not None:
        linker.resume(draft, fuzzy)
    else:
        linker.ways(fuzzy)
    return linker.finish(prepared, reference_field)


def draft_links(
    index: AssetIndex,
    frame: pd.DataFrame,
    rule: ImportRule,
    *,
    decisions: pd.DataFrame | None = None,
) -> tuple[LinkDraft, pd.Series]:
    """A job's first pass over a part: ``link_rows`` with mode fuzzy only noting its texts
    (``FuzzyTexts``), as a draft for the second pass (``link_rows(draft=...)``), and the
    distinct texts fuzzy was given, in first-occurrence order (what its model is fitted
    on)."""
    record = TextRecord()
    linker = _Linker(index, frame, rule, decisions, no_progress, None, None)
    linker.ways(None, record)
    texts = record.fuzzy.distinct()
    address = linker.address_rows
    rows = address[_is_in(linker.arrays["query"][address], texts)]
    before = {name: values[rows] for name, values in linker.before.items()}
    linker.settle()
    return LinkDraft(linker.arrays, rows, before, record.calls), texts


def _is_in(values: np.ndarray, texts: pd.Series) -> np.ndarray:
    """Mask of ``values`` (an object array of text) found among ``texts``: Arrow's hash
    set (a part's 110,000 queries among its 30,000 fuzzy texts: ~45 ms, where pandas'
    ``get_indexer`` took ~95 ms); values that are not all text go pandas' way."""
    try:
        found = pc.is_in(
            pa.array(values, type=pa.large_string(), from_pandas=True),
            value_set=pa.array(texts.to_numpy(dtype=object), type=pa.large_string()),
        )
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return np.asarray(pd.Index(texts).get_indexer(values) >= 0)
    return np.asarray(found.to_numpy(zero_copy_only=False), dtype=bool)


def warm_link_index(
    index: AssetIndex,
    rule: ImportRule,
    *,
    columns: Collection[str] | None = None,
    geometry: bool = True,
) -> None:
    """Build in ``index`` what linking ``rule``'s rows builds there on first use (the key
    tables and grid of each way's modes: ``warm_work``), e.g. while the first rows are
    read: of the ways the file's ``columns`` (None: any) and ``geometry`` give rows to (a
    table of a million codes not needed is 100 MiB held for nothing). Only a head start:
    a way whose options are wrong is left to fail where the rows are linked, as it would
    have, and then only if some row takes that way."""
    link = rule.asset_link
    if link is None:
        return
    headings = None if columns is None else {c.strip().casefold() for c in columns}

    def given(column: str | None) -> bool:
        return column is not None and (headings is None or column.strip().casefold() in headings)

    asset_class = link.options.get("assetClass")
    ways: list[dict[str, Any]] = []
    if given(link.id_column):
        ways.append({"mode": "id", "assetClass": asset_class})
    if given(link.lookup_column):
        ways.append({"mode": "code", "assetClass": asset_class, "codeField": link.codefield})
    if link.use_geometry and geometry:
        ways.append({"mode": "geo", "assetClass": asset_class})
    if any(given(c) for c in link.friendly_columns):
        ways.append(dict(link.options))
    work: dict[str, Callable[[], object]] = {}
    for way in ways:
        try:
            options = LookupOptions.from_dict(way)
            index.allowed(options.asset_class)  # shared by the pieces: made first, once
            work.update(warm_work(index, options))
        except (OptionError, MatchingError):
            continue
    # The pieces are independent and much of their work lets go of the GIL (Arrow's
    # encoding and hashing, numpy's sorts): two threads build them in about 60% of the time.
    with ThreadPoolExecutor(WARM_THREADS, thread_name_prefix="toolkit-warm") as pool:
        for done in [pool.submit(_warmed, build) for build in work.values()]:
            done.result()


# Threads that build an index's tables on first use (``warm_link_index``).
WARM_THREADS = 2


def _warmed(build: Callable[[], object]) -> None:
    """``build()``; an error is left for the linking to meet where a row takes that way."""
    with suppress(OptionError, MatchingError):
        build()


class _Linker:
    """The ways of a rule's asset link tried on a frame's rows, each on the rows still
    without an asset, writing the per-row arrays of ``_result`` by position."""

    def __init__(
        self,
        index: AssetIndex,
        frame: pd.DataFrame,
        rule: ImportRule,
        decisions: pd.DataFrame | None,
        progress: Progress,
        geocoder: Geocoder | None,
        modes: Mapping[str, ModeFunction] | None,
    ) -> None:
        self.index, self.frame, self.link = index, frame, rule.asset_link
        self.decisions, self.progress, self.geocoder, self.modes = (
            decisions, progress, geocoder, modes
        )  # fmt: skip
        n = self.n = len(frame)
        self.arrays: dict[str, np.ndarray] = {
            "asset_ids": np.zeros(n, dtype=np.int64),
            "linked": np.zeros(n, dtype=bool),
            "reasons": np.full(n, None, dtype=object),
            "mode": np.full(n, None, dtype=object),
            "query": np.full(n, None, dtype=object),
            "accuracy": np.full(n, np.nan),
            "candidates": np.zeros(n, dtype=np.int64),
            "probability": np.full(n, np.nan),
            "evidence": np.full(n, None, dtype=object),
        }
        self.places: list[Places] = []
        # The address way's rows and every array as it was before that way (a draft's).
        self.address_rows = np.zeros(0, dtype=np.int64)
        self.before: dict[str, np.ndarray] = {}
        self.options: dict[str, Any] = {}
        if self.link is not None:
            self.options = {"useExternalLookups": False, **self.link.options}

    def ways(self, fuzzy: ModeFunction | None, record: TextRecord | None = None) -> None:
        """Try every way of the link in turn; ``record`` stands in for the modes of the
        address way (a draft's first pass)."""
        link, frame = self.link, self.frame
        if link is None or self.n == 0:
            return
        asset_class = self.options.get("assetClass")
        ids_text = _frame_text(frame, link.id_column)
        if ids_text is not None:
            self.attempt(
                ids_text.notna().to_numpy(), ids_text, {"mode": "id", "assetClass": asset_class}
            )
        codes = _frame_text(frame, link.lookup_column)
        if codes is not None:
            code_options = {"mode": "code", "assetClass": asset_class}
            if link.codefield:
                code_options["codeField"] = link.codefield
            self.attempt(codes.notna().to_numpy(), codes, code_options)
        if link.use_geometry and "geometry" in frame.columns:
            geometry = np.asarray(frame.geometry.values, dtype=object)
            has_point = ~shapely.is_missing(geometry)
            has_point[has_point] = ~shapely.is_empty(geometry[has_point])
            empty_text = pd.Series("", index=frame.index, dtype="string")
            self.attempt(
                has_point, empty_text, {"mode": "geo", "assetClass": asset_class}, geometry
            )
        address = self.address()
        if address is not None:
            mask = address.notna().to_numpy()
            self.address_rows = np.flatnonzero(mask & ~self.arrays["linked"])
            if record is not None:
                self.before = {k: v.copy() for k, v in self.arrays.items()}
            self.address_way(mask, address, fuzzy, None if record is None else record.functions())

    def address(self) -> pd.Series | None:
        """The address of each row (``join_address`` of the rule's columns), if any."""
        if self.link is None or not self.link.friendly_columns:
            return None
        parts = [_frame_text(self.frame, c) for c in self.link.friendly_columns]
        present = [p for p in parts if p is not None]
        return join_address(present) if present else None

    def resume(self, draft: LinkDraft, fuzzy: ModeFunction | None) -> None:
        """A first pass's ``draft`` with the rows it left to mode fuzzy linked again on the
        address way, from where they stood before it, with ``fuzzy`` and the answers of
        the modes before it as recorded (``replayed_by_text``)."""
        self.arrays = {name: values.copy() for name, values in draft.arrays.items()}
        rows = draft.rows
        for name, values in draft.before.items():
            self.arrays[name][rows] = values
        if not len(rows):
            return
        # The rows' own texts, as the first pass gave them to the address way.
        texts = pd.Series(draft.arrays["query"], dtype=object)
        mask = np.zeros(self.n, dtype=bool)
        mask[rows] = True
        self.address_way(
            mask, texts, fuzzy, replayed_by_text(draft.calls, fuzzy or MODE_FUNCTIONS["fuzzy"])
        )

    def address_way(
        self,
        mask: np.ndarray,
        texts: pd.Series,
        fuzzy: ModeFunction | None,
        modes: Mapping[str, ModeFunction] | None,
    ) -> None:
        """The rows of ``mask`` linked by their address ``texts`` with the rule's options,
        its reviewed decisions and, if it allows them, external lookups."""
        self.attempt(
            mask,
            texts,
            self.options,
            reviewed=self.decisions,
            external=self.geocoder if self.options.get("useExternalLookups") else None,
            fuzzy=fuzzy,
            modes=modes,
        )

    def attempt(
        self,
        mask: np.ndarray,
        texts: pd.Series,
        way_options: Mapping[str, Any],
        geometry: np.ndarray | None = None,
        reviewed: pd.DataFrame | None = None,
        external: Geocoder | None = None,
        fuzzy: ModeFunction | None = None,
        modes: Mapping[str, ModeFunction] | None = None,
    ) -> None:
        """One way on the rows of ``mask`` still without an asset."""
        a = self.arrays
        linked, reasons, n = a["linked"], a["reasons"], self.n
        rows = np.flatnonzero(mask & ~linked)
        if rows.size == 0:
            return
        way = str(way_options.get("mode"))
        self.progress("link", int(linked.sum()), n, detail=f"{rows.size:,} rows by {way}")
        queries = pd.DataFrame({"query": texts.iloc[rows].fillna("").astype("str").to_numpy()})
        if geometry is not None:
            queries["geometry"] = geometry[rows]
        resolved = resolve(
            self.index, queries, way_options, geocoder=external, fuzzy=fuzzy,
            modes=self.modes if modes is None else modes,
        )  # fmt: skip
        result = apply_decisions(self.index, resolved, reviewed)
        found = result["asset_position"].to_numpy() >= 0
        a["asset_ids"][rows[found]] = _asset_numbers(result["asset_id"], found)
        linked[rows[found]] = True
        a["mode"][rows] = result["mode"].to_numpy(dtype=object)
        a["query"][rows] = result["query"].to_numpy(dtype=object)
        a["accuracy"][rows] = pd.to_numeric(result["accuracy"], errors="coerce").to_numpy()
        a["candidates"][rows] = result["candidates"].fillna(0).to_numpy(dtype=np.int64)
        scored = result["probability"].notna().to_numpy()
        if scored.any():
            a["probability"][rows[scored]] = result["probability"].to_numpy()[scored]
            bits = result.loc[scored, [f"evidence_{c}" for c in COMPONENTS]].round(3)
            bits.columns = list(COMPONENTS)
            a["evidence"][rows[scored]] = rounded_numbers_json(bits)
        if way_options.get("upgradeExternalLookupToInternalAsset"):
            waiting = pending_places(result)
            if len(waiting):
                self.places.append(Places(waiting.frame, _spread(waiting.row_place, rows, n)))
        missed = rows[~found]
        if missed.size:
            errors = _external_reasons(result, way_options)
            described = way + ": " + errors[~found].astype(str)
            earlier = reasons[missed]
            seen = ~pd.isna(earlier)
            described[seen] = earlier[seen].astype(str) + "; " + described[seen]
            reasons[missed] = described

    def settle(self) -> None:
        """Every way tried: a linked row has no reason, a row none could try says so."""
        a = self.arrays
        linked, reasons = a["linked"], a["reasons"]
        if self.link is None or not self.n:
            return
        self.progress("link", self.n, self.n, detail=f"{int(linked.sum()):,} linked")
        reasons[linked] = None
        untried = ~linked & pd.isna(reasons)
        reasons[untried] = "the row has nothing to find an asset by"

    def finish(self, prepared: Prepared, reference_field: str | None) -> LinkResult:
        """The link result of the per-row arrays, once settled."""
        self.settle()
        a = self.arrays
        return _result(
            self.frame, prepared, reference_field, a["asset_ids"], a["linked"], a["reasons"],
            a["mode"], a["query"], a["accuracy"], a["candidates"], a["probability"],
            a["evidence"], _by_row(self.places, self.n),
        )  # fmt: skip


def _result(
    frame: pd.DataFrame,
    prepared: Prepared,
    reference_field: str | None,
    asset_ids: np.ndarray,
    linked: np.ndarray,
    reasons: np.ndarray,
    mode: np.ndarray,
    query: np.ndarray,
    accuracy: np.ndarray,
    candidates: np.ndarray,
    probability: np.ndarray,
    evidence: np.ndarray,
    places: Places | None = None,
) -> LinkResult:
    ids = pd.Series(pd.arrays.IntegerArray(asset_ids, ~linked), index=frame.index)
    why = pd.Series(_strings(reasons), index=frame.index)
    reference = (
        prepared.values[reference_field].astype("string").to_numpy()
        if reference_field and reference_field in prepared.values
        else np.full(len(frame), None, dtype=object)
    )
    links = pd.DataFrame(
        {
            "row": frame.index.to_numpy(),
            "reference": reference,
            "query": _strings(query),
            "asset_id": ids.to_numpy(),
            "mode": _strings(mode),
            "accuracy": accuracy,
            "candidates": candidates,
            "err": why.to_numpy(),
            "probability": probability,
            "evidence": _strings(evidence),
        }
    )
    return LinkResult(asset_ids=ids, reasons=why, links=links, places=places)


def _asset_numbers(ids: pd.Series, found: np.ndarray) -> np.ndarray:
    """The ids of the ``found`` rows' assets as numbers (the index holds ids as text).

    Arrow parses them: pandas' ``to_numeric`` took ~1 us a value, about 1 s of an
    import's million rows tried way by way; an id Arrow cannot read as an integer is
    left to ``to_numeric``, as before."""
    chosen = pa.array(ids.array, type=pa.large_string(), from_pandas=True).filter(pa.array(found))
    try:
        numbers: np.ndarray = pc.cast(chosen, pa.int64()).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        parsed = pd.to_numeric(pd.Series(chosen.to_pandas()), errors="coerce")
        numbers = parsed.to_numpy().astype(np.int64)
    return numbers


def _strings(values: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """An object array of str and missing values as a ``string`` column: through Arrow at
    once (``pd.array`` converted a million links' four text columns value by value, 1.5 s
    of CPU), the same dtype and values; anything but text goes the slow way."""
    try:
        arrow = pa.array(values, type=pa.large_string(), from_pandas=True)
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return pd.array(values, dtype="string")
    return pd.arrays.ArrowStringArray(arrow)


def _external_reasons(result: pd.DataFrame, options: Mapping[str, Any]) -> np.ndarray:
    """Each row's reason, saying what became of a place found outside."""
    errors = result["err"].astype("string").to_numpy(dtype=object)
    place = result["external_longitude"].notna().to_numpy() & (
        result["asset_position"].to_numpy() < 0
    )
    found = np.flatnonzero(place)
    if found.size:  # the place columns only where some place was found outside
        label = result["external_label"].astype("string").fillna("").to_numpy(dtype=object)
        sources = result["external_source"].astype("string").fillna("external")
        source = sources.to_numpy(dtype=object)
    upgrade = bool(options.get("upgradeExternalLookupToInternalAsset"))
    for i in found:
        errors[i] = (
            f"{source[i]} found {label[i]!r}; it becomes an asset of {options.get('assetClass')}"
            if upgrade
            else f"{source[i]} found {label[i]!r}, which is no asset "
            "(upgradeExternalLookupToInternalAsset with assetClass makes it one)"
        )
    errors[pd.isna(errors)] = "no match"
    return errors


def _spread(row_place: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Per-row place numbers of an attempt's ``rows``, as positions of all ``n`` rows."""
    out = np.full(n, -1, dtype=np.int64)
    out[rows] = row_place
    return out


def _by_row(found: list[Places], n: int) -> Places | None:
    """The places of every attempt as one, numbered by row position."""
    if not found:
        return None
    frames, row_place, offset = [], np.full(n, -1, dtype=np.int64), 0
    for places in found:
        hit = places.row_place >= 0
        row_place[hit] = places.row_place[hit] + offset
        frames.append(places.frame)
        offset += len(places.frame)
    return Places(pd.concat(frames, ignore_index=True), row_place)


def join_address(parts: list[pd.Series]) -> pd.Series:
    """Join address columns with spaces, leaving out a part the address already holds.

    Officers often type the suburb into the address as well as the suburb column;
    "12 SMITH ST BUNINYONG BUNINYONG" would no longer sound like the parcel.
    """
    # On Arrow columns (a million rows: 0.7 s of CPU where numpy's strings took 1.3 s),
    # with numpy's case mapping and stripping kept where they differ from Arrow's: text
    # that is not ASCII ("Große" is "GROSSE" to numpy, "GROẞE" to Arrow) and NUL.
    address = _arrow_text(parts[0])
    for part in parts[1:]:
        addition = _arrow_text(part)
        held = _contains_folded(address, addition)
        keep = pc.and_(pc.not_equal(addition, ""), pa.array(~held))
        joined = pc.binary_join_element_wise(address, addition, pa.scalar(" ", address.type))
        address = pc.if_else(keep, joined, address)
    stripped = pc.utf8_trim_whitespace(address)
    nul = np.flatnonzero(pc.match_substring(address, "\x00").to_numpy(zero_copy_only=False))
    if nul.size:
        text = np.dtypes.StringDType()
        values = stripped.to_numpy(zero_copy_only=False).astype(object)
        values[nul] = np.strings.strip(
            address.take(pa.array(nul)).to_numpy(zero_copy_only=False).astype(text)
        ).astype(object)
        stripped = pa.array(values, type=address.type)
    joined_text = pd.Series(pd.arrays.ArrowStringArray(stripped), index=parts[0].index)
    return joined_text.mask(joined_text == "")


def _arrow_text(part: pd.Series) -> pa.Array:
    """A text column as one Arrow large_string array, missing values as ""."""
    array = pa.array(part.array, type=pa.large_string(), from_pandas=True)
    if isinstance(array, pa.ChunkedArray):
        array = array.combine_chunks()
    return pc.fill_null(array, "")


def _contains_folded(text: pa.Array, part: pa.Array) -> np.ndarray:
    """Per row: whether ``text`` holds ``part``, both in upper case as numpy folds it."""
    kind = np.dtypes.StringDType()

    def upper(values: pa.Array) -> np.ndarray:
        folded: np.ndarray = pc.utf8_upper(values).to_numpy(zero_copy_only=False).astype(kind)
        other = np.flatnonzero(~pc.string_is_ascii(values).to_numpy(zero_copy_only=False))
        if other.size:  # numpy's case mapping, where Arrow's may differ
            chosen = values.take(pa.array(other)).to_numpy(zero_copy_only=False).astype(kind)
            folded[other] = np.strings.upper(chosen)
        return folded

    held: np.ndarray = np.strings.find(upper(text), upper(part)) >= 0
    return held
