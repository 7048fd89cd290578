"""The address gazetteer: loading address-point files into the site file, reading it back,
and geocoding with asset matching's own matcher (typos, abbreviations, unit forms)."""

from __future__ import annotations

import io
import logging
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from gazetteer_data import gnaf_points, noisy_queries, write_psv

from toolkit.errors import OptionError, SourceError, StoreError
from toolkit.geocoding import keeping, load_files, read_gazetteer, required_features
from toolkit.geocoding.gazetteer import matcher_fingerprint
from toolkit.geocoding.keeping import GazetteerCache, describe
from toolkit.store import Database, SiteStore

FIXTURES = Path(__file__).resolve().parent / "fixtures_geocoding"
REAL = FIXTURES / "openaddresses_au_vic.csv"


@pytest.fixture(scope="module")
def points() -> pd.DataFrame:
    return gnaf_points(6000, seed=3)


@pytest.fixture
def store(tmp_path: Path) -> SiteStore:
    db = Database(tmp_path / "site.sqlite")
    yield SiteStore(db, "demo")
    db.close()


@pytest.fixture
def loaded(store: SiteStore, points: pd.DataFrame, tmp_path: Path) -> SiteStore:
    load_files(store, [write_psv(points, tmp_path / "GNAF_CORE.psv")], name="gnaf")
    return store


def reopened(store: SiteStore) -> SiteStore:
    """The same site through a new connection: what a later command sees."""
    return SiteStore(Database(store.db.path), store.name)


def test_load_keeps_the_gazetteer_in_the_site_file(loaded: SiteStore, points: pd.DataFrame) -> None:
    site = reopened(loaded)
    info = describe(site)
    assert info is not None
    assert (info["name"], info["source"], info["points"]) == ("gnaf", "gazetteer:gnaf", 6000)
    expected = (points["GEOCODE_TYPE"] == "STREET LOCALITY").sum()
    assert info["features"] == {
        "locality": 52,
        "premise": 6000 - 52 - expected,
        "street": int(expected),
    }
    assert info["columns"]["number"] == "NUMBER_FIRST"
    assert info["current"] is True
    # One file: nothing beside the site file holds the gazetteer.
    assert sorted(p.name for p in site.db.path.parent.iterdir() if "index" in p.name) == []
    gazetteer = read_gazetteer(site)
    assert gazetteer is not None and len(gazetteer.index) == 6000
    # The matcher's side was kept, not rebuilt on reading.
    assert "fuzzy" in gazetteer.index._derived


def test_noisy_queries_find_their_address_point(loaded: SiteStore, points: pd.DataFrame) -> None:
    gazetteer = read_gazetteer(reopened(loaded))
    assert gazetteer is not None
    queries = noisy_queries(points, 300, seed=4)
    found = gazetteer.geocode(queries["query"], {})
    # Every answer is right; a query the matcher is unsure of gets none (never a guess):
    # here one typo (BIRDGE BOULEVARD, 71% likely, below the 80% a link needs).
    answered = found["place_id"].notna().to_numpy()
    assert answered.sum() == 299
    assert (found["place_id"][answered] == queries["truth"][answered]).all()
    missed = queries[~answered]
    assert missed["kind"].tolist() == ["typo"]
    assert "71% likely, below the 80% needed to link" in found["err"][~answered].iloc[0]
    assert set(found["source"].dropna()) == {"gazetteer:gnaf"}
    assert set(found["feature"].dropna()) == {"premise"}
    truth = points.set_index("ADDRESS_DETAIL_PID").loc[queries["truth"][answered]]
    assert np.allclose(found["longitude"][answered], truth["LONGITUDE"].astype(float))
    assert np.allclose(found["latitude"][answered], truth["LATITUDE"].astype(float))
    # Exact words score as asset matching scores them; a typo sounds alike (90) or is
    # left to the probabilistic matcher (its probability).
    by_kind = found.assign(kind=queries["kind"]).groupby("kind")["accuracy"].min()
    assert by_kind["exact"] == 100.0
    assert by_kind["typo"] >= 80.0


