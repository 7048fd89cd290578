"""Bulk resolution of queries to assets, and the spec's response object (section 4.3).

``resolve`` is a pure function of (index, a frame of queries, options): it works on whole
columns, so it can run per chunk or per partition and the results concatenated.
``to_spec_result`` turns its frame into the spec's JSON shape; it is the only per-row loop
and exists only for output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import shapely

from toolkit.errors import MatchingError, OptionError
from toolkit.matching import accuracy as accuracy_scale
from toolkit.matching.geocoder import Geocoder, NoGeocoder
from toolkit.matching.index import AssetIndex
from toolkit.matching.modes import MODE_FUNCTIONS, ModeFunction, ModeResult, QueryBatch
from toolkit.matching.options import OUTPUTS, LookupOptions
from toolkit.matching.probabilistic import COMPONENTS
from toolkit.model.shapes import asset_json, geo_object, geo_objects, geometry_from_geo
from toolkit.progress import Progress, no_progress
from toolkit.query.filters import shown

EVIDENCE_COLUMNS = tuple(f"evidence_{c}" for c in COMPONENTS)
RESULT_COLUMNS = (
    "reference",
    "query",
    "asset_position",
    "asset_id",
    "mode",
    "accuracy",
    "candidates",
    "err",
    "external_longitude",
    "external_latitude",
    "external_label",
    # Where an external place came from and what it is called (a geocoder's optional
    # ``source``, ``place_id``, ``feature`` and ``name`` columns); with
    # upgradeExternalLookupToInternalAsset, a place no asset covers is kept here (its row
    # unmatched, its accuracy the place's) for the caller to make an asset of.
    "external_source",
    "external_id",
    "external_feature",
    "external_name",
    # Mode fuzzy's explanation of the best candidate (NaN / -1 for other modes): the asset,
    # its match probability (0-1) and the evidence in bits of each address component.
    "explained_position",
    "probability",
    *EVIDENCE_COLUMNS,
)
# Optional columns of a geocoder's answer, kept as ``external_<source|id|feature|name>``.
PLACE_COLUMNS = ("source", "place_id", "feature", "name")
CANDIDATE_COLUMNS = ("row", "rank", "asset_position", "asset_id", "mode", "score")
EMPTY_QUERY = "the query is empty"


def resolve(
    index: AssetIndex,
    queries: pd.DataFrame,
    options: LookupOptions | Mapping[str, Any] | None = None,
    *,
    geocoder: Geocoder | None = None,
    fuzzy: ModeFunction | None = None,
    modes: Mapping[str, ModeFunction] | None = None,
) -> pd.DataFrame:
    """Resolve every query; one row per query with the columns ``RESULT_COLUMNS``.

    ``queries`` has a ``query`` column (text), optionally ``reference`` (the caller's code;
    1-based row count when absent) and ``geometry`` (shapely objects for mode ``geo``).
    """
    return resolve_with_candidates(
        index, queries, options, 0, geocoder=geocoder, fuzzy=fuzzy, modes=modes
    )[0]


def resolve_with_candidates(
    index: AssetIndex,
    queries: pd.DataFrame,
    options: LookupOptions | Mapping[str, Any] | None = None,
    k: int = 5,
    *,
    geocoder: Geocoder | None = None,
    progress: Progress = no_progress,
    fuzzy: ModeFunction | None = None,
    modes: Mapping[str, ModeFunction] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``resolve`` plus, for review, the top ``k`` candidates of each query (long frame
    ``CANDIDATE_COLUMNS``, best first; ``row`` is the query's 0-based row). The answer is
    the same as ``resolve``'s: candidates never turn a tie into a match. Progress counts
    the queries settled: by the mode, then by the fallback mode. Every query is matched
    in one batch (fuzzy learns its weights from the whole batch), so this is as fine as
    it gets. ``fuzzy`` stands in for ``match_fuzzy`` (with a model fitted for the whole
    job, or noting the texts to fit it on); ``modes`` stand in for the mode functions they
    name (a job's passes over a part: ``TextRecord``, ``replayed_by_text``)."""
    options = _options(options)
    if k < 0:
        raise OptionError(f"the number of candidates is {k}; it must be 0 or more")
    if "query" not in queries.columns:
        raise MatchingError(
            f"the queries have no 'query' column; found: {', '.join(map(str, queries.columns))}"
        )
    n = len(queries)
    text = queries["query"].astype("str").reset_index(drop=True)
    geometry = _geometry(queries)
    batch = QueryBatch(text.fillna(""), geometry)
    result = ModeResult.empty(n)
    settled_by = np.full(n, None, dtype=object)
    blank = text.fillna("").str.strip().eq("").to_numpy(dtype=bool)
    if geometry is not None:
        blank = blank & shapely.is_missing(geometry)
    result.err[blank] = EMPTY_QUERY
    candidate_frames: list[pd.DataFrame] = []
    result.explained = np.full(n, -1, dtype=np.int64)
    result.probability = np.full(n, np.nan)
    result.evidence = np.full((n, len(COMPONENTS)), np.nan)

    rows = np.flatnonzero(~blank)
    progress("lookup", n - rows.size, n, unit="queries", detail=f"{rows.size:,} by {options.mode}")
    functions = {**MODE_FUNCTIONS, **({"fuzzy": fuzzy} if fuzzy else {}), **(modes or {})}
    _run(
        index, batch, options.mode, rows, options, k, result, settled_by, candidate_frames,
        functions,
    )  # fmt: skip
    if options.fallback_mode is not None:
        failed = rows[result.asset[rows] < 0]
        progress(
            "lookup",
            n - failed.size,
            n,
            unit="queries",
            detail=f"{failed.size:,} by {options.fallback_mode}",
        )
        before = result.err[failed].copy()
        _run(
            index, batch, options.fallback_mode, failed, options, k, result, settled_by,
            candidate_frames, functions,
        )  # fmt: skip
        still = result.asset[failed] < 0
        result.err[failed[still]] = [
            f"{first}; fallback {options.fallback_mode}: {second}"
            for first, second in zip(before[still], result.err[failed[still]], strict=True)
        ]
    external = _external(index, batch, rows[result.asset[rows] < 0], options, geocoder, result)
    settled_by[external["matched"]] = "external"
    progress("lookup", n, n, unit="queries")

    frame = pd.DataFrame(
        {
            "reference": _references(queries),
            "query": text,
            "asset_position": result.asset,
            "asset_id": index.assets["id"].array.take(result.asset, allow_fill=True),
            "mode": _text(settled_by),
            "accuracy": result.accuracy,
            "candidates": result.count,
            "err": _text(result.err),
            "external_longitude": external["longitude"],
            "external_latitude": external["latitude"],
            "external_label": _text(external["label"]),
            "external_source": _text(external["source"]),
            "external_id": _text(external["place_id"]),
            "external_feature": _text(external["feature"]),
            "external_name": _text(external["name"]),
            "explained_position": result.explained,
            "probability": result.probability,
            **{name: result.evidence[:, i] for i, name in enumerate(EVIDENCE_COLUMNS)},
        }
    )
    return frame, _candidates(index, candidate_frames, k)


