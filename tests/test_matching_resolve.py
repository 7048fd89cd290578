from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import shapely
from matching_assets import SHARED_EDGE_LON, asset_frame, queries

from toolkit.errors import MatchingError, OptionError
from toolkit.matching import (
    RESULT_COLUMNS,
    AssetIndex,
    checked_options,
    lookup_one,
    modes,
    pairing_process,
    probabilistic,
    queries_from_spec,
    resolve,
    resolve_with_candidates,
    to_spec_result,
)
from toolkit.matching.blocking import KeyGroups
from toolkit.matching.geocoder import OFFLINE, NoGeocoder
from toolkit.own_process import start_main

OFF = {"useExternalLookups": False}


@pytest.fixture(scope="module")
def index() -> AssetIndex:
    return AssetIndex.from_frame(asset_frame())


def answers(index: AssetIndex, texts: list[str], **options: Any) -> list[tuple[Any, ...]]:
    result = resolve(index, queries(*texts), {**OFF, **options})
    return [
        (None if pd.isna(asset) else asset, None if pd.isna(score) else score, int(count))
        for asset, score, count in zip(
            result["asset_id"], result["accuracy"], result["candidates"], strict=True
        )
    ]


def plain(values: pd.Series) -> list[Any]:
    return [None if pd.isna(value) else value for value in values]


def errors(index: AssetIndex, texts: list[str], **options: Any) -> list[str | None]:
    result = resolve(index, queries(*texts), {**OFF, **options})
    return result["err"].astype(object).where(result["err"].notna(), None).tolist()


# --- id and code ------------------------------------------------------------------------


def test_mode_id_is_trimmed_and_case_insensitive(index: AssetIndex) -> None:
    assert answers(index, [" a3 ", "A99"], mode="id") == [("A3", 100.0, 1), (None, None, 0)]
    assert errors(index, ["A99"], mode="id") == ["no asset has this id"]


def test_mode_code_with_code_field(index: AssetIndex) -> None:
    assert answers(index, ["005123", "77", "c1"], mode="code", codeField="propnum") == [
        ("A1", 100.0, 1),
        ("A3", 100.0, 1),
        (None, None, 0),
    ]
    assert answers(index, ["v-1"], mode="code", codeField="valnum") == [("A1", 100.0, 1)]


def test_mode_code_without_code_field_searches_every_code_but_not_the_id(
    index: AssetIndex,
) -> None:
    assert answers(index, ["C1", "77", "V-1", "A1"], mode="code") == [
        ("A1", 100.0, 1),
        ("A3", 100.0, 1),
        ("A1", 100.0, 1),
        (None, None, 0),
    ]


def test_leading_zeros_match_only_when_unambiguous(index: AssetIndex) -> None:
    # "42" = "0042" (one asset); "5123" exists as is; "05123" equals both 005123 and 5123.
    assert answers(index, ["42", "5123", "05123"], mode="code", codeField="propnum") == [
        ("A7", 95.0, 1),
        ("A5", 100.0, 1),
        (None, None, 2),
    ]
    assert errors(index, ["05123"], mode="code", codeField="propnum") == [
        "2 assets tied on code field propnum (ignoring leading zeros); none chosen"
    ]


def test_unknown_code_field_names_the_known_ones(index: AssetIndex) -> None:
    with pytest.raises(OptionError) as caught:
        resolve(index, queries("1"), {"mode": "code", "codeField": "nope"})
    assert str(caught.value) == (
        "option codeField is 'nope'; this asset index has the code fields: "
        "id, code, propnum, valnum"
    )


# --- names ------------------------------------------------------------------------------


def test_mode_name_matches_name_or_code(index: AssetIndex) -> None:
    assert answers(
        index, ["12 smith st richmond", "c3", "12 Smith Rd", "12 smyth st richmond"], mode="name"
    ) == [("A1", 100.0, 1), ("A3", 100.0, 1), ("A2", 100.0, 1), (None, None, 0)]


def test_mode_contains(index: AssetIndex) -> None:
    result = answers(index, ["cafe", "high street", "twin"], mode="contains")
    assert result[0] == ("A7", pytest.approx(100 * 4 / len("5 CAFE LANE FITZROY")), 1)
    assert result[1] == (None, None, 2)
    assert result[2] == (None, None, 2)
    assert errors(index, ["twin"], mode="contains") == [
        "2 asset names contain this text; none chosen"
    ]


def test_soundex_ranks(index: AssetIndex) -> None:
    texts = ["12 Smith St Richmond", "12 Smyth St Richmond", "Smith 12 St Richmond"]
    assert answers(index, texts, mode="soundex", maxRank=1) == [
        ("A1", 100.0, 1),
        (None, None, 0),
        (None, None, 0),
    ]
    assert answers(index, texts, mode="soundex", maxRank=2) == [
        ("A1", 100.0, 1),
        ("A1", 90.0, 1),
        (None, None, 0),
    ]
    assert answers(index, texts, mode="soundex", maxRank=3) == [
        ("A1", 100.0, 1),
        ("A1", 90.0, 1),
        ("A1", 80.0, 1),
    ]


def test_soundex_compares_house_numbers_exactly(index: AssetIndex) -> None:
    assert answers(index, ["13 Smith St Richmond"], mode="soundex", maxRank=3) == [(None, None, 0)]


def test_missing_locality_is_a_tie_when_two_localities_have_the_street(
    index: AssetIndex,
) -> None:
    assert answers(index, ["12 Smith St", "12 Smith Rd"], mode="soundex") == [
        (None, None, 2),
        ("A2", 100.0, 1),
    ]
    assert errors(index, ["12 Smith St"], mode="soundex") == [
        "2 assets tied on soundex rank 1; none chosen"
    ]


def test_same_name_twice_is_a_tie_not_a_guess(index: AssetIndex) -> None:
    for mode in ("soundex", "name", "fuzzy"):
        assert answers(index, ["7 Twin Ct Carlton"], mode=mode) == [(None, None, 2)]


