from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolkit.matching import address
from toolkit.matching.address import PARSED_COLUMNS, address_keys, normalise, parse


def parsed(text: str) -> dict[str, str]:
    return parse(pd.Series([text], dtype="str")).iloc[0].to_dict()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("12 Smith St.", "12 SMITH STREET"),
        ("12 smith street", "12 SMITH STREET"),
        ("12  SMITH   RD,", "12 SMITH ROAD"),
        ("3 Ocean Ave", "3 OCEAN AVENUE"),
        ("4 Moon Cres", "4 MOON CRESCENT"),
        ("5 Sun Ct", "5 SUN COURT"),
        ("6 Star Pl", "6 STAR PLACE"),
        ("7 Park Dr", "7 PARK DRIVE"),
        ("8 Hume Hwy", "8 HUME HIGHWAY"),
        ("9 Bay Tce", "9 BAY TERRACE"),
        ("10 Lake Pde", "10 LAKE PARADE"),
        ("11 Lime Gr", "11 LIME GROVE"),
        ("1/12 Smith St", "UNIT 1 12 SMITH STREET"),
        ("Unit 1 12 Smith St", "UNIT 1 12 SMITH STREET"),
        ("U1 12 Smith St", "UNIT 1 12 SMITH STREET"),
        ("Flat 1, 12 Smith St", "UNIT 1 12 SMITH STREET"),
        ("12 - 14 High St", "12-14 HIGH STREET"),
        ("5 Café Lane", "5 CAFE LANE"),
        ("Crèche-Road", "CRECHE ROAD"),
        ("12 Smith St Richmond Victoria 3121", "12 SMITH STREET RICHMOND VIC 3121"),
        ("", ""),
        ("   ", ""),
        ("005123", "005123"),
    ],
)
def test_normalise_gives_one_canonical_form(text: str, expected: str) -> None:
    assert normalise(pd.Series([text], dtype="str")).tolist() == [expected]


def test_missing_text_normalises_to_empty_and_keeps_the_index() -> None:
    result = normalise(pd.Series(["12 Smith St", None], index=[7, 9], dtype="str"))
    assert result.to_dict() == {7: "12 SMITH STREET", 9: ""}


def test_parse_splits_unit_number_street_locality_state_postcode() -> None:
    assert parsed("1/12 Smith St., Richmond VIC 3121") == {
        "normalised": "UNIT 1 12 SMITH STREET RICHMOND VIC 3121",
        "unit": "1",
        "number": "12",
        "street_name": "SMITH",
        "street_type": "STREET",
        "street": "UNIT 1 12 SMITH STREET",
        "locality": "RICHMOND",
        "state": "VIC",
        "postcode": "3121",
    }
    assert list(parse(pd.Series(["x"], dtype="str")).columns) == list(PARSED_COLUMNS)


def test_parse_keeps_saint_as_part_of_the_street_name() -> None:
    result = parsed("12 St Kilda Rd St Kilda")
    assert (result["street_name"], result["street_type"], result["locality"]) == (
        "STREET KILDA",
        "ROAD",
        "STREET KILDA",
    )


def test_parse_without_street_type_has_no_locality_and_splits_the_postcode() -> None:
    result = parsed("12 Broadway 3121")
    assert (result["number"], result["street"], result["locality"], result["postcode"]) == (
        "12",
        "12 BROADWAY",
        "",
        "3121",
    )


def test_parse_number_range() -> None:
    result = parsed("12-14 High Street Kew")
    assert (result["number"], result["street_name"], result["locality"]) == ("12-14", "HIGH", "KEW")


def test_keys_equal_for_the_same_address_written_differently() -> None:
    keys = address_keys(
        pd.Series(
            [
                "1/12 Smith St Richmond",
                "UNIT 1 12 SMITH STREET RICHMOND",
                "U1 12 smyth st richmond",
            ],
            dtype="str",
        )
    )
    assert keys["exact_full"].iloc[0] == keys["exact_full"].iloc[1]
    assert keys["exact_full"].iloc[0] != keys["exact_full"].iloc[2]
    assert keys["sound_full"].nunique() == 1
    assert keys["has_locality"].tolist() == [True, True, True]


def test_sounds_like_keys_compare_numbers_exactly_and_order_only_at_rank_two() -> None:
    keys = address_keys(
        pd.Series(["12 SMITH STREET", "13 SMITH STREET", "12 STREET SMITH"], dtype="str")
    )
    assert keys["sound_street"].iloc[0] != keys["sound_street"].iloc[1]
    assert keys["sound_street"].iloc[0] != keys["sound_street"].iloc[2]
    assert keys["anyorder_street"].iloc[0] == keys["anyorder_street"].iloc[2]


def test_empty_addresses_have_no_keys() -> None:
    keys = address_keys(pd.Series(["", "  ", None], dtype="str"))
    assert (keys[["exact_full", "sound_street", "postcode"]].to_numpy() == 0).all()


def test_saint_and_mount_match_their_short_forms() -> None:
    texts = pd.Series(
        [
            "18 Saint Patricks Avenue",
            "18 ST PATRICKS AVE",
            "2 Mount Clear Rd",
            "2 MT CLEAR ROAD",
            "5 ST KILDA ST",
        ]
    )
    normalised = normalise(texts).tolist()
    assert normalised[0] == normalised[1]
    assert normalised[2] == normalised[3]
    parsed = parse(pd.Series(["5 ST KILDA ST", "5 SAINT KILDA STREET"]))
    assert parsed.iloc[0].to_dict() == parsed.iloc[1].to_dict()