def _text(values: np.ndarray) -> pd.api.extensions.ExtensionArray:
    """An object array of str/None as a ``str`` column; through arrow, as pd.array is slow."""
    arrow = pa.array(values, type=pa.large_string(), from_pandas=True)
    column: pd.api.extensions.ExtensionArray = arrow.to_pandas(
        types_mapper=lambda _: pd.StringDtype("pyarrow", na_value=np.nan)
    ).array
    return column


def _options(options: LookupOptions | Mapping[str, Any] | None) -> LookupOptions:
    if isinstance(options, LookupOptions):
        return options
    return LookupOptions.from_dict(options)


def _geometry(queries: pd.DataFrame) -> np.ndarray | None:
    if "geometry" not in queries.columns:
        return None
    values = np.array(queries["geometry"].array, dtype=object)
    values[shapely.is_missing(values)] = None
    return values


def _references(queries: pd.DataFrame) -> pd.Series:
    """The caller's codes as plain Python values (JSON-ready), else the 1-based count."""
    count = list(range(1, len(queries) + 1))
    if "reference" not in queries.columns:
        return pd.Series(count, dtype=object)
    values = queries["reference"].tolist()
    return pd.Series(
        [
            number if _missing(value) else _whole(value)
            for value, number in zip(values, count, strict=True)
        ],
        dtype=object,
    )


