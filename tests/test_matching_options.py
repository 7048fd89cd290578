from __future__ import annotations

from typing import Any

import pytest

from toolkit.errors import OptionError, ToolkitError
from toolkit.matching import MODES, LookupOptions


def test_defaults_are_the_spec_defaults() -> None:
    options = LookupOptions.from_dict({})
    assert options == LookupOptions(
        mode="soundex",
        asset_class=None,
        use_external_lookups=True,
        max_rank=2,
        fallback_mode=None,
        code_field=None,
        upgrade_external_lookup_to_internal_asset=False,
        geocoder_options={},
    )
    assert MODES == ("id", "code", "name", "contains", "soundex", "geo", "auto", "fuzzy")


def test_wire_names_and_get_strings() -> None:
    options = LookupOptions.from_dict(
        {
            "mode": "code",
            "assetClass": "Property",
            "useExternalLookups": "false",
            "maxRank": "3",
            "fallbackMode": "fuzzy",
            "codeField": "propnum",
            "upgradeExternalLookupToInternalAsset": "true",
            "geocoderOptions": '{"requiredFeatures": ["premise"]}',
        }
    )
    assert options.to_dict() == {
        "mode": "code",
        "assetClass": "Property",
        "useExternalLookups": False,
        "maxRank": 3,
        "fallbackMode": "fuzzy",
        "codeField": "propnum",
        "upgradeExternalLookupToInternalAsset": True,
        "geocoderOptions": {"requiredFeatures": ["premise"]},
    }


@pytest.mark.parametrize(
    ("given", "message"),
    [
        (
            {"mode": "magic"},
            "option mode is 'magic'; allowed: id, code, name, contains, soundex, geo, auto, fuzzy",
        ),
        (
            {"fallbackMode": "x"},
            "option fallbackMode is 'x'; allowed: id, code, name, contains, soundex, geo, auto, "
            "fuzzy",
        ),
        ({"maxRank": 4}, "option maxRank is 4; allowed: 1, 2, 3"),
        ({"maxRank": "two"}, "option maxRank is 'two'; allowed: 1, 2, 3"),
        ({"maxRank": True}, "option maxRank is True; allowed: 1, 2, 3"),
        (
            {"useExternalLookups": "maybe"},
            "option useExternalLookups is 'maybe'; allowed: true, false",
        ),
        ({"assetClass": 5}, "option assetClass is 5; it must be a non-empty string"),
        ({"geocoderOptions": [1]}, "option geocoderOptions is [1]; it must be an object"),
        (
            {"upgradeExternalLookupToInternalAsset": True},
            "option upgradeExternalLookupToInternalAsset requires assetClass: name the asset "
            "class the external result should be upgraded to",
        ),
        (
            {"mdoe": "id", "colour": 1},
            "unknown lookup option 'colour', 'mdoe'; known options: assetClass, codeField, "
            "fallbackMode, geocoderOptions, maxRank, mode, upgradeExternalLookupToInternalAsset, "
            "useExternalLookups",
        ),
    ],
)
def test_bad_options_name_the_value_and_the_allowed_set(
    given: dict[str, Any], message: str
) -> None:
    with pytest.raises(OptionError) as caught:
        LookupOptions.from_dict(given)
    assert str(caught.value) == message
    assert isinstance(caught.value, ToolkitError)