@pytest.mark.parametrize(
    ("text", "street_name", "street_type", "locality"),
    [
        ("3 light setreet windermere", "LIGHT", "STREET", "WINDERMERE"),
        ("4 moon crescant, bayside", "MOON", "CRESCENT", "BAYSIDE"),
        ("5 ocean avenue, sorento", "OCEAN", "AVENUE", "SORENTO"),
        ("6 ocean aevnue sorrento", "OCEAN", "AVENUE", "SORRENTO"),
        ("177 pridhamstreet, marsden", "PRIDHAM", "STREET", "MARSDEN"),
        ("174 alabaste rstreet, riverwood", "ALABASTE", "STREET", "RIVERWOOD"),
        ("32 mckillop ecircuit, corio", "MCKILLOP", "CIRCUIT", "CORIO"),
        ("9 lang st", "LANG", "STREET", ""),
        ("12 streeton drive", "STREETON", "DRIVE", ""),
    ],
)
def test_parse_recognises_misspelt_and_joined_street_types(
    text: str, street_name: str, street_type: str, locality: str
) -> None:
    got = parsed(text)
    assert (got["street_name"], got["street_type"], got["locality"]) == (
        street_name,
        street_type,
        locality,
    )


@pytest.mark.parametrize(
    ("text", "unit", "number", "street_name", "street_type", "locality", "postcode"),
    [
        # The type before the name, as French and some Australian addresses write it.
        ("31 AVENUE SCOTT", "", "31", "SCOTT", "AVENUE", "", ""),
        ("31 Avenue Scott, Kew 3101", "", "31", "SCOTT KEW", "AVENUE", "", "3101"),
        ("5 Boulevard Haussmann", "", "5", "HAUSSMANN", "BOULEVARD", "", ""),
        ("2/14 Esplanade Marine", "2", "14", "MARINE", "ESPLANADE", "", ""),
        ("7 Rd Edgar", "", "7", "EDGAR", "ROAD", "", ""),
        # ... but not where a type follows a name, or the next word is a type too.
        ("4 The Avenue Kew", "", "4", "THE", "AVENUE", "KEW", ""),
        ("10 Avenue Road", "", "10", "AVENUE ROAD", "", "", ""),
        ("8 Avenue Victor Hugo Street Paris", "", "8", "AVENUE VICTOR HUGO", "STREET", "PARIS", ""),
        # Names that begin with a type word which is seldom written first keep it.
        ("12 Green Kew", "", "12", "GREEN KEW", "", "", ""),
        ("3 Grove Hill", "", "3", "GROVE HILL", "", "", ""),
        ("12 St Kilda", "", "12", "STREET KILDA", "", "", ""),
        # The everyday forms around them.
        (
            "Unit 3, 12-14 Smith St, Richmond VIC 3121",
            "3",
            "12-14",
            "SMITH",
            "STREET",
            "RICHMOND",
            "3121",
        ),
        ("U5 7 Oak Ave Carlton", "5", "7", "OAK", "AVENUE", "CARLTON", ""),
        ("Flat 2, 40 High Rd", "2", "40", "HIGH", "ROAD", "", ""),
        ("9 Lime Gr Mount Clear", "", "9", "LIME", "GROVE", "MT CLEAR", ""),
        # A house number typed against the street's name is read apart; a number's
        # suffix letter is not a name.
        ("UNIT 3 14EMU ROAD", "3", "14", "EMU", "ROAD", "", ""),
        ("17Morgan Street Mount Clear", "", "17", "MORGAN", "STREET", "MT CLEAR", ""),
        ("12A Smith St", "", "12A", "SMITH", "STREET", "", ""),
    ],
)
def test_parse_reads_real_world_forms(
    text: str,
    unit: str,
    number: str,
    street_name: str,
    street_type: str,
    locality: str,
    postcode: str,
) -> None:
    got = parsed(text)
    fields = ("unit", "number", "street_name", "street_type", "locality", "postcode")
    assert tuple(got[f] for f in fields) == (
        unit,
        number,
        street_name,
        street_type,
        locality,
        postcode,
    )


def test_keys_from_each_words_hashes_once_are_the_masked_words_keys() -> None:
    """The name keys made from every word's hashes (worked out once for the street and
    the full address) are ``sequence_keys`` of the masked words: repeated, reordered and
    accented words, empty and one-word addresses, a street with no locality."""
    texts = pd.Series(
        ["12 SMITH ST SMITH ST", "", "  ", "Ünit 2 12 Smïth St Kew", "SMITH 12", "ST KILDA RD",
         "12 Smith St Kew", "12 Kew St Smith", "UNIT 5 12-14 HIGH STREET KEW VIC 3101", "x\x00y"],
        dtype=object,
    )  # fmt: skip
    analysis = address.Analysis.of(texts)
    words, parts = analysis.words, analysis.parts
    sound = address.string_hashes(address.soundex_keys(words.vocabulary))
    keys = analysis.keys()
    for mask, ordered, name in (
        (parts.is_street | parts.is_locality, True, "sound_full"),
        (parts.is_street, True, "sound_street"),
        (parts.is_street | parts.is_locality, False, "anyorder_full"),
        (parts.is_street, False, "anyorder_street"),
    ):
        masked = address.sequence_keys(words, sound, mask, ordered)
        assert np.array_equal(masked[analysis.codes], keys[name]), name
    assert (keys["sound_full"] == 0).sum() == 2  # the empty ones
    assert len(set(keys["sound_full"].tolist())) == len(texts) - 1