def test_unit_forms_match_the_unit_not_the_building(index: AssetIndex) -> None:
    texts = ["1/14 High St Richmond", "Unit 1 14 High Street", "U1 14 HIGH ST", "14 High St"]
    assert answers(index, texts, mode="soundex") == [
        ("A3", 100.0, 1),
        ("A3", 100.0, 1),
        ("A3", 100.0, 1),
        ("A4", 100.0, 1),
    ]


def test_non_ascii_names_match_with_or_without_accents(index: AssetIndex) -> None:
    assert answers(index, ["5 café lane fitzroy", "5 CAFE LN"], mode="soundex") == [
        ("A7", 100.0, 1),
        ("A7", 100.0, 1),
    ]


def test_postcode_that_differs_vetoes_the_match(index: AssetIndex) -> None:
    assert answers(index, ["12 Smith St Richmond 3121", "12 Smith St Richmond 3000"]) == [
        ("A1", 100.0, 1),
        (None, None, 1),
    ]
    assert errors(index, ["12 Smith St Richmond 3000"]) == [
        "the only candidate has a different postcode"
    ]


def test_inactive_assets_are_never_returned(index: AssetIndex) -> None:
    assert answers(index, ["3 Old Rd Kew"], mode="soundex") == [(None, None, 0)]
    assert answers(index, ["A9"], mode="id") == [(None, None, 0)]


def test_fuzzy_resolves_typos_soundex_cannot(index: AssetIndex) -> None:
    assert answers(index, ["12 Smiyh St Richmond"], mode="soundex", maxRank=3) == [(None, None, 0)]
    # accuracy is the match probability x 100
    assert answers(index, ["12 Smiyh St Richmond"], mode="fuzzy") == [("A1", 98.7, 1)]


def test_fuzzy_finds_a_typo_in_the_first_letter(index: AssetIndex) -> None:
    assert answers(index, ["12 Xmith St Richmond"], mode="fuzzy") == [("A1", 96.8, 1)]


def test_fuzzy_abstains_when_the_evidence_is_weak(index: AssetIndex) -> None:
    # The postcode disagrees: the best candidate is no longer likely enough.
    assert answers(index, ["12 Smith St Richmond 3000"], mode="fuzzy") == [(None, None, 1)]
    assert errors(index, ["12 Smith St Richmond 3000"], mode="fuzzy") == [
        "the best candidate is 68% likely, below the 80% needed to link"
    ]


# --- auto, fallback, class, empty input -------------------------------------------------


def test_auto_uses_code_for_one_word_and_soundex_otherwise(index: AssetIndex) -> None:
    result = resolve(index, queries("  005123 ", "12 Smith St Richmond", "C3"), {"mode": "auto"})
    assert result["asset_id"].tolist() == ["A1", "A1", "A3"]
    assert result["mode"].tolist() == ["code", "soundex", "code"]


def test_digits_only_input(index: AssetIndex) -> None:
    assert answers(index, ["0042"], mode="auto") == [("A7", 100.0, 1)]
    assert answers(index, ["0042"], mode="soundex") == [(None, None, 0)]


def test_fallback_runs_only_on_rows_the_first_mode_did_not_match(index: AssetIndex) -> None:
    result = resolve(
        index,
        queries("12 Smith St Richmond", "12 Smiyh St Richmond", "99 Nowhere St"),
        {"mode": "soundex", "fallbackMode": "fuzzy", **OFF},
    )
    assert plain(result["asset_id"]) == [
        "A1",
        "A1",
        None,
    ]
    assert plain(result["mode"]) == [
        "soundex",
        "fuzzy",
        None,
    ]
    assert result["err"].iloc[2] == (
        "no asset name sounds like this (soundex, maxRank 2); "
        "fallback fuzzy: no asset shares a number, street or locality with this address (fuzzy)"
    )


def test_asset_class_limits_candidates(index: AssetIndex) -> None:
    point = "-37.0005, 144.0005"  # the hydrant's point, inside parcel A1
    assert answers(index, [point], mode="geo") == [(None, None, 2)]
    assert answers(index, [point], mode="geo", assetClass="hydrant") == [("A8", 100.0, 1)]
    assert answers(index, [point], mode="geo", assetClass="Property") == [("A1", 100.0, 1)]
    assert answers(index, ["C1"], mode="code", assetClass="Hydrant") == [(None, None, 0)]


@pytest.mark.parametrize("text", ["", "   ", "\t"])
def test_empty_and_whitespace_queries(index: AssetIndex, text: str) -> None:
    result = resolve(index, queries(text), {"mode": "auto"})
    assert result.loc[0, "err"] == "the query is empty"
    assert result.loc[0, "asset_position"] == -1


# --- geo ------------------------------------------------------------------------------


def test_geo_point_inside_on_shared_boundary_and_outside(index: AssetIndex) -> None:
    points = [
        shapely.Point(144.0002, -37.0005),
        shapely.Point(SHARED_EDGE_LON, -37.0005),
        shapely.Point(150.0, -30.0),
        shapely.Point(144.045, -37.0445),  # inside A7's hole
    ]
    frame = pd.DataFrame({"query": "", "geometry": points})
    result = resolve(index, frame, {"mode": "geo", **OFF})
    assert plain(result["asset_id"]) == [
        "A1",
        None,
        None,
        None,
    ]
    assert result["candidates"].tolist() == [1, 2, 0, 0]
    assert result["err"].tolist()[1:] == [
        "2 assets cover this location; none chosen",
        "no asset covers this location",
        "no asset covers this location",
    ]