def test_typos_and_unit_forms(loaded: SiteStore, points: pd.DataFrame) -> None:
    gazetteer = read_gazetteer(loaded)
    assert gazetteer is not None
    unit = points[points["FLAT_NUMBER"] != ""].iloc[0]
    plain = points[(points["FLAT_NUMBER"] == "") & (points["NUMBER_FIRST"] != "")].iloc[7]
    name = plain["STREET_NAME"]
    typo = name[0] + name[2] + name[1] + name[3:]
    queries = pd.Series(
        [
            f"{unit['FLAT_NUMBER']}/{unit['NUMBER_FIRST']} {unit['STREET_NAME']} "
            f"{unit['STREET_TYPE']} {unit['LOCALITY_NAME']}",
            f"{plain['NUMBER_FIRST']} {typo.lower()} {plain['STREET_TYPE'].lower()}, "
            f"{plain['LOCALITY_NAME'].lower()}",
        ],
        index=[10, 20],
    )
    found = gazetteer.geocode(queries, {})
    assert list(found.index) == [10, 20]
    assert found["place_id"].tolist() == [
        unit["ADDRESS_DETAIL_PID"],
        plain["ADDRESS_DETAIL_PID"],
    ]
    assert found["err"].isna().all()


def test_a_miss_says_why_in_words_about_address_points(loaded: SiteStore) -> None:
    gazetteer = read_gazetteer(loaded)
    assert gazetteer is not None
    found = gazetteer.geocode(pd.Series(["99999 Nowhere Boulevard Atlantis"]), {})
    assert np.isnan(found.loc[0, "longitude"])
    assert found.loc[0, "err"] == (
        "gazetteer:gnaf: no address point name sounds like this (soundex, maxRank 2); "
        "fallback fuzzy: no address point shares a number, street or locality with this "
        "address (fuzzy)"
    )


def test_required_features_choose_the_kind_of_place(
    loaded: SiteStore, points: pd.DataFrame
) -> None:
    gazetteer = read_gazetteer(loaded)
    assert gazetteer is not None
    street = points[points["GEOCODE_TYPE"] == "STREET LOCALITY"].iloc[0]
    text = f"{street['STREET_NAME']} {street['STREET_TYPE']} {street['LOCALITY_NAME']}"
    anything = gazetteer.geocode(pd.Series([text]), {})
    assert anything.loc[0, "place_id"] == street["ADDRESS_DETAIL_PID"]
    assert anything.loc[0, "feature"] == "street"
    premise = gazetteer.geocode(pd.Series([text]), {"requiredFeatures": ["premise"]})
    assert premise.loc[0, "place_id"] is None
    assert "gazetteer:gnaf:" in premise.loc[0, "err"]
    locality = gazetteer.geocode(
        pd.Series([street["LOCALITY_NAME"]]), {"requiredFeatures": ["Locality", "street"]}
    )
    assert locality.loc[0, "feature"] == "locality"
    venue = gazetteer.geocode(pd.Series([text]), {"requiredFeatures": ["venue"]})
    assert venue.loc[0, "err"] == (
        "gazetteer:gnaf: no address point is a venue (it holds locality, premise, street)"
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"requiredFeatures": ["house"]}, "requiredFeatures has 'house'; allowed: premise, venue"),
        ({"requiredFeatures": [1]}, "it must be an array of strings"),
        ({"bounds": [1, 2]}, "unknown geocoderOptions key(s) 'bounds'; known: requiredFeatures"),
    ],
)
def test_bad_geocoder_options_are_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        required_features(options)


