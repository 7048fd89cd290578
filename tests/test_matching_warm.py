"""Building ahead what the index builds on first use (``warm_work``, ``warm_link_index``):
exactly what the modes then use, nothing they would not, and the same answers."""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest
from matching_assets import asset_frame, queries

from toolkit.importing.linking import warm_link_index
from toolkit.importing.rules import AssetLink, FieldRule, ImportRule
from toolkit.matching import AssetIndex, LookupOptions, resolve
from toolkit.matching.index import KeyTable
from toolkit.matching.modes import warm_work

# The sample's texts and one that nothing is like: every rank of soundex is tried.
TEXTS = [
    "12 Smith St Richmond",
    "12 smyth st",
    "005123",
    "C4",
    "7 Twin Ct Carlton",
    "U1 14 HIGH ST",
    "-37.0005, 144.0002",
    "99 NOWHERE PLACE ZZZ",
    "",
]


def _hashed(table: KeyTable) -> bool:
    """Whether a text table's sorted hashes are made (name keys are held sorted, with
    nothing more to build)."""
    return isinstance(table.distinct, np.ndarray) or "_text_hashes" in vars(table)


def _built(index: AssetIndex) -> set[Any]:
    """What the index holds that is built on first use: key tables (with their hash
    table or not), and the grid of boxes."""
    tables = {(key, _hashed(table)) for key, table in index._tables.items()}
    return tables | ({"box_grid"} & set(index._derived))


@pytest.mark.parametrize(
    "options",
    [
        {"mode": "soundex", "maxRank": 1},
        {"mode": "soundex", "maxRank": 3, "assetClass": "Property"},
        {"mode": "code", "codeField": "propnum"},
        {"mode": "code", "assetClass": "Property"},
        {"mode": "id"},
        {"mode": "name"},
        {"mode": "auto", "maxRank": 2},
        {"mode": "geo", "assetClass": "Property"},
        {"mode": "soundex", "maxRank": 3, "fallbackMode": "code", "codeField": "propnum"},
    ],
)
def test_warming_builds_what_the_mode_uses_and_answers_the_same(options: dict[str, Any]) -> None:
    wire = {**options, "useExternalLookups": False}
    cold = AssetIndex.from_frame(asset_frame())
    expected = resolve(cold, queries(*TEXTS), wire)
    used = _built(cold)
    assert used  # every one of these modes builds something on first use

    warm = AssetIndex.from_frame(asset_frame())
    options = LookupOptions.from_dict(wire)
    warm.allowed(options.asset_class)
    for build in warm_work(warm, options).values():
        build()
    assert _built(warm) == used
    got = resolve(warm, queries(*TEXTS), wire)
    pd.testing.assert_frame_equal(got, expected)
    assert _built(warm) == used  # answering built nothing more


def _rule(codefield: str | None, **options: Any) -> ImportRule:
    return ImportRule(
        name="warm-test",
        import_type="item",
        description="items linked by id, code, point and address",
        register="warm-test",
        fields=(FieldRule("reference", "Reference", required=True),),
        asset_link=AssetLink(
            id_column="assetId",
            lookup_column="Property Number",
            codefield=codefield,
            friendly_columns=("Address",),
            use_geometry=True,
            options={"mode": "soundex", "maxRank": 2, "assetClass": "Property", **options},
        ),
        matching_id="reference",
    )


# The tables of the rule's address way (soundex to rank 2, in class Property).
SOUNDEX_TO_RANK_2 = {
    ((key, "Property"), True)
    for rank in ("exact", "sound")
    for key in (f"{rank}_full", f"{rank}_street/bare", f"{rank}_street")
}


def test_a_rules_ways_are_warmed_each_with_its_options() -> None:
    index = AssetIndex.from_frame(asset_frame())
    warm_link_index(index, _rule("propnum"))
    assert _built(index) == {
        (("code:id", "Property"), True),
        (("code:propnum", "Property"), True),
        (("stripped:propnum", "Property"), True),
        "box_grid",
        *SOUNDEX_TO_RANK_2,
    }


def test_a_way_with_wrong_options_is_left_for_the_linking_to_refuse() -> None:
    """A code field the index lacks is an error only where some row takes that way: the
    warming skips it and warms the other ways."""
    index = AssetIndex.from_frame(asset_frame())
    warm_link_index(index, _rule("no-such-field"))
    built = _built(index)
    assert not any(isinstance(b, tuple) and b[0][0].endswith("no-such-field") for b in built)
    assert (("code:id", "Property"), True) in built and "box_grid" in built
    index = AssetIndex.from_frame(asset_frame())
    warm_link_index(index, _rule("propnum", maxRank=7))  # not a rank: soundex not warmed
    assert not any(isinstance(b, tuple) and b[0][0].startswith("sound") for b in _built(index))


def test_only_the_ways_the_file_gives_rows_to_are_warmed() -> None:
    """A file without the id and code columns (headings matched as the linking matches
    them: trimmed, any case) and without geometry warms only the address way."""
    index = AssetIndex.from_frame(asset_frame())
    warm_link_index(index, _rule("propnum"), columns=["Reference", " address "], geometry=False)
    assert _built(index) == SOUNDEX_TO_RANK_2
    index = AssetIndex.from_frame(asset_frame())
    warm_link_index(index, _rule("propnum"), columns=["PROPERTY NUMBER"], geometry=True)
    assert _built(index) == {
        (("code:propnum", "Property"), True),
        (("stripped:propnum", "Property"), True),
        "box_grid",
    }
