from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import geopandas as gpd
import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
import shapely
from hypothesis import given, settings
from hypothesis import strategies as st
from matching_assets import asset_frame, ipc_bytes, parquet_dump, queries, rewritten_dump

from toolkit.engine import index_ref
from toolkit.engine.index_ref import IndexRef, loaded_index
from toolkit.errors import MatchingError
from toolkit.matching import AssetIndex, resolve
from toolkit.matching import index as index_module
from toolkit.matching.address import Analysis
from toolkit.matching.asset_side import AssetSide
from toolkit.matching.boxes import BoxGrid
from toolkit.matching.index import FORMAT_VERSION, KeyTable
from toolkit.matching.parsed import ASSET_FIELDS, Parsed
from toolkit.matching.probabilistic import estimate_u

MODES_TO_COMPARE = [
    {"mode": "soundex", "maxRank": 3},
    {"mode": "code"},
    {"mode": "name"},
    {"mode": "fuzzy"},
    {"mode": "auto"},
    {"mode": "geo"},
]
TEXTS = [
    "12 Smith St Richmond",
    "12 smyth st",
    "005123",
    "7 Twin Ct Carlton",
    "U1 14 HIGH ST",
    "-37.0005, 144.0002",
    "",
]


def test_index_keeps_fields_and_extra_codes() -> None:
    index = AssetIndex.from_frame(asset_frame())
    assert len(index) == 10
    assert index.extra_fields == ("propnum", "valnum")
    assert index.code_fields() == ["id", "code", "propnum", "valnum"]
    assert index.classes() == ["Hydrant", "Property"]
    assert index.assets.loc[8, "active"] is False or not index.assets.loc[8, "active"]
    assert index.assets["friendly"].iloc[0] == "12 Smith Street, Richmond"


def test_save_and_load_give_identical_answers(tmp_path: Path) -> None:
    built = AssetIndex.from_frame(asset_frame())
    folder = built.save(tmp_path / "assets.index")
    header = json.loads((folder / "index.json").read_text("utf-8"))
    assert header == {
        "format": "toolkit-asset-index",
        "version": FORMAT_VERSION,
        "assets": 10,
        "extra_fields": ["propnum", "valnum"],
    }
    loaded = AssetIndex.load(folder)
    for options in MODES_TO_COMPARE:
        expected = resolve(built, queries(*TEXTS), {**options, "useExternalLookups": False})
        got = resolve(loaded, queries(*TEXTS), {**options, "useExternalLookups": False})
        pd.testing.assert_frame_equal(got, expected)
    assert shapely.equals(loaded.geometry[0], built.geometry[0])
    assert loaded.geometry[3] is None


def test_pickled_index_answers_the_same() -> None:
    built = AssetIndex.from_frame(asset_frame())
    copy = pickle.loads(pickle.dumps(built))
    for options in MODES_TO_COMPARE:
        expected = resolve(built, queries(*TEXTS), {**options, "useExternalLookups": False})
        got = resolve(copy, queries(*TEXTS), {**options, "useExternalLookups": False})
        pd.testing.assert_frame_equal(got, expected)


def test_load_of_a_missing_or_foreign_folder_names_it(tmp_path: Path) -> None:
    with pytest.raises(MatchingError, match=f"{tmp_path / 'nowhere'} is not an asset index"):
        AssetIndex.load(tmp_path / "nowhere")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "index.json").write_text('{"format": "x", "version": 1}')
    with pytest.raises(MatchingError) as caught:
        AssetIndex.load(tmp_path / "other")
    assert str(caught.value) == (
        f"{tmp_path / 'other'} holds format 'x' version 1; "
        f"expected 'toolkit-asset-index' version {FORMAT_VERSION}"
    )


def test_a_dump_gives_identical_answers_and_older_dumps_still_load() -> None:
    built = AssetIndex.from_frame(asset_frame())
    out = io.BytesIO()
    built.dump(out)
    loaded = AssetIndex.loads(out.getvalue(), "site.sqlite")
    # Consumed: the buffer is let go once decoded, and the index answers the same.
    held = bytearray(out.getvalue())
    consumed = AssetIndex.loads(held, "site.sqlite", consume=True)
    assert held == bytearray()
    for options in MODES_TO_COMPARE:
        expected = resolve(built, queries(*TEXTS), {**options, "useExternalLookups": False})
        for index in (loaded, consumed):
            got = resolve(index, queries(*TEXTS), {**options, "useExternalLookups": False})
            pd.testing.assert_frame_equal(got, expected)
    # A dump of the earlier encoding (Parquet tables, no "encoding" in the header) is read.
    older = parquet_dump(out.getvalue())
    got = resolve(AssetIndex.loads(older), queries(*TEXTS), {"mode": "fuzzy"})
    expected = resolve(built, queries(*TEXTS), {"mode": "fuzzy"})
    pd.testing.assert_frame_equal(got, expected)
    foreign = out.getvalue().replace(b'"encoding": "arrow-ipc-zstd"', b'"encoding": "pickle"')
    with pytest.raises(MatchingError) as caught:
        AssetIndex.loads(foreign, "site.sqlite")
    assert str(caught.value) == (
        "site.sqlite holds an asset index encoded as 'pickle'; this toolkit reads "
        "'arrow-ipc-zstd', 'parquet'"
    )