def test_real_openaddresses_sample(store: SiteStore) -> None:
    """Ten real Victorian address points (see fixtures_geocoding/README.md)."""
    gazetteer, report = load_files(store, [REAL])
    assert report.to_dict()["kept"] == 10
    assert gazetteer.source == "gazetteer:openaddresses_au_vic"
    found = gazetteer.geocode(
        pd.Series(
            [
                "Unit 410, 244 Dorcas St, South Melbourne",
                "10/244-246 Wattletree Rd Malvern",
                "10/244 Barkley St St Kilda",  # misspelt street
                "310/244 Dorcus Street South Melbourne VIC 3205",  # misspelt street
                "244 Dorcas St South Melbourne",  # five units there: a tie, not a guess
                "10/244 Dorcas St South Melbourne",  # no such unit
            ]
        ),
        {"requiredFeatures": ["premise"]},
    )
    assert found["place_id"].tolist() == [
        "423672343",
        "208518759",
        "50579518",
        "423672332",
        None,
        None,
    ]
    assert found.loc[1, "label"] == "10/244-246 WATTLETREE ROAD MALVERN VIC 3144"
    assert (found.loc[0, "longitude"], found.loc[0, "latitude"]) == (144.9591621, -37.8331898)
    assert "equally likely" in found.loc[4, "err"]


def test_rows_without_a_point_are_left_out_and_counted(store: SiteStore, tmp_path: Path) -> None:
    path = tmp_path / "points.csv"
    path.write_text(
        "ID,NUMBER,STREET,CITY,POSTCODE,LAT,LON\n"
        "a,12,Smith St,Kew,3101,-37.80,145.03\n"
        "b,14,Smith St,Kew,3101,,\n"
        "c,16,Smith St,Kew,3101,-95,145.03\n"
        "d,,,,,-37.8,145.0\n",
        encoding="utf-8",
    )
    gazetteer, report = load_files(store, [path], name="kew")
    assert report.to_dict() == {
        "files": [str(path)],
        "read": 4,
        "kept": 1,
        "columns": {
            "id": "ID",
            "number": "NUMBER",
            "street_name": "STREET",
            "locality": "CITY",
            "postcode": "POSTCODE",
        },
        "skipped": {"no point (missing or unusable coordinates)": 2, "no address": 1},
        "examples": [
            "points.csv row 2: no point (missing or unusable coordinates)",
            "points.csv row 3: no point (missing or unusable coordinates)",
            "points.csv row 4: no address",
        ],
    }
    assert gazetteer.index.assets["name"].tolist() == ["12 Smith St Kew 3101"]


def test_a_file_without_address_columns_is_an_error_and_keeps_the_old_one(
    loaded: SiteStore, tmp_path: Path
) -> None:
    before = loaded.gazetteers.current()
    path = tmp_path / "other.csv"
    path.write_text("code,lat,lon\nx,-37.8,145.0\n", encoding="utf-8")
    with pytest.raises(
        SourceError, match=r"other\.csv: no address columns.*its columns are: code, lat, lon"
    ):
        load_files(loaded, [path])
    empty = tmp_path / "empty.csv"
    empty.write_text("NUMBER,STREET,lat,lon\n12,Smith St,,\n", encoding="utf-8")
    with pytest.raises(SourceError, match=r"no usable address point .* in 1 rows; 1 no point"):
        load_files(loaded, [empty])
    with pytest.raises(OptionError, match="unknown column role"):
        load_files(loaded, [path], columns={"house": "NUMBER"})
    assert loaded.gazetteers.current() == before


def test_columns_can_be_named(store: SiteStore, tmp_path: Path) -> None:
    path = tmp_path / "odd.csv"
    path.write_text(
        "HOUSE,ROADNAME,TOWN,Y,X,KIND\n7,High Road,Camberwell,-37.83,145.06,premise\n",
        encoding="utf-8",
    )
    gazetteer, report = load_files(
        store, [path], columns={"number": "house", "street_name": "RoadName"}
    )
    assert gazetteer.index.assets["name"].tolist() == ["7 High Road Camberwell"]
    assert report.columns["number"] == "HOUSE"
    with pytest.raises(SourceError, match="no column 'NUM' for number"):
        load_files(store, [path], columns={"number": "NUM"})