def test_geo_indexing_the_points_gives_the_same_answers(
    index: AssetIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = [
        "-37.0005, 144.0002",
        f"-37.0005, {SHARED_EDGE_LON}",
        "-37.0005, 144.0005",
        "-30, 150",
        "POINT (144.0105 -37.0105)",
        "POINT (144.07 -37.07)",
    ]
    frame = queries(*texts)
    for asset_class in (None, "Hydrant"):
        options = {"mode": "geo", "assetClass": asset_class, **OFF}
        probing = resolve(index, frame, options)
        monkeypatch.setattr(modes, "INVERSE_GEO_MIN", 0)
        indexing = resolve(index, frame, options)
        monkeypatch.undo()
        pd.testing.assert_frame_equal(indexing, probing)
    assert plain(probing["asset_id"]) == [None, None, "A8", None, None, None]
    assert plain(resolve(index, frame, {"mode": "geo", **OFF})["asset_id"]) == [
        "A1",
        None,
        None,
        None,
        "A3",
        "A10",
    ]


def test_geo_reads_wkt_and_polygon_queries(index: AssetIndex) -> None:
    texts = [
        "POINT (144.0105 -37.0105)",
        "POLYGON ((144.0101 -37.0109, 144.0109 -37.0109, "
        "144.0109 -37.0101, 144.0101 -37.0101, 144.0101 -37.0109))",
        "not a place",
    ]
    assert answers(index, texts, mode="geo") == [
        ("A3", 100.0, 1),
        ("A3", 100.0, 1),
        (None, None, 0),
    ]
    assert errors(index, ["not a place"], mode="geo") == [
        "the query has no location (a geometry, WKT or 'latitude, longitude')"
    ]


def test_assets_without_geometry_match_by_name_but_never_by_place(index: AssetIndex) -> None:
    assert answers(index, ["14 High St"], mode="soundex") == [("A4", 100.0, 1)]
    assert int(index.tree[1].size) == 9 and 3 not in index.tree[1]


# --- candidates for review --------------------------------------------------------------


def test_candidates_list_the_tie_without_changing_the_answer(index: AssetIndex) -> None:
    frame = queries("7 Twin Ct Carlton", "12 Smith St Richmond")
    plain = resolve(index, frame, {"mode": "fuzzy", **OFF})
    result, candidates = resolve_with_candidates(index, frame, {"mode": "fuzzy", **OFF}, 3)
    pd.testing.assert_frame_equal(result, plain)
    # Scores are match probabilities x 100: the twins share theirs.
    assert candidates[["row", "rank", "asset_id", "score"]].values.tolist() == [
        [0, 1, "A5", 50.0],
        [0, 2, "A6", 50.0],
        [1, 1, "A1", 92.8],
        [1, 2, "A10", 4.0],
        [1, 3, "A8", 2.3],
    ]


# --- external geocoder seam -------------------------------------------------------------


class FakeGeocoder:
    """The one allowed stand-in: an external geocoder that knows one place."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Mapping[str, Any]]] = []

    def geocode(self, queries: pd.Series, options: Mapping[str, Any]) -> pd.DataFrame:
        self.calls.append((queries.tolist(), dict(options)))
        known = queries.str.contains("Town Hall").to_numpy(dtype=bool)
        return pd.DataFrame(
            {
                "longitude": np.where(known, 144.0002, np.nan),
                "latitude": np.where(known, -37.0005, np.nan),
                "label": np.where(known, "Richmond Town Hall", None),
                "accuracy": np.where(known, 70.0, np.nan),
                "err": np.where(known, None, "not found"),
            }
        )


def test_offline_external_lookup_says_so(index: AssetIndex) -> None:
    result = resolve(index, queries("Richmond Town Hall"), {"mode": "soundex"})
    assert result.loc[0, "err"] == (
        f"no asset name sounds like this (soundex, maxRank 2); external lookup: {OFFLINE}"
    )
    assert NoGeocoder().geocode(pd.Series(["x"]), {})["err"].tolist() == [OFFLINE]


def test_external_geocoder_result_and_upgrade(index: AssetIndex) -> None:
    geocoder = FakeGeocoder()
    options = {"mode": "soundex", "geocoderOptions": {"requiredFeatures": ["premise"]}}
    result = resolve(index, queries("Richmond Town Hall", "Nowhere"), options, geocoder=geocoder)
    assert geocoder.calls == [
        (["Richmond Town Hall", "Nowhere"], {"requiredFeatures": ["premise"]})
    ]
    assert result["mode"].tolist()[0] == "external"
    assert result.loc[0, "asset_position"] == -1
    assert (result.loc[0, "external_longitude"], result.loc[0, "external_label"]) == (
        144.0002,
        "Richmond Town Hall",
    )
    entry = to_spec_result(index, result)["1"]
    assert entry["asset"]["source"] == "external"
    assert entry["asset"]["geo"]["points"] == [{"longitude": "144.0002", "latitude": "-37.0005"}]
    upgraded = resolve(
        index,
        queries("Richmond Town Hall"),
        {**options, "assetClass": "Property", "upgradeExternalLookupToInternalAsset": True},
        geocoder=geocoder,
    )
    assert (upgraded.loc[0, "asset_id"], upgraded.loc[0, "accuracy"]) == ("A1", 70.0)


def test_upgrade_without_asset_class_is_an_error(index: AssetIndex) -> None:
    with pytest.raises(OptionError, match="upgradeExternalLookupToInternalAsset requires"):
        resolve(index, queries("x"), {"upgradeExternalLookupToInternalAsset": True})


# --- the spec's result object -----------------------------------------------------------


def test_result_frame_columns(index: AssetIndex) -> None:
    assert tuple(resolve(index, queries("x")).columns) == RESULT_COLUMNS


def test_spec_result_keys_by_code_or_count_and_asset_shape(index: AssetIndex) -> None:
    items = [{"code": "r-1", "str": "12 Smith St Richmond"}, {"code": 7, "str": "nothing here"}]
    frame = queries_from_spec(items)
    response = to_spec_result(index, resolve(index, frame, OFF), output="asset")
    assert list(response) == ["r-1", "7"]
    assert response["7"] == {
        "reference": 7,
        "query": "nothing here",
        "asset": None,
        "err": "no asset name sounds like this (soundex, maxRank 2)",
    }
    assert response["r-1"]["reference"] == "r-1"
    assert response["r-1"]["asset"] == {
        "id": "A1",
        "type": "Property",
        "code": "C1",
        "regionId": "R1",
        "geo": {
            "points": [],
            "polygons": [
                [
                    [
                        {"longitude": "144.001", "latitude": "-37.001"},
                        {"longitude": "144.001", "latitude": "-37.0"},
                        {"longitude": "144.0", "latitude": "-37.0"},
                        {"longitude": "144.0", "latitude": "-37.001"},
                        {"longitude": "144.001", "latitude": "-37.001"},
                    ]
                ]
            ],
            "linestrings": [],
        },
        "source": "internal",
        "accuracy": "100",
        "friendly": "12 Smith Street, Richmond",
        "name": "12 Smith Street, Richmond VIC 3121",
        "friendlyType": "Property",
        "extraInfo": [{"key": "propnum", "value": "005123"}, {"key": "valnum", "value": "V-1"}],
        "infoLabel": None,
        "infoUrl": None,
        "regionName": None,
    }


def test_spec_result_is_plain_json_and_codes_must_be_unique(index: AssetIndex) -> None:
    frame = pd.DataFrame({"reference": [10, None, 12], "query": ["A1", "c3", "nothing"]})
    response = to_spec_result(index, resolve(index, frame, {"mode": "auto"}))
    assert list(response) == ["10", "2", "12"]
    assert json.loads(json.dumps(response))["2"]["asset"]["id"] == "A3"
    assert type(response["10"]["reference"]) is int
    frame = pd.DataFrame({"reference": ["x", "x"], "query": ["A1", "A2"]})
    with pytest.raises(MatchingError, match="query codes must be unique; repeated: 'x'"):
        to_spec_result(index, resolve(index, frame, {"mode": "id"}))


def test_empty_batch_and_empty_index() -> None:
    empty = AssetIndex.from_frame(pd.DataFrame({"id": pd.Series([], dtype="str"), "name": []}))
    for mode in ("soundex", "code", "geo", "fuzzy", "contains", "name", "id"):
        result = resolve(empty, queries("12 Smith St"), {"mode": mode, **OFF})
        assert result.loc[0, "asset_position"] == -1
    assert len(resolve(empty, queries(), OFF)) == 0


def test_spec_result_without_codes_counts_from_one_and_output_id(index: AssetIndex) -> None:
    response = to_spec_result(index, resolve(index, queries("A3", "A1"), {"mode": "id"}), "id")
    assert response == {
        "1": {"reference": 1, "query": "A3", "asset": "A3", "err": None},
        "2": {"reference": 2, "query": "A1", "asset": "A1", "err": None},
    }


def test_geo_object_of_points_lines_and_holes(index: AssetIndex) -> None:
    hydrant = lookup_one(index, "A8", {"mode": "id"})["1"]["asset"]
    assert hydrant["geo"] == {
        "points": [{"longitude": "144.0005", "latitude": "-37.0005"}],
        "polygons": [],
        "linestrings": [],
    }
    line = lookup_one(index, "A10", {"mode": "id"})["1"]["asset"]["geo"]
    assert line["linestrings"] == [
        [
            {"longitude": "144.07", "latitude": "-37.07"},
            {"longitude": "144.08", "latitude": "-37.08"},
        ]
    ]
    holed = lookup_one(index, "A7", {"mode": "id"})["1"]["asset"]["geo"]["polygons"]
    assert [len(ring) for ring in holed[0]] == [5, 4]
    no_geometry = lookup_one(index, "A4", {"mode": "id"})["1"]["asset"]["geo"]
    assert no_geometry == {"points": [], "polygons": [], "linestrings": []}


def test_bad_output_and_bad_queries(index: AssetIndex) -> None:
    with pytest.raises(OptionError, match="output is 'xml'; allowed: asset, id"):
        lookup_one(index, "A1", output="xml")
    with pytest.raises(MatchingError, match="no 'query' column"):
        resolve(index, pd.DataFrame({"text": ["x"]}))
    with pytest.raises(MatchingError, match=r"query\[1\] has neither 'str'"):
        queries_from_spec([{"str": "a"}, {"code": 1}])
    with pytest.raises(MatchingError, match=r"query\[0\].code \{'a': 1\} is not text or a number"):
        queries_from_spec([{"str": "a", "code": {"a": 1}}])
    with pytest.raises(MatchingError, match=r"query\[0\].str 5 is not text"):
        queries_from_spec([{"str": 5}])
    with pytest.raises(OptionError, match=r"query\[0\].geo.points\[0\].latitude 'x'"):
        queries_from_spec([{"geo": {"points": [{"longitude": "145", "latitude": "x"}]}}])


def test_fuzzy_model_fitted_once_makes_parts_match_as_one_batch(index: AssetIndex) -> None:
    """The texts mode fuzzy is given in each part (after the fallback's first mode),
    fitted once, give every part the whole batch's probabilities; each part fitting its
    own model does not."""
    texts = [
        "12 Smiyh St Richmond", "12 Smith St Richmond", "12 Xmith St Richmond",
        "14 Smith Street", "12 Smiyh St Richmond", "3 Nowhere Rd", "12 Smith St Richmond 3000",
    ]  # fmt: skip
    options = {**OFF, "mode": "soundex", "fallbackMode": "fuzzy"}
    whole = resolve(index, queries(*texts), options)
    parts = [queries(*texts[:3]), queries(*texts[3:])]
    noted = modes.FuzzyTexts()
    for part in parts:
        resolve(index, part, options, fuzzy=noted)
    # Only what soundex left, each text once, in the order the batch first gives it.
    assert noted.distinct().tolist() == ["12 Smiyh St Richmond", "12 Xmith St Richmond",
                                         "14 Smith Street", "3 Nowhere Rd",
                                         "12 Smith St Richmond 3000"]  # fmt: skip
    model = modes.fuzzy_model(index, [noted.distinct()], checked_options(index, options))
    assert model is not None
    fuzzy = partial(modes.match_fuzzy, model=model)
    once = pd.concat([resolve(index, p, options, fuzzy=fuzzy) for p in parts], ignore_index=True)
    alone = pd.concat([resolve(index, p, options) for p in parts], ignore_index=True)
    for column in ("asset_id", "accuracy", "probability", "err", "mode"):
        assert plain(once[column]) == plain(whole[column]), column
    assert plain(alone["probability"]) != plain(whole["probability"])


def test_fuzzy_answers_parsed_and_paired_a_few_queries_at_a_time_are_one_pass_s(
    index: AssetIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job's fuzzy texts are parsed and paired ``PAIR_QUERIES`` distinct queries at a
    time (memory): the model and every answer are those of all of them at once, the
    texts that share a query (case, spaces) in different groups included."""
    texts = pd.Series(
        [
            "12 Smiyh St Richmond", "12 Smith St Richmond", "12 Xmith St Richmond",
            "14 Smith Street", "3 Nowhere Rd", "12 Smith St Richmond 3000", "A1", "",
            "Zzz", "Ünit 2 12 Smïth St Richmond", "12 smith st richmond", "1 Smith St",
            "12  SMITH ST RICHMOND",
        ]
    )  # fmt: skip
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    whole = modes.FuzzyAnswers.of(index, texts, options)
    monkeypatch.setattr(probabilistic, "RANGE_QUERIES", 1)
    monkeypatch.setattr(modes, "PAIR_QUERIES", 2)
    monkeypatch.setattr(modes, "ANSWER_QUERIES", 3)
    grouped = modes.FuzzyAnswers.of(index, texts, options)
    assert whole.model is not None and grouped.model is not None
    assert grouped.model.prior == whole.model.prior
    for c in probabilistic.COMPONENTS:
        assert grouped.model.m[c].tolist() == whole.model.m[c].tolist(), c
    assert list(grouped.texts) == list(whole.texts) == texts.tolist()
    for name in ("asset", "count", "accuracy", "err", "explained", "probability", "evidence"):
        got, expected = getattr(grouped.result, name), getattr(whole.result, name)
        assert got is not None and expected is not None
        assert pd.DataFrame(got).equals(pd.DataFrame(expected)), name
    assert (whole.result.asset >= 0).sum() >= 2  # some texts link, some do not
    assert (whole.result.asset < 0).sum() >= 3
    # No text with a candidate in any group: no model, and every text says why.
    none = modes.FuzzyAnswers.of(index, pd.Series(["Zzz", "", "Qqq Xxx"]), options)
    assert none.model is None
    assert none.result.asset.tolist() == [-1, -1, -1]
    assert none.result.err.tolist() == [modes.NO_FUZZY_CANDIDATE] * 3


def assert_same_answers(got: modes.FuzzyAnswers, expected: modes.FuzzyAnswers) -> None:
    """The same model (prior and every m) and the same answer, column by column."""
    assert got.model is not None and expected.model is not None
    assert got.model.prior == expected.model.prior
    for c in probabilistic.COMPONENTS:
        assert got.model.m[c].tolist() == expected.model.m[c].tolist(), c
    for name in ("asset", "count", "accuracy", "err", "explained", "probability", "evidence"):
        got_column, expected_column = getattr(got.result, name), getattr(expected.result, name)
        assert got_column is not None and expected_column is not None
        assert pd.DataFrame(got_column).equals(pd.DataFrame(expected_column)), name


def test_fuzzy_pairing_of_a_jobs_parts_in_a_thread_answers_as_one_batch(
    index: AssetIndex,
) -> None:
    """A job's first pass adds each part's fuzzy texts to a ``FuzzyPairing`` and they are
    paired in its thread while the next part is linked: a text met in an earlier part is
    paired once, and the model and every answer are those of the job's distinct texts in
    first-occurrence order matched at once. Leaving the pairing ends its thread."""
    parts = [
        pd.Series(["12 Smiyh St Richmond", "12 Smith St Richmond", "12 Smiyh St Richmond"]),
        pd.Series(["14 Smith Street", "12 Smith St Richmond", "Zzz"]),
        pd.Series([], dtype=object),
        pd.Series(["12 smith st richmond", "3 Nowhere Rd", "12 Xmith St Richmond",
                   "14 Smith Street"]),
    ]  # fmt: skip
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    every = pd.Series(pd.unique(pd.concat(parts, ignore_index=True)))
    whole = modes.FuzzyAnswers.of(index, every, options)
    with modes.FuzzyPairing(index, options) as pairing:
        for part in parts:
            pairing.add(part)
        threads = [t.name for t in threading.enumerate() if t.name.startswith("toolkit-fuzzy")]
        assert threads, "the texts were paired in a thread of the pairing's own"
        paired = pairing.answers()
    assert not [t for t in threading.enumerate() if t.name.startswith("toolkit-fuzzy")]
    assert list(paired.texts) == list(whole.texts) == every.tolist()
    assert_same_answers(paired, whole)
    assert (whole.result.asset >= 0).sum() >= 2 and (whole.result.asset < 0).sum() >= 2
    # Nothing added: every text of none answered (no model).
    with modes.FuzzyPairing(index, options) as empty:
        nothing = empty.answers()
    assert nothing.model is None and len(nothing.texts) == 0


def test_a_classs_key_groups_are_made_once_for_every_batch_and_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where an asset class leaves some names out, the fuzzy side's key groups of the
    others are made from its whole key table once and kept with the side, not again for
    each batch of a job's texts or each lookup (which made them every time); they are
    the groups of those names."""
    index = AssetIndex.from_frame(asset_frame())
    side = index.fuzzy_side()
    made: list[int] = []
    grouped = KeyGroups.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[KeyGroups], key_rows: Any, keys: Any, allowed: Any = None) -> Any:
        made.append(-1 if allowed is None else int(allowed.sum()))
        return grouped(cls, key_rows, keys, allowed)

    monkeypatch.setattr(KeyGroups, "of", classmethod(counted))
    spec = {**OFF, "mode": "fuzzy", "assetClass": "Property"}
    parts = [
        pd.Series(["12 Smiyh St Richmond", "3 Nowhere Rd"]),
        pd.Series(["14 Smith Street", "12 Xmith St Richmond"]),
        pd.Series(["7 Twin Ct Carlton", "1 Hydrant Lane"]),
    ]
    with modes.FuzzyPairing(index, checked_options(index, spec), threaded=False) as pairing:
        for part in parts:
            pairing.add(part)
        paired = pairing.answers()
    looked_up = [resolve(index, queries(*part.tolist()), spec) for part in parts]
    names = np.zeros(len(side.parsed), dtype=bool)
    names[side.codes[index.allowed("Property")]] = True
    assert 0 < names.sum() < len(names)  # the class leaves some names out
    assert made == [int(names.sum())]  # once, for the names of the class
    kept, fresh = side.groups_for(names), grouped(KeyGroups, *side.key_table(), names)
    for name in ("keys", "start", "rows"):
        np.testing.assert_array_equal(getattr(kept, name), getattr(fresh, name))
    assert set(kept.rows.tolist()) <= set(np.flatnonzero(names).tolist())
    assert side.groups_for(np.ones(len(names), dtype=bool)) is side.groups
    assert (paired.result.asset >= 0).sum() >= 2
    assert sum((r["asset_position"] >= 0).sum() for r in looked_up) >= 2


PROCESS_PARTS = [
    pd.Series(["12 Smiyh St Richmond", "12 Smith St Richmond", "12 Smiyh St Richmond"]),
    pd.Series(["14 Smith Street", "12 Smith St Richmond", "Zzz"]),
    pd.Series([], dtype=object),
    pd.Series(["12 smith st richmond", "3 Nowhere Rd", "12 Xmith St Richmond"]),
]


def _process_answers(
    index: AssetIndex, folder: Path, asset_class: str | None = None
) -> tuple[modes.FuzzyAnswers, modes.FuzzyAnswers, pairing_process.ProcessPairing]:
    """The answers of a pairing process to ``PROCESS_PARTS``, and of the same texts
    paired here at once."""
    options = checked_options(index, {**OFF, "mode": "fuzzy", "assetClass": asset_class})
    every = pd.Series(pd.unique(pd.concat(PROCESS_PARTS, ignore_index=True)))
    with pairing_process.ProcessPairing(index, options, folder) as pairing:
        for part in PROCESS_PARTS:
            pairing.add(part)
        answered = pairing.answers()
    return answered, modes.FuzzyAnswers.of(index, every, options), pairing


@pytest.mark.parametrize("asset_class", [None, "Property"])
def test_a_pairing_process_answers_as_the_pairing_here(
    index: AssetIndex, tmp_path: Path, asset_class: str | None
) -> None:
    """A large job pairs its texts in a process of its own: sent each part's new texts,
    it answers every text as pairing them here at once does (also for a class that
    leaves some names out: it is sent their key groups, not the whole key table), tells
    its peak memory, and has ended once it has answered."""
    answered, whole, pairing = _process_answers(index, tmp_path / "pairing", asset_class)
    assert list(answered.texts) == list(whole.texts)
    assert_same_answers(answered, whole)
    assert (whole.result.asset >= 0).sum() >= 2 and (whole.result.asset < 0).sum() >= 2
    assert pairing.peak_mib is not None and pairing.peak_mib > 10
    assert pairing._process is None  # waited for
    assert sorted(p.name for p in (tmp_path / "pairing" / "pairs").iterdir()) == [
        "pairs-00000.npz",
        "pairs-00001.npz",
        "pairs-00002.npz",
    ]


def test_a_side_sent_without_its_key_table_refuses_to_make_other_groups(
    index: AssetIndex,
) -> None:
    """What a pairing process is sent has the key groups of its class's names made, and
    no key table: groups of other names cannot be made there, and asking is an error,
    not an empty table (every text would go unmatched)."""
    options = checked_options(index, {**OFF, "mode": "fuzzy", "assetClass": "Property"})
    state = modes.PairingState.of(index, options)
    sent = state.portable().side
    assert len(sent.parsed.keys) == 0 < len(state.side.key_table()[1])
    names = state.per_row > 0
    assert not names.all()
    kept = sent.groups_for(names)  # made before it was sent
    np.testing.assert_array_equal(kept.rows, state.side.groups_for(names).rows)
    with pytest.raises(MatchingError, match="sent without its key table"):
        sent.groups_for(~names)


@pytest.mark.parametrize(
    ("program", "why"),
    [
        ("exits", "exit status 3"),
        ("fails", "FileNotFoundError"),
    ],
)
def test_a_pairing_process_that_fails_leaves_the_pairing_here_with_a_warning(
    index: AssetIndex,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    program: str,
    why: str,
) -> None:
    """A pairing process that ends at once, or fails and says why, loses nothing: the
    texts are paired here and answered as they would have been, and a warning says why."""

    def started(folder: Path, errors: Any) -> subprocess.Popen[bytes]:
        if program == "exits":
            return subprocess.Popen(
                [sys.executable, "-c", "import sys; sys.exit(3)"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=errors,
            )
        return start_main(pairing_process.__name__, "/no/such/folder", stderr=errors)

    monkeypatch.setattr(pairing_process, "_start", started)
    answered, whole, pairing = _process_answers(index, tmp_path / "pairing")
    assert_same_answers(answered, whole)
    assert list(answered.texts) == list(whole.texts)
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any("pairs the texts in this process" in w and why in w for w in warned), warned
    assert pairing.peak_mib is None


def test_a_job_that_ends_before_its_answers_stops_its_pairing_process(
    index: AssetIndex, tmp_path: Path
) -> None:
    """A job that fails before asking for answers leaves no pairing process behind."""
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    processes: list[subprocess.Popen[bytes] | None] = []
    with (
        pytest.raises(RuntimeError, match="the job broke"),
        pairing_process.ProcessPairing(index, options, tmp_path / "pairing") as pairing,
    ):
        pairing.add(PROCESS_PARTS[0])
        processes.append(pairing._process)
        raise RuntimeError("the job broke")
    assert processes[0] is not None and processes[0].poll() is not None
    assert pairing._process is None


@pytest.mark.parametrize("fit_queries", [probabilistic.FIT_QUERIES, 2])
def test_fuzzy_pairs_wait_on_disk_part_by_part_and_answer_as_one_batch(
    index: AssetIndex, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fit_queries: int
) -> None:
    """With a folder, each part's pairs are saved there once paired, not held, and read
    back part by part to fit and to answer: the model (also when the fit chooses some of
    the queries, as it does beyond ``FIT_QUERIES``: here 2) and every answer are those of
    the job's distinct texts paired and scored at once, in memory."""
    monkeypatch.setattr(probabilistic, "FIT_QUERIES", fit_queries)
    parts = [
        pd.Series(["12 Smiyh St Richmond", "3 Nowhere Rd", "14 Smith Street"]),
        pd.Series(["12 Smith St Richmond", "Zzz", "12 Smiyh St Richmond"]),
        pd.Series(["12 Xmith St Richmond", "12 smith st richmond", "7 Twin Ct Carlton"]),
    ]
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    every = pd.Series(pd.unique(pd.concat(parts, ignore_index=True)))
    whole = modes.FuzzyAnswers.of(index, every, options)
    folder = tmp_path / "pairs"
    saved: list[list[str]] = []
    with modes.FuzzyPairing(index, options, folder=folder) as pairing:
        for part in parts:
            pairing.add(part)
        for paired in pairing._paired:
            batch = paired.result()
            assert batch.pairs is None and batch.path is not None and batch.path.exists()
            saved.append(sorted(p.name for p in folder.iterdir()))
        answered = pairing.answers()
    assert saved[-1] == ["pairs-00000.npz", "pairs-00001.npz", "pairs-00002.npz"]
    assert list(answered.texts) == every.tolist()
    assert_same_answers(answered, whole)
    assert (whole.result.asset >= 0).sum() >= 3 and (whole.result.asset < 0).sum() >= 1


@pytest.mark.parametrize("threaded", [True, False])
@pytest.mark.parametrize("fit_queries", [probabilistic.FIT_QUERIES, 2])
def test_a_pairings_model_alone_is_the_model_of_its_texts_at_once(
    index: AssetIndex,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    fit_queries: int,
    threaded: bool,
) -> None:
    """``FuzzyPairing.model`` (a Dask job's client, through ``fuzzy_model``: its texts
    added a partition at a time, their pairs waiting on disk) is the model
    ``match_fuzzy`` fits on the distinct texts as one batch, also when the fit chooses
    among the queries; none without a candidate."""
    monkeypatch.setattr(probabilistic, "FIT_QUERIES", fit_queries)
    parts = [
        pd.Series(["12 Smiyh St Richmond", "3 Nowhere Rd", None]),
        pd.Series(["12 Smith St Richmond", "12 Smiyh St Richmond", "14 Smith Street"]),
        pd.Series(["12 Xmith St Richmond", "12 smith st richmond"]),
    ]
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    every = pd.Series(pd.unique(pd.concat(parts, ignore_index=True).fillna("")))
    one_batch = modes._fuzzy_pairs(index, modes.QueryBatch(every), options)
    assert one_batch is not None
    expected = one_batch[-1]
    with modes.FuzzyPairing(index, options, threaded=threaded, folder=tmp_path) as pairing:
        for part in parts:
            pairing.add(part)
        model = pairing.model()
    assert len(list(tmp_path.glob("pairs-*.npz"))) == 3
    by_partition = modes.fuzzy_model(index, parts, options, tmp_path / "again")
    for got in (model, by_partition):
        assert got is not None
        assert got.prior == expected.prior
        for c in probabilistic.COMPONENTS:
            assert got.m[c].tolist() == expected.m[c].tolist(), c
    with modes.FuzzyPairing(index, options, threaded=False) as nothing:
        nothing.add(pd.Series(["Zzz", "Qqq Xxx"]))
        assert nothing.model() is None


def test_fuzzy_answers_pair_the_parts_the_thread_has_not_begun_here(
    index: AssetIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the first pass ends with parts still waiting for the pairing thread,
    ``answers`` pairs them itself, from the last back, while the thread goes on from the
    first: the answers stay those of one batch. Here the thread is held on its first part
    until this thread has paired one, so this thread pairs the later parts."""
    parts = [
        pd.Series(["12 Smiyh St Richmond", "3 Nowhere Rd"]),
        pd.Series(["14 Smith Street", "12 Smiyh St Richmond"]),
        pd.Series(["12 Xmith St Richmond"]),
        pd.Series(["12 smith st richmond", "Zzz"]),
    ]
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    every = pd.Series(pd.unique(pd.concat(parts, ignore_index=True)))
    whole = modes.FuzzyAnswers.of(index, every, options)
    here_paired = threading.Event()
    by_thread: dict[str, list[list[str]]] = {"here": [], "pairing thread": []}
    real = modes.FuzzyPairing._pair

    def pair(self: modes.FuzzyPairing, texts: pd.Series, batch: int) -> Any:
        here = threading.current_thread() is threading.main_thread()
        if not here:
            assert here_paired.wait(10), "answers did not pair a waiting part itself"
        paired = real(self, texts, batch)
        by_thread["here" if here else "pairing thread"].append(texts.tolist())
        here_paired.set()
        return paired

    monkeypatch.setattr(modes.FuzzyPairing, "_pair", pair)
    with modes.FuzzyPairing(index, options) as pairing:
        for part in parts:
            pairing.add(part)
        answered = pairing.answers()
    # The thread paired the first part and perhaps the second; this thread the rest,
    # the last first.
    assert by_thread["here"][0] == ["12 smith st richmond", "Zzz"]
    assert by_thread["pairing thread"][0] == ["12 Smiyh St Richmond", "3 Nowhere Rd"]
    assert len(by_thread["here"]) + len(by_thread["pairing thread"]) == len(parts)
    assert list(answered.texts) == every.tolist()
    assert_same_answers(answered, whole)


def test_fuzzy_pairing_gives_its_threads_error_and_drops_pairing_not_begun(
    index: AssetIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failure while pairing in the thread is raised by the next ``add`` once it is
    known, else by ``answers``, not lost; leaving the pairing early (the first pass
    failed) cancels the parts not yet begun."""
    options = checked_options(index, {**OFF, "mode": "fuzzy"})
    started = threading.Event()
    release = threading.Event()
    paired: list[list[str]] = []
    real = modes._paired

    def slow(side: Any, words: Any, *args: Any) -> Any:
        started.set()
        release.wait(10)
        paired.append([str(v) for v in words.vocabulary])
        if any("BROKEN" in str(v) for v in words.vocabulary):
            raise MatchingError("pairing failed on BROKEN")
        return real(side, words, *args)

    monkeypatch.setattr(modes, "_paired", slow)
    with modes.FuzzyPairing(index, options) as pairing:
        pairing.add(pd.Series(["12 Broken St"]))
        release.set()
        with pytest.raises(MatchingError, match="BROKEN"):
            pairing.answers()
    with modes.FuzzyPairing(index, options) as pairing:
        pairing.add(pd.Series(["12 Broken St"]))
        with pytest.raises(MatchingError, match="BROKEN"):
            for n in range(1, 200):  # the next part's add, once the failure is known
                pairing.add(pd.Series([f"{n} Smith St Richmond"]))
                time.sleep(0.05)
    release.clear()
    started.clear()
    paired.clear()
    pairing = modes.FuzzyPairing(index, options)
    with pairing:
        pairing.add(pd.Series(["12 Smith St Richmond"]))
        assert started.wait(10)
        pairing.add(pd.Series(["14 Smith Street"]))  # waits behind the first
        # The first is let finish only once leaving has cancelled what waits behind it.
        threading.Timer(0.3, release.set).start()
    assert release.is_set(), "leaving waited for the pairing under way"
    assert len(paired) == 1, "the second part's pairing was cancelled, not run"


@pytest.mark.parametrize(
    ("mode", "fallback"),
    [("soundex", "fuzzy"), ("fuzzy", "soundex"), ("fuzzy", None), ("auto", "fuzzy")],
)
def test_a_first_pass_then_fuzzy_answers_give_the_parts_what_one_batch_gives(
    index: AssetIndex, monkeypatch: pytest.MonkeyPatch, mode: str, fallback: str | None
) -> None:
    """A job's first pass over its parts keeps by text what each mode before fuzzy
    answered to the texts it left (``TextRecord``) and notes fuzzy's texts; fuzzy then
    answers every text at once (``FuzzyAnswers``), and the second pass links the rows
    fuzzy was given again, replaying the rest: every column of those rows is the whole
    batch's, with no mode before fuzzy run again and no text paired again. A mode after
    fuzzy (its fallback) runs anew, on what fuzzy left."""
    texts = [
        "12 Smiyh St Richmond", "12 Smith St Richmond", "12 Xmith St Richmond",
        "14 Smith Street", "12 Smiyh St Richmond", "3 Nowhere Rd", "12 Smith St Richmond 3000",
        "A1", "", "Zzz", "12 Xmith St Richmond", "Ünit 2 12 Smïth St Richmond",
    ]  # fmt: skip
    options = {**OFF, "mode": mode, **({"fallbackMode": fallback} if fallback else {})}
    whole = resolve(index, queries(*texts), options)
    parts = [queries(*texts[:3]), queries(*texts[3:])]
    records = [modes.TextRecord() for _ in parts]
    for part, record in zip(parts, records, strict=True):
        resolve(index, part, options, modes=record.functions())
    noted = pd.concat([r.fuzzy.distinct() for r in records], ignore_index=True)
    monkeypatch.setattr(modes, "ANSWER_QUERIES", 2)  # scored two queries at a time
    answers = modes.FuzzyAnswers.of(
        index, pd.Series(pd.unique(noted)), checked_options(index, options)
    )
    model = modes.fuzzy_model(index, [pd.Series(pd.unique(noted))], checked_options(index, options))
    assert answers.model is not None and model is not None
    assert answers.model.prior == model.prior
    real = dict(modes.MODE_FUNCTIONS)
    if mode != "fuzzy":  # on the second pass, the modes before fuzzy are replayed
        for name in ("soundex", "code"):
            monkeypatch.setitem(modes.MODE_FUNCTIONS, name, lambda *_: pytest.fail("run again"))

    def no_pairs(*_: object) -> None:
        pytest.fail("paired again")

    monkeypatch.setattr(modes, "_fuzzy_pairs", no_pairs)
    starts = [0, 3]
    again = []
    for part, record, start in zip(parts, records, starts, strict=True):
        # Only the part's rows whose text fuzzy was given are linked again.
        given = np.flatnonzero(part["query"].isin(record.fuzzy.distinct()).to_numpy())
        some = resolve(
            index,
            part.iloc[given].reset_index(drop=True),
            options,
            modes=modes.replayed_by_text(record.calls, answers),
        )
        assert list(some.columns) == list(whole.columns)
        for column in whole.columns:
            if column != "reference":
                assert plain(some[column]) == plain(whole[column].iloc[start + given]), column
        again.append(some)
    assert sum((a["mode"] == "fuzzy").sum() for a in again) >= 2
    assert sum(len(a) for a in again) >= 5
    # Replayed on texts the first pass did not give the mode (another part): refused.
    monkeypatch.setattr(modes, "MODE_FUNCTIONS", real)
    if mode != "fuzzy":
        with pytest.raises(RuntimeError, match="was not called so on the first pass"):
            resolve(
                index, parts[1], options, modes=modes.replayed_by_text(records[0].calls, answers)
            )


def test_digit_codes_with_no_zero_to_strip_share_the_codes_table() -> None:
    """Codes that are all digits, none with a leading zero, are their own stripped table
    (the same object, not a second copy); one leading zero and the tables differ, and a
    code matches with or without its zeros either way."""
    frame = asset_frame()
    frame["code"] = [str(100 + i) for i in range(len(frame))]
    index = AssetIndex.from_frame(frame)
    assert index.table("stripped:code", "Property") is index.table("code:code", "Property")
    assert answers(index, ["0101", "101", "C2"], mode="code", codeField="code") == [
        ("A2", 95.0, 1),
        ("A2", 100.0, 1),
        (None, None, 0),
    ]
    frame.loc[0, "code"] = "0100"
    zeros = AssetIndex.from_frame(frame)
    assert zeros.table("stripped:code", "Property") is not zeros.table("code:code", "Property")
    assert answers(zeros, ["100", "0100", "0101"], mode="code", codeField="code") == [
        ("A1", 95.0, 1),
        ("A1", 100.0, 1),
        ("A2", 95.0, 1),
    ]