def test_load_of_a_corrupt_index_names_the_folder(tmp_path: Path) -> None:
    folder = AssetIndex.from_frame(asset_frame()).save(tmp_path / "idx")
    (folder / "names.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(MatchingError, match=f"the asset index in {folder} is corrupt"):
        AssetIndex.load(folder)


def test_required_columns_and_ids() -> None:
    with pytest.raises(MatchingError) as caught:
        AssetIndex.from_frame(pd.DataFrame({"id": ["1"], "label": ["x"]}))
    assert str(caught.value) == (
        "the asset table has no name column; required: id, name; found: id, label"
    )
    with pytest.raises(MatchingError, match=r"assets without an id at rows \[1\]"):
        AssetIndex.from_frame(pd.DataFrame({"id": ["1", " "], "name": ["a", "b"]}))


def test_plain_dataframe_without_geometry_is_indexed() -> None:
    index = AssetIndex.from_frame(
        pd.DataFrame({"id": [1, 2], "name": ["1 A St", "2 B St"], "propnum": [10, None]})
    )
    result = resolve(index, queries("2 b street", "10"), {"mode": "auto"})
    assert result["asset_id"].tolist() == ["2", "1"]
    geo = resolve(index, queries("-37, 144"), {"mode": "geo", "useExternalLookups": False})
    assert geo.loc[0, "err"] == "no asset covers this location"


def test_other_crs_is_reprojected_to_4326() -> None:
    frame = gpd.GeoDataFrame(
        {"id": ["P"], "name": ["1 A St"]},
        geometry=[shapely.box(144.0, -37.001, 144.001, -37.0)],
        crs=4326,
    ).to_crs(3857)
    index = AssetIndex.from_frame(frame)
    assert shapely.get_coordinates(index.geometry[0]).min(axis=0) == pytest.approx([144.0, -37.001])


def test_active_flags_from_text() -> None:
    index = AssetIndex.from_frame(
        pd.DataFrame(
            {"id": list("abcd"), "name": list("wxyz"), "active": ["yes", "0", None, "false"]}
        )
    )
    assert index.assets["active"].tolist() == [True, False, True, False]


def test_a_loaded_index_decodes_only_the_geometries_a_lookup_tests() -> None:
    # Two squares sharing an edge, an empty geometry, a missing one and a point asset.
    frame = gpd.GeoDataFrame(
        {"id": ["1", "2", "3", "4", "5"], "name": ["A", "B", "C", "D", "E"]},
        geometry=[
            shapely.box(144.0, -37.0, 144.1, -36.9),
            shapely.box(144.1, -37.0, 144.2, -36.9),
            shapely.Polygon(),
            None,
            shapely.Point(145.0, -38.0),
        ],
        crs=4326,
    )
    built = AssetIndex.from_frame(frame)
    out = io.BytesIO()
    built.dump(out)
    loaded = AssetIndex.loads(out.getvalue())
    assert loaded._geometry is None and not loaded.outdated
    texts = ["-36.95, 144.05", "-36.95, 144.1", "-36.95, 144.15", "-38.0, 145.0", "-1, 1"]
    geo = {"mode": "geo", "useExternalLookups": False}
    expected = resolve(built, queries(*texts), geo)
    got = resolve(loaded, queries(*texts), geo)
    pd.testing.assert_frame_equal(got, expected)
    # In square 1, on the shared edge (a tie), in square 2, on the point asset, nowhere.
    assert got["asset_id"].tolist()[:1] == ["1"] and got["asset_id"].tolist()[2:4] == ["2", "5"]
    assert got["err"][1] == "2 assets cover this location; none chosen"
    assert loaded._geometry is None  # the tree came from the saved boxes
    assert shapely.equals(loaded.geometry[1], built.geometry[1])
    assert loaded.geometry[3] is None and shapely.is_empty(loaded.geometry[2])
    # Saved by an older toolkit (no boxes): the geometries are decoded for the tree, and
    # the index says it is worth saving again.
    older = _without_boxes(out.getvalue())
    outdated = AssetIndex.loads(older)
    assert outdated.outdated
    pd.testing.assert_frame_equal(resolve(outdated, queries(*texts), geo), expected)
    again = io.BytesIO()
    outdated.dump(again)
    assert not AssetIndex.loads(again.getvalue()).outdated


def _without_boxes(data: bytes) -> bytes:
    """A dump as written before the boxes were saved: its assets table without them."""

    def boxless(name: str, table: pa.Table) -> bytes:
        if name == "assets":
            table = table.drop_columns(
                [c for c in table.column_names if c.startswith("geometry_") and c != "geometry_wkb"]
            )
        return ipc_bytes(table)

    return rewritten_dump(data, boxless)


@pytest.mark.parametrize("hashing", ["real", "by length"])
def test_text_keys_are_found_by_hash_and_checked_against_their_text(
    monkeypatch: pytest.MonkeyPatch, hashing: str
) -> None:
    """A code table finds each text key through its hash, and takes a hit only when the
    texts are equal: with a hash that gives every text of one length the same value, a
    text of another key's length is not that key ("X22" is not "B22"), and a table whose
    keys share a hash looks them up by their text alone. Nulls and unknown texts find
    nothing."""
    if hashing == "by length":

        def by_length(values: pa.Array) -> np.ndarray:
            return np.array([len(v or "") for v in values.to_pylist()], dtype=np.uint64)

        monkeypatch.setattr(index_module, "text_hashes", by_length)

    def found(keys: list[str], wanted: list[str | None]) -> list[list[int]]:
        assets = np.arange(len(keys), dtype=np.int64)
        table = KeyTable.build(pa.array(keys, pa.large_string()), assets, assets >= 0)
        first, count = table.lookup(pa.array(wanted, pa.large_string()))
        return [
            sorted(table.assets[f : f + c].tolist()) if c else []
            for f, c in zip(first.tolist(), count.tolist(), strict=True)
        ]

    wanted = ["B22", None, "ZZ", "A1", "D4444", "X22", "E1"]
    assert found(["A1", "B22", "C333", "A1", "D4444"], wanted) == [
        [1], [], [], [0, 3], [4], [], [],
    ]  # fmt: skip
    assert found(["A1", "B22", "E1", "D4444"], wanted) == [[1], [], [], [0], [3], [], [2]]


@settings(max_examples=60, deadline=None)
@given(
    keys=st.lists(
        st.one_of(st.none(), st.sampled_from(["A1", "b", "É9", "", "A1 ", "7"])), max_size=30
    ),
    allowed_seed=st.integers(0, 2**16),
    wanted=st.lists(
        st.one_of(st.none(), st.sampled_from(["A1", "b", "É9", "", "Z", "7"])), max_size=8
    ),
)
def test_a_text_table_finds_exactly_the_allowed_assets_of_each_key(
    keys: list[str | None], allowed_seed: int, wanted: list[str | None]
) -> None:
    """Grouped by hash, a code table finds, for each query, the allowed assets whose key is
    that text (repeated keys, nulls, empty and non-ASCII texts): what a plain mapping of
    key to assets gives."""
    assets = np.arange(len(keys), dtype=np.int64)
    allowed = np.random.default_rng(allowed_seed).random(len(keys)) < 0.7
    table = KeyTable.build(pa.array(keys, pa.large_string()), assets, allowed)
    first, count = table.lookup(pa.array(wanted, pa.large_string()))
    found = [
        sorted(table.assets[f : f + c].tolist()) if c else []
        for f, c in zip(first.tolist(), count.tolist(), strict=True)
    ]
    expected = [
        [i for i, key in enumerate(keys) if w is not None and key == w and allowed[i]]
        for w in wanted
    ]
    assert found == expected


def test_a_dump_leaves_the_key_table_encoded_until_some_assets_are_left_out() -> None:
    built = AssetIndex.from_frame(asset_frame())
    out = io.BytesIO()
    built.dump(out)
    loaded = AssetIndex.loads(out.getvalue())
    side = loaded.fuzzy_side()
    assert len(side.parsed.keys) == 0 and "table" not in side._key_source
    every = np.ones(len(side.parsed), dtype=bool)
    assert side.groups_for(every) is side.groups and "table" not in side._key_source
    # A9 is inactive, A8 a hydrant: a lookup of properties groups the keys of the others.
    for options in ({"mode": "fuzzy"}, {"mode": "fuzzy", "assetClass": "Property"}):
        expected = resolve(built, queries(*TEXTS), options)
        pd.testing.assert_frame_equal(resolve(loaded, queries(*TEXTS), options), expected)
    key_rows, keys = side.key_table()
    np.testing.assert_array_equal(key_rows, built.fuzzy_side().parsed.key_rows)
    np.testing.assert_array_equal(keys, built.fuzzy_side().parsed.keys)
    assert len(keys) > 100


def test_the_fuzzy_side_parses_readings_only_for_u_pairs_and_gets_the_same_u() -> None:
    streets = ["SMITH STREET", "HIGH ST", "TWIN CT", "OLD ROAD", "LAKE GARDENS", "ST KILDA RD"]
    places = ["RICHMOND VIC 3121", "KEW", "CARLTON", "", "MOUNT HELEN 3350"]
    names = pd.Series(
        [
            f"{'UNIT 2 ' if i % 7 == 0 else ''}{i % 40 + 1} {streets[i % 6]} {places[i % 5]}"
            for i in range(400)
        ],
        dtype="str",
    )
    side = AssetSide.of(names)
    full = Parsed.of(Analysis.of(names))  # every reading of every name
    expected = estimate_u(full)
    assert set(side.u) == set(expected)
    for component, u in expected.items():
        np.testing.assert_array_equal(side.u[component], u)
    kept = full.restricted(ASSET_FIELDS)
    assert side.parsed.vocabulary.tolist() == kept.vocabulary.tolist()
    for field in ASSET_FIELDS:
        np.testing.assert_array_equal(side.parsed.codes[field], kept.codes[field])
    np.testing.assert_array_equal(side.parsed.keys, kept.keys)
    assert "alpha" in full.codes and "alpha" not in side.parsed.codes


def test_mode_geo_builds_its_grid_of_boxes_once_per_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Parts of an import and repeated lookups reuse the index's grid; the index a worker
    keeps (by stamp) keeps it too; a changed index (new stamp) builds its own."""
    built: list[np.ndarray] = []
    real_of = BoxGrid.of.__func__  # type: ignore[attr-defined]  # the classmethod's function

    def counted(cls: type[BoxGrid], bounds: np.ndarray) -> BoxGrid:
        built.append(bounds)
        grid: BoxGrid = real_of(cls, bounds)
        return grid

    monkeypatch.setattr(BoxGrid, "of", classmethod(counted))
    geo = {"mode": "geo", "useExternalLookups": False}
    parts = [
        queries("-37.0105, 144.0105", "-37.0205, 144.0205"),
        queries("-37.0305, 144.0305", "-1, 1"),
        queries("-37.0605, 144.0605"),
    ]
    index = AssetIndex.from_frame(asset_frame())
    ids = [resolve(index, part, geo)["asset_id"].fillna("-").tolist() for part in parts]
    assert ids == [["A3", "A5"], ["A6", "-"], ["-"]]  # A9 is inactive
    assert len(built) == 1

    # A worker's index, loaded once per stamp, keeps its grid across tasks.
    ref = IndexRef.publish(index, tmp_path)
    monkeypatch.setattr(index_ref, "_LOADED", {})  # as in a fresh worker process
    for part in parts:
        resolve(loaded_index(ref), part, geo)
    assert len(built) == 2 and loaded_index(ref) is loaded_index(ref)

    # The assets change: parcel A3 moves; the new index's grid has it at its new place.
    frame = asset_frame()
    moved_a3 = shapely.box(144.100, -37.101, 144.101, -37.100)
    frame.loc[2, "geometry"] = moved_a3  # type: ignore[call-overload]  # stubs: no shapely values
    changed = IndexRef.publish(AssetIndex.from_frame(frame), tmp_path)
    assert changed.stamp != ref.stamp
    monkeypatch.setattr(index_ref, "_LOADED", {})
    moved = queries("-37.0105, 144.0105", "-37.1005, 144.1005")
    assert resolve(loaded_index(changed), moved, geo)["asset_id"].fillna("-").tolist() == [
        "-",
        "A3",
    ]
    assert len(built) == 3
    assert resolve(index, moved, geo)["asset_id"].fillna("-").tolist() == ["A3", "-"]  # the old one
    assert len(built) == 3


@settings(max_examples=80, deadline=None)
@given(
    codes=st.lists(
        st.one_of(
            st.none(),
            st.text(alphabet="00123x٣ ", max_size=6),
            st.from_regex(r"0*[0-9]{1,4}", fullmatch=True),
        ),
        max_size=30,
    )
)
def test_leading_zeros_are_stripped_from_digit_codes_alone(codes: list[str | None]) -> None:
    """A code of ASCII digits loses its leading zeros, keeping one digit at least ("000"
    is "0"); any other code (letters, spaces, other digits, empty, missing) is null."""
    stripped = index_module.strip_leading_zeros(pa.array(codes, pa.large_string()))
    expected = [
        (c.lstrip("0") or "0") if c and all("0" <= ch <= "9" for ch in c) else None for c in codes
    ]
    assert stripped.to_pylist() == expected
