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

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import shapely

from toolkit.geocoding import Places, pending_places
from toolkit.importing.rules import ImportRule, Prepared
from toolkit.matching import AssetIndex, Geocoder, resolve
from toolkit.matching.modes import ModeFunction
from toolkit.matching.probabilistic import COMPONENTS
from toolkit.matching.review import apply_decisions
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
) -> LinkResult:
    """Link every row of ``frame`` that the rule's asset link can place. ``decisions``
    (reviewers' ``query`` -> ``asset_id``, see ``matching.review``) settle the address
    rows whose text they name, before any matcher's answer; ``geocoder`` is the address
    way's external last resort, when the rule's options ask for one. Progress counts the
    rows settled: linked, then every row once the last way has been tried. ``fuzzy``
    stands in for mode fuzzy on the address way, ``modes`` for the mode functions they name
    on every way (``resolve``)."""
    link = rule.asset_link
    n = len(frame)
    # Positional numpy arrays: each way writes its rows by position, never by label.
    asset_ids = np.zeros(n, dtype=np.int64)
    linked = np.zeros(n, dtype=bool)
    mode = np.full(n, None, dtype=object)
    query = np.full(n, None, dtype=object)
    accuracy = np.full(n, np.nan)
    candidates = np.zeros(n, dtype=np.int64)
    reasons = np.full(n, None, dtype=object)
    probability = np.full(n, np.nan)
    evidence = np.full(n, None, dtype=object)
    places: list[Places] = []

    def finish() -> LinkResult:
        """The link result of the per-row arrays as they stand."""
        return _result(
            frame,
            prepared,
            reference_field,
            asset_ids,
            linked,
            reasons,
            mode,
            query,
            accuracy,
            candidates,
            probability,
            evidence,
            _by_row(places, n),
        )

    if link is None or n == 0:
        return finish()
    options: dict[str, Any] = {"useExternalLookups": False, **link.options}
    asset_class = options.get("assetClass")

    def attempt(
        mask: np.ndarray,
        texts: pd.Series,
        way_options: Mapping[str, Any],
        geometry: np.ndarray | None = None,
        reviewed: pd.DataFrame | None = None,
        external: Geocoder | None = None,
        fuzzy: ModeFunction | None = None,
    ) -> None:
        rows = np.flatnonzero(mask & ~linked)
        if rows.size == 0:
            return
        way = str(way_options.get("mode"))
        progress("link", int(linked.sum()), n, detail=f"{rows.size:,} rows by {way}")
        queries = pd.DataFrame({"query": texts.iloc[rows].fillna("").astype("str").to_numpy()})
        if geometry is not None:
            queries["geometry"] = geometry[rows]
        resolved = resolve(index, queries, way_options, geocoder=external, fuzzy=fuzzy, modes=modes)
        result = apply_decisions(index, resolved, reviewed)
        found = result["asset_position"].to_numpy() >= 0
        ids = pd.to_numeric(result["asset_id"], errors="coerce").to_numpy()
        asset_ids[rows[found]] = ids[found].astype(np.int64)
        linked[rows[found]] = True
        mode[rows] = result["mode"].to_numpy(dtype=object)
        query[rows] = result["query"].to_numpy(dtype=object)
        accuracy[rows] = pd.to_numeric(result["accuracy"], errors="coerce").to_numpy()
        candidates[rows] = result["candidates"].fillna(0).to_numpy(dtype=np.int64)
        scored = result["probability"].notna().to_numpy()
        if scored.any():
            probability[rows[scored]] = result["probability"].to_numpy()[scored]
            bits = result.loc[scored, [f"evidence_{c}" for c in COMPONENTS]].round(3)
            bits.columns = list(COMPONENTS)
            # One JSON object per row, written by pandas on the whole frame at once.
            evidence[rows[scored]] = bits.to_json(orient="records", lines=True).splitlines()
        if way_options.get("upgradeExternalLookupToInternalAsset"):
            waiting = pending_places(result)
            if len(waiting):
                places.append(Places(waiting.frame, _spread(waiting.row_place, rows, n)))
        missed = rows[~found]
        if missed.size:
            errors = _external_reasons(result, way_options)
            described = way + ": " + errors[~found].astype(str)
            earlier = reasons[missed]
            seen = ~pd.isna(earlier)
            described[seen] = earlier[seen].astype(str) + "; " + described[seen]
            reasons[missed] = described

    ids_text = _frame_text(frame, link.id_column)
    if ids_text is not None:
        attempt(ids_text.notna().to_numpy(), ids_text, {"mode": "id", "assetClass": asset_class})
    codes = _frame_text(frame, link.lookup_column)
    if codes is not None:
        code_options = {"mode": "code", "assetClass": asset_class}
        if link.codefield:
            code_options["codeField"] = link.codefield
        attempt(codes.notna().to_numpy(), codes, code_options)
    if link.use_geometry and "geometry" in frame.columns:
        geometry = np.asarray(frame.geometry.values, dtype=object)
        has_point = ~shapely.is_missing(geometry)
        has_point[has_point] = ~shapely.is_empty(geometry[has_point])
        empty_text = pd.Series("", index=frame.index, dtype="string")
        attempt(has_point, empty_text, {"mode": "geo", "assetClass": asset_class}, geometry)
    if link.friendly_columns:
        parts = [_frame_text(frame, c) for c in link.friendly_columns]
        present = [p for p in parts if p is not None]
        if present:
            address = join_address(present)
            attempt(
                address.notna().to_numpy(),
                address,
                options,
                reviewed=decisions,
                external=geocoder if options.get("useExternalLookups") else None,
                fuzzy=fuzzy,
            )
    progress("link", n, n, detail=f"{int(linked.sum()):,} linked")
    reasons[linked] = None
    untried = ~linked & pd.isna(reasons)
    reasons[untried] = "the row has nothing to find an asset by"
    return finish()


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
    why = pd.Series(reasons, index=frame.index, dtype="string")
    reference = (
        prepared.values[reference_field].astype("string").to_numpy()
        if reference_field and reference_field in prepared.values
        else np.full(len(frame), None, dtype=object)
    )
    links = pd.DataFrame(
        {
            "row": frame.index.to_numpy(),
            "reference": reference,
            "query": pd.array(query, dtype="string"),
            "asset_id": ids.to_numpy(),
            "mode": pd.array(mode, dtype="string"),
            "accuracy": accuracy,
            "candidates": candidates,
            "err": why.to_numpy(),
            "probability": probability,
            "evidence": pd.array(evidence, dtype="string"),
        }
    )
    return LinkResult(asset_ids=ids, reasons=why, links=links, places=places)


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