def test_parquet_with_coordinates(store: SiteStore, points: pd.DataFrame, tmp_path: Path) -> None:
    path = tmp_path / "points.parquet"
    sample = points.iloc[:50].copy()
    sample["LONGITUDE"] = sample["LONGITUDE"].astype(float)
    sample["LATITUDE"] = sample["LATITUDE"].astype(float)
    sample.to_parquet(path)
    gazetteer, _ = load_files(store, [path])
    assert gazetteer.index.assets["id"].tolist() == sample["ADDRESS_DETAIL_PID"].tolist()


def test_several_files_make_one_gazetteer(
    store: SiteStore, points: pd.DataFrame, tmp_path: Path
) -> None:
    first = write_psv(points.iloc[:100], tmp_path / "VIC_1.psv")
    second = write_psv(points.iloc[100:250], tmp_path / "VIC_2.psv")
    gazetteer, report = load_files(store, [first, second], name="vic")
    assert (len(gazetteer.index), report.read) == (250, 250)
    assert gazetteer.header["files"] == ["VIC_1.psv", "VIC_2.psv"]


def test_another_matcher_version_is_reindexed(
    store: SiteStore,
    points: pd.DataFrame,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Written by a toolkit whose matcher's code differs (another fingerprint)...
    with monkeypatch.context() as patched:
        patched.setattr(keeping, "matcher_fingerprint", lambda: "old")
        load_files(store, [write_psv(points.iloc[:800], tmp_path / "old.psv")], name="old")
    assert describe(store)["current"] is False  # type: ignore[index]
    # ... is read by this one: its kept matcher data is not used, the points re-indexed.
    with caplog.at_level(logging.WARNING):
        gazetteer = read_gazetteer(store)
    assert "indexed by another version of the matcher" in caplog.text
    assert gazetteer is not None
    query = noisy_queries(points.iloc[:800], 6, seed=9)
    assert gazetteer.geocode(query["query"], {})["place_id"].tolist() == query["truth"].tolist()
    assert matcher_fingerprint() != "old"


def test_a_damaged_gazetteer_is_a_clear_error(loaded: SiteStore) -> None:
    stored = loaded.gazetteers.current()
    assert stored is not None
    loaded.gazetteers.replace(stored.name, stored.header, io.BytesIO(b"not a gazetteer"))
    with pytest.raises(StoreError, match=r"damaged \(.*holds no asset index\).*gazetteer load"):
        read_gazetteer(loaded)


def test_cache_reloads_a_replaced_gazetteer(loaded: SiteStore, tmp_path: Path) -> None:
    cache = GazetteerCache(recheck_s=0.0)
    first = cache.get(loaded)
    assert first is not None and cache.get(loaded) is first
    load_files(loaded, [REAL], name="real")
    second = cache.get(loaded)
    assert second is not None and second.name == "real"
    loaded.gazetteers.remove()
    assert cache.get(loaded) is None


def test_the_openapi_document_lists_the_features() -> None:
    from toolkit.geocoding import FEATURES
    from toolkit.server import openapi_document

    options = openapi_document()["components"]["schemas"]
    schema = next(s for s in options.values() if "geocoderOptions" in s.get("properties", {}))
    geocoder = schema["properties"]["geocoderOptions"]
    assert geocoder["properties"]["requiredFeatures"]["items"]["enum"] == list(FEATURES)
    assert geocoder["additionalProperties"] is False


def test_a_query_sharing_no_key_with_any_point_is_a_miss_not_a_crash() -> None:
    """(The probabilistic matcher's blocking once failed when no key of a batch matched.)"""
    from toolkit.matching import AssetIndex, resolve

    index = AssetIndex.from_frame(
        pd.DataFrame({"id": ["A", "B"], "name": ["12 SMITH STREET KEW", "14 HIGH ROAD CAMBERWELL"]})
    )
    found = resolve(
        index,
        pd.DataFrame({"query": ["Zanzibar Primary School"]}),
        {"mode": "fuzzy", "useExternalLookups": False},
    )
    assert found.loc[0, "asset_position"] == -1
    assert found.loc[0, "err"] == (
        "no asset shares a number, street or locality with this address (fuzzy)"
    )