def _whole(value: Any) -> Any:
    """A code read as a float beside missing values (``10.0``) is the integer it was."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and np.isnan(value)) or value is pd.NA


def _run(
    index: AssetIndex,
    batch: QueryBatch,
    mode: str,
    rows: np.ndarray,
    options: LookupOptions,
    k: int,
    result: ModeResult,
    modes: np.ndarray,
    candidate_frames: list[pd.DataFrame],
    functions: Mapping[str, ModeFunction] = MODE_FUNCTIONS,
) -> None:
    """Run ``mode`` (its function in ``functions``) on batch ``rows`` and write what it
    settles into ``result``."""
    if mode == "auto":
        # The spec: code when the trimmed input has no inner space, otherwise soundex.
        single_word = ~batch.text.iloc[rows].str.strip().str.contains(r"\s").to_numpy(dtype=bool)
        for way, chosen in (("code", single_word), ("soundex", ~single_word)):
            _run(
                index, batch, way, rows[chosen], options, k, result, modes, candidate_frames,
                functions,
            )  # fmt: skip
        return
    if not len(rows):
        return
    sub = functions[mode](index, batch.take(rows), options, k)
    result.asset[rows] = sub.asset
    result.count[rows] = sub.count
    result.accuracy[rows] = sub.accuracy
    result.err[rows] = sub.err
    modes[rows[sub.asset >= 0]] = mode
    if sub.explained is not None:
        assert result.explained is not None and sub.probability is not None
        assert result.probability is not None and result.evidence is not None
        result.explained[rows] = sub.explained
        result.probability[rows] = sub.probability
        result.evidence[rows] = sub.evidence
    if k and len(sub.candidates):
        found = sub.candidates.assign(
            row=rows[sub.candidates["query"].to_numpy(dtype=np.int64)], mode=mode
        )
        candidate_frames.append(found.drop(columns="query"))


def _external(
    index: AssetIndex,
    batch: QueryBatch,
    rows: np.ndarray,
    options: LookupOptions,
    geocoder: Geocoder | None,
    result: ModeResult,
) -> dict[str, np.ndarray]:
    """The last resort of the spec: an external geocoder for rows still without an asset.

    With ``upgradeExternalLookupToInternalAsset`` the geocoded point is matched (mode
    ``geo``, limited to ``assetClass``) to the asset that covers it; where none does, the
    place is still returned (row unmatched), so a caller that can write may make it one.
    """
    n = len(batch)
    out: dict[str, np.ndarray] = {
        "longitude": np.full(n, np.nan),
        "latitude": np.full(n, np.nan),
        "label": np.full(n, None, dtype=object),
        "matched": np.zeros(n, dtype=bool),
        **{name: np.full(n, None, dtype=object) for name in PLACE_COLUMNS},
    }
    rows = rows[batch.text.iloc[rows].str.strip().ne("").to_numpy(dtype=bool)]
    if not options.use_external_lookups or not len(rows):
        return out
    found = (geocoder or NoGeocoder()).geocode(
        batch.text.iloc[rows].reset_index(drop=True), options.geocoder_options
    )
    lon = found["longitude"].to_numpy(dtype=float)
    lat = found["latitude"].to_numpy(dtype=float)
    hit = ~np.isnan(lon) & ~np.isnan(lat)
    missed = rows[~hit]
    result.err[missed] = [
        f"{first}; external lookup: {second}"
        for first, second in zip(result.err[missed], found["err"].to_numpy()[~hit], strict=True)
    ]
    hit_rows = rows[hit]
    out["longitude"][hit_rows] = lon[hit]
    out["latitude"][hit_rows] = lat[hit]
    out["label"][hit_rows] = found["label"].to_numpy(dtype=object)[hit]
    for name in PLACE_COLUMNS:
        if name in found.columns:
            out[name][hit_rows] = found[name].to_numpy(dtype=object)[hit]
    # The place's accuracy, also where an upgrade finds no asset (the caller may make one).
    result.accuracy[hit_rows] = found["accuracy"].to_numpy(dtype=float)[hit]
    if options.upgrade_external_lookup_to_internal_asset:
        points = QueryBatch(batch.text.iloc[hit_rows], shapely.points(lon[hit], lat[hit]))
        upgraded = MODE_FUNCTIONS["geo"](index, points, options, 0)
        won = upgraded.asset >= 0
        result.asset[hit_rows[won]] = upgraded.asset[won]
        result.count[hit_rows[won]] = 1
        result.err[hit_rows[won]] = None
        result.err[hit_rows[~won]] = [
            f"{first}; external lookup found a place but no {options.asset_class} asset: {e}"
            for first, e in zip(result.err[hit_rows[~won]], upgraded.err[~won], strict=True)
        ]
        out["matched"][hit_rows[won]] = True
        # An upgraded row's answer is its asset; the place stays only where none covers it.
        for name in ("longitude", "latitude"):
            out[name][hit_rows[won]] = np.nan
        for name in ("label", *PLACE_COLUMNS):
            out[name][hit_rows[won]] = None
        return out
    result.err[hit_rows] = None
    out["matched"][hit_rows] = True
    return out


def _candidates(index: AssetIndex, frames: list[pd.DataFrame], k: int) -> pd.DataFrame:
    if not frames:
        return pd.DataFrame({name: [] for name in CANDIDATE_COLUMNS})
    found = pd.concat(frames, ignore_index=True)
    found["asset"] = found["asset"].astype(np.int64)
    found = found.sort_values(["row", "score"], ascending=[True, False], kind="stable")
    found = found.drop_duplicates(["row", "asset"])
    found["rank"] = found.groupby("row").cumcount() + 1
    found = found[found["rank"] <= k].reset_index(drop=True)
    ids = index.assets["id"].to_numpy(dtype=object)[found["asset"].to_numpy()]
    return pd.DataFrame(
        {
            "row": found["row"].astype(np.int64),
            "rank": found["rank"].astype(np.int64),
            "asset_position": found["asset"],
            "asset_id": pd.array(ids, dtype="str"),
            "mode": pd.array(found["mode"].to_numpy(dtype=object), dtype="str"),
            "score": found["score"].astype(float),
        }
    )


# --- the spec's response object ---------------------------------------------------------


QUERY_ITEM_FIELDS = ("code", "str", "geo")


def queries_from_spec(items: Sequence[Any]) -> pd.DataFrame:
    """The POST body's ``query`` array (``[{code, str}]`` or ``[{code, geo}]``) as queries.

    ``code`` is the caller's reference (text or a number), ``str`` the text to look
    up, ``geo`` a spec geo object (for mode ``geo``); an item needs ``str`` or ``geo``.
    """
    texts: list[str | None] = []
    codes: list[Any] = []
    geometries: list[Any] = []
    for i, item in enumerate(items):
        where = f"query[{i}]"
        if not isinstance(item, Mapping):
            raise MatchingError(
                f"{where} is not an object; each item is {{code, str}} or {{code, geo}}"
            )
        unknown = sorted(set(item) - set(QUERY_ITEM_FIELDS))
        if unknown:
            raise MatchingError(
                f"{where} has unknown field(s) {', '.join(unknown)}; known: "
                + ", ".join(QUERY_ITEM_FIELDS)
            )
        text, code, geo = item.get("str"), item.get("code"), item.get("geo")
        if text is None and geo is None:
            raise MatchingError(f"{where} has neither 'str' (text to look up) nor 'geo'")
        if text is not None and not isinstance(text, str):
            raise MatchingError(f"{where}.str {shown(text)} is not text")
        if code is not None and (
            isinstance(code, bool)
            or not isinstance(code, str | int | float)
            or (isinstance(code, float) and not np.isfinite(code))
        ):
            raise MatchingError(f"{where}.code {shown(code)} is not text or a number")
        texts.append(text)
        codes.append(code)
        geometries.append(None if geo is None else geometry_from_geo(geo, f"{where}.geo"))
    frame = pd.DataFrame({"query": pd.array(texts, dtype="str")})
    if any("code" in item for item in items):
        frame["reference"] = pd.Series(codes, dtype=object)
    if any(g is not None for g in geometries):
        frame["geometry"] = pd.Series(np.array(geometries, dtype=object), dtype=object)
    return frame


def to_spec_result(
    index: AssetIndex, resolved: pd.DataFrame, output: str = "asset"
) -> dict[str, dict[str, Any]]:
    """The spec's response: ``{reference: {reference, query, asset, err}}``.

    ``asset`` is the asset object (``output="asset"``), its id (``output="id"``), or None.
    References must be unique once written as text (they become the object's keys).
    """
    if output not in OUTPUTS:
        raise OptionError(f"output is {output!r}; allowed: {', '.join(OUTPUTS)}")
    keys = resolved["reference"].map(str)
    duplicated = keys[keys.duplicated()].unique().tolist()
    if duplicated:
        raise MatchingError(
            f"query codes must be unique; repeated: {', '.join(map(repr, duplicated[:5]))}"
        )
    response: dict[str, dict[str, Any]] = {}
    positions = resolved["asset_position"].to_numpy()
    geos: dict[int, dict[str, list[Any]]] = {}
    if output == "asset":
        matched = np.unique(positions[positions >= 0])
        geos = dict(zip(matched.tolist(), geo_objects(index.geometries(matched)), strict=True))
    for record in resolved.to_dict("records"):
        reference = record["reference"]
        asset: Any = None
        if record["asset_position"] >= 0:
            position = int(record["asset_position"])
            asset = (
                str(index.output_column("id")[position])
                if output == "id"
                else asset_object(index, position, record["accuracy"], geos[position])
            )
        elif (
            output == "asset"
            and not pd.isna(record["external_longitude"])
            and pd.isna(record["err"])
        ):
            asset = external_asset_object({str(k): v for k, v in record.items()})
        response[str(reference)] = {
            "reference": reference,
            "query": "" if _missing(record["query"]) else record["query"],
            "asset": asset,
            "err": None if pd.isna(record["err"]) else record["err"],
        }
    return response


def explanations(index: AssetIndex, resolved: pd.DataFrame) -> list[dict[str, Any] | None]:
    """Per row of ``resolve``'s frame, mode fuzzy's explanation of its best candidate
    (linked or not), else None: ``{assetId, probability, evidence: {component: bits}}``.
    The bits add up to the candidate's total evidence against a random asset."""
    positions = resolved["explained_position"].to_numpy()
    probability = resolved["probability"].to_numpy()
    evidence = resolved[list(EVIDENCE_COLUMNS)].to_numpy()
    ids = index.output_column("id")
    out: list[dict[str, Any] | None] = []
    for position, p, bits in zip(positions, probability, evidence, strict=True):
        if position < 0 or np.isnan(p):
            out.append(None)
            continue
        out.append(
            {
                "assetId": None if ids[position] is None else str(ids[position]),
                "probability": round(float(p), 4),
                "evidence": {c: round(float(b), 2) for c, b in zip(COMPONENTS, bits, strict=True)},
            }
        )
    return out


def asset_object(
    index: AssetIndex,
    position: int,
    accuracy: float | None,
    geo: dict[str, list[Any]] | None = None,
) -> dict[str, Any]:
    """One asset of the index in the shape of spec 2.2 (see ``toolkit.model.shapes``)."""

    def text(name: str) -> str | None:
        value = index.output_column(name)[position]
        return None if value is None else str(value)

    fields = {
        name: text(name)
        for name in (
            "id",
            "type",
            "code",
            "regionId",
            "source",
            "friendly",
            "name",
            "friendlyType",
            "infoLabel",
            "infoUrl",
            "regionName",
        )
    }
    extra = {key: text(f"extra:{key}") for key in index.extra_fields}
    return asset_json(
        fields,
        geo_object(index.geometries(np.array([position]))[0]) if geo is None else geo,
        extra,
        None if accuracy is None or pd.isna(accuracy) else accuracy_scale.as_text(accuracy),
    )


def external_asset_object(record: Mapping[str, Any]) -> dict[str, Any]:
    """A geocoder result that is not an asset, in the asset shape: ``source`` is where it
    came from (``external`` when the geocoder does not say), ``code`` the place's id
    there, ``friendlyType`` its feature (premise, street...), ``name`` what it is called
    and ``friendly`` its label."""

    def text(name: str) -> str | None:
        value = record.get(name)
        return None if value is None or pd.isna(value) else str(value)

    label = text("external_label")
    point = {
        "longitude": repr(float(record["external_longitude"])),
        "latitude": repr(float(record["external_latitude"])),
    }
    accuracy = record["accuracy"]
    return asset_json(
        {
            "id": None,
            "name": text("external_name") or label or "",
            "friendly": label or "",
            "source": text("external_source") or "external",
            "code": text("external_id"),
            "friendlyType": text("external_feature"),
        },
        {"points": [point], "polygons": [], "linestrings": []},
        {},
        None if pd.isna(accuracy) else accuracy_scale.as_text(accuracy),
    )


def checked_options(
    index: AssetIndex, options: LookupOptions | Mapping[str, Any] | None
) -> LookupOptions:
    """A lookup request's options, refusing an ``assetClass`` no asset of the index has
    (compared as :meth:`AssetIndex.allowed` does): a mistyped class is an error listing the
    classes, not every query unmatched. Imports do not check: their rule names the class,
    and a site without those assets yet leaves rows unlinked."""
    options = _options(options)
    wanted = options.asset_class
    if wanted is not None:
        classes = index.classes()
        if wanted.strip().upper() not in {c.strip().upper() for c in classes}:
            raise OptionError(
                f"assetClass {wanted!r} is not a class of the assets; classes: "
                + (", ".join(classes[:40]) or "none (there are no assets)")
                + (f" and {len(classes) - 40} more" if len(classes) > 40 else "")
            )
    return options


def lookup_one(
    index: AssetIndex,
    query: str,
    options: LookupOptions | Mapping[str, Any] | None = None,
    output: str = "asset",
    *,
    geocoder: Geocoder | None = None,
) -> dict[str, dict[str, Any]]:
    """The single-query GET form: the spec's response object for one query (key ``"1"``)."""
    options = checked_options(index, options)
    frame = pd.DataFrame({"query": pd.array([query], dtype="str")})
    return to_spec_result(index, resolve(index, frame, options, geocoder=geocoder), output)
