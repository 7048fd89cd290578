"""The probabilistic matcher: EM recovers m, ties abstain, blocking survives one error."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.matching import AssetIndex, blocking, resolve
from toolkit.matching import probabilistic as prob
from toolkit.matching.address import Analysis
from toolkit.matching.blocking import MAX_CANDIDATES, KeyGroups, candidate_pairs
from toolkit.matching.parsed import Parsed

OFF = {"useExternalLookups": False, "mode": "fuzzy"}


def test_em_recovers_known_m_from_unlabelled_candidate_pairs() -> None:
    rng = np.random.default_rng(7)
    n_queries, per_query, n_assets = 3000, 5, 100
    true_m = {
        c: np.asarray(v)
        for c, v in {
            "number": (0.7, 0.1, 0.2),
            "street": (0.6, 0.2, 0.1, 0.05, 0.05),
            "type": (0.9, 0.1),
            "locality": (0.5, 0.3, 0.1, 0.05, 0.05),
            "postcode": (0.8, 0.1, 0.1),
            "unit": (0.85, 0.1, 0.05),
            "state": (0.95, 0.05),
        }.items()
    }
    u = {
        c: np.asarray(v)
        for c, v in {
            "number": (0.02, 0.2, 0.78),
            "street": (0.002, 0.003, 0.01, 0.05, 0.935),
            "type": (0.3, 0.7),
            "locality": (0.01, 0.01, 0.02, 0.06, 0.9),
            "postcode": (0.05, 0.15, 0.8),
            "unit": (0.05, 0.15, 0.8),
            "state": (0.8, 0.2),
        }.items()
    }
    # Each query: its one true asset (levels drawn from m) and four others (from u).
    is_match = np.tile(np.arange(per_query) == 0, n_queries)
    q = np.repeat(np.arange(n_queries), per_query)
    levels = np.empty((len(q), len(prob.COMPONENTS)), dtype=np.int8)
    for i, c in enumerate(prob.COMPONENTS):
        levels[is_match, i] = rng.choice(len(true_m[c]), is_match.sum(), p=true_m[c])
        levels[~is_match, i] = rng.choice(len(u[c]), (~is_match).sum(), p=u[c])
    m, share = prob.fit_em(levels, q, n_queries, n_assets, u)
    for c in prob.COMPONENTS:
        np.testing.assert_allclose(m[c], true_m[c], atol=0.03, err_msg=c)
    assert share > 0.95


def _index(names: list[str]) -> AssetIndex:
    return AssetIndex.from_frame(
        pd.DataFrame({"id": [f"P{i}" for i in range(len(names))], "name": names})
    )


def test_two_equally_likely_assets_are_a_tie_with_the_reason() -> None:
    index = _index(["12 SMITH STREET KEW", "12 SMITH ROAD KEW", "4 JONES COURT RICHMOND"])
    result = resolve(index, pd.DataFrame({"query": ["12 SMITH KEW"]}), OFF)
    assert result["asset_position"].tolist() == [-1]
    assert result["candidates"].tolist() == [2]
    assert result["err"].str.startswith("the best candidates are about equally likely").all()


def test_a_typo_in_any_one_component_still_links() -> None:
    rng = np.random.default_rng(3)
    streets = [
        "SMITH", "JONES", "BROWN", "WILSON", "TAYLOR", "MARTIN", "WHITE", "CLARKE", "HALL",
        "YOUNG", "KING", "WRIGHT", "WALKER", "GREEN", "BAKER", "ADAMS", "NELSON", "HILL",
    ]  # fmt: skip
    types = ["STREET", "ROAD", "AVENUE", "COURT", "CRESCENT"]
    towns = ["KEW", "RICHMOND", "CARLTON", "FITZROY", "BRIGHTON", "ELWOOD", "ESSENDON"]
    n = 3000
    frame = pd.DataFrame(
        {
            "number": rng.integers(1, 200, n),
            "street": rng.choice(streets, n),
            "type": rng.choice(types, n),
            "town": rng.choice(towns, n),
        }
    ).drop_duplicates()
    names = (
        frame["number"].astype(str) + " " + frame["street"] + " " + frame["type"] + " "
        + frame["town"]
    ).tolist()  # fmt: skip
    names += ["17 SMITH STREET KEW", "23 WILSON ROAD RICHMOND"]
    index = _index(names)
    queries = [
        "17 SMTIH STREET KEW",  # street transposition
        "17 SMITH SETREET KEW",  # street type misspelt
        "23 WILSON ROAD RICHMNOD",  # locality
        "SMITH STREET KEW 17",  # number moved
        "17 SMITHSTREET KEW",  # joined words
        "23 WIL SON ROAD RICHMOND",  # split word
        "23 ROAD WILSON RICHMOND",  # the type before the name
        "23 RD WILSON",  # ... abbreviated, the locality left out
    ]
    result = resolve(index, pd.DataFrame({"query": queries}), OFF)
    expected = ["17 SMITH STREET KEW"] * 2 + ["23 WILSON ROAD RICHMOND"]
    expected += ["17 SMITH STREET KEW"] * 2 + ["23 WILSON ROAD RICHMOND"] * 3
    got = [None if p < 0 else names[p] for p in result["asset_position"]]
    assert got == expected, result["err"].tolist()
    assert (result["accuracy"] >= 80).all()


def _council(
    seed: int, n: int, numbers: int, streets: list[str], types: list[str], towns: list[str]
) -> list[str]:
    """Sorted distinct random addresses ``NUMBER STREET TYPE TOWN``."""
    rng = np.random.default_rng(seed)
    drawn = zip(
        rng.integers(1, numbers, n),
        rng.choice(streets, n),
        rng.choice(types, n),
        rng.choice(towns, n),
        strict=True,
    )
    return sorted({f"{number} {street} {kind} {town}" for number, street, kind, town in drawn})


def test_an_address_written_suburb_first_links_to_that_suburb() -> None:
    # The same number and street in several suburbs: only the suburb, typed first,
    # tells them apart.
    towns = [
        "KEW", "RICHMOND", "CARLTON", "MOUNT HELEN", "LAKE WENDOUREE", "BRIGHTON", "ELWOOD",
        "ESSENDON", "FITZROY", "SEBASTOPOL", "BUNINYONG", "CRESWICK", "LEARMONTH", "ALFREDTON",
        "CARDIGAN", "NERRINA", "DUNNSTOWN", "YENDON", "CLARENDON", "EUREKA",
    ]  # fmt: skip
    streets = [
        "SMITH", "RAILWAY", "WILSON", "HIGH", "OAK", "LYDIARD", "BROWN", "KING", "TAYLOR",
        "MARTIN", "WHITE", "CLARKE", "HALL", "YOUNG", "WRIGHT", "WALKER", "GREEN", "BAKER",
        "ADAMS", "NELSON", "HILL", "STURT", "DRUMMOND", "DOVETON",
    ]  # fmt: skip
    names = _council(5, 6000, 120, streets, ["STREET", "ROAD", "AVENUE", "COURT"], towns)
    names = sorted({*names, *(f"19 RAILWAY ROAD {town}" for town in towns)})
    index = _index(names)
    queries = ["MOUNT HELEN 19 RAILWAY ROAD", "KEW 19 RAILWAY RD", "Sebastopol 19 RAILWAY ROAD"]
    result = resolve(index, pd.DataFrame({"query": queries}), OFF)
    got = [None if p < 0 else names[p] for p in result["asset_position"]]
    expected = [f"19 RAILWAY ROAD {town}" for town in ("MOUNT HELEN", "KEW", "SEBASTOPOL")]
    assert got == expected, result["err"].tolist()
    # Without the suburb the same text is a tie among the suburbs, not a guess.
    alone = resolve(index, pd.DataFrame({"query": ["19 RAILWAY ROAD"]}), OFF)
    assert alone["asset_position"].tolist() == [-1]
    assert alone["err"].str.startswith("the best candidates are about equally likely").all()


def test_a_short_street_name_one_letter_wrong_links() -> None:
    # Jaro–Winkler alone scores KGAN/KHAN, CZOK/COOK, MIR/MAIR below its near band; one
    # edit apart they are near matches (random street names seldom are).
    streets = [
        "KHAN", "COOK", "MAIR", "GRAY", "KENT", "BASS", "WREN", "ASH", "HALL", "YOUNG", "KING",
        "WRIGHT", "WALKER", "GREEN", "BAKER", "ADAMS", "NELSON", "HILL", "STURT", "LYONS",
    ]  # fmt: skip
    towns = ["KEW", "RICHMOND", "CARLTON", "FITZROY", "BRIGHTON", "ELWOOD", "ESSENDON", "REDAN"]
    names = _council(11, 4000, 150, streets, ["STREET", "ROAD", "LANE", "COURT"], towns)
    names = sorted({*names, "17 KHAN LANE KEW", "30 COOK COURT REDAN", "7 MAIR STREET ELWOOD"})
    index = _index(names)
    queries = ["17 KGAN LANE KEW", "30 CZOK COURT REDAN", "7 MIR STREET ELWOOD"]
    result = resolve(index, pd.DataFrame({"query": queries}), OFF)
    got = [None if p < 0 else names[p] for p in result["asset_position"]]
    assert got == ["17 KHAN LANE KEW", "30 COOK COURT REDAN", "7 MAIR STREET ELWOOD"], result[
        "err"
    ].tolist()


def _one_edit_neighbours(text: str, letters: str) -> set[str]:
    """Every text one edit (OSA: a letter changed, added, dropped, or two swapped) away."""
    out = {text[:i] + c + text[i:] for i in range(len(text) + 1) for c in letters}
    out |= {text[:i] + text[i + 1 :] for i in range(len(text))}
    out |= {text[:i] + c + text[i + 1 :] for i in range(len(text)) for c in letters}
    out |= {text[:i] + text[i + 1] + text[i] + text[i + 2 :] for i in range(len(text) - 1)}
    return out - {text}


def test_texts_one_edit_apart_score_above_the_near_miss_floor() -> None:
    # near_miss measures edits only where Jaro-Winkler reaches NEAR_MISS_MIN_SIMILARITY: that
    # loses no near miss only if every pair one edit apart scores above it. The worst cases
    # are short texts of few letters repeated (greedy matching and transpositions); every
    # such text is tried.
    from itertools import product

    from rapidfuzz import process
    from rapidfuzz.distance import JaroWinkler

    left: list[str] = []
    right: list[str] = []
    for letters, longest in (("AB", 9), ("ABC", 7), ("ABCD", 5)):
        for n in range(prob.NEAR_MISS_MIN_LENGTH - 1, longest + 1):
            for chars in product(letters, repeat=n):
                text = "".join(chars)
                for other in _one_edit_neighbours(text, letters):
                    if max(len(text), len(other)) >= prob.NEAR_MISS_MIN_LENGTH:
                        left.append(text)
                        right.append(other)
    sim = process.cpdist(left, right, scorer=JaroWinkler.normalized_similarity, workers=-1)
    assert len(sim) > 100_000
    assert sim.min() == pytest.approx(0.738, abs=0.001)  # AABCBAB / BABCBAB
    assert sim.min() > prob.NEAR_MISS_MIN_SIMILARITY + 0.1


def test_near_misses_are_those_of_measuring_every_pair() -> None:
    # Pairs one edit apart (and others), short and long: near_miss raises exactly the pairs
    # that measuring every pair's edits and lengths would.
    rng = np.random.default_rng(3)
    letters = "ABCDEKLMNORST"
    words = ["".join(rng.choice(list(letters), rng.integers(2, 10))) for _ in range(3000)]
    left = np.array(words, dtype=object)
    edited = [sorted(_one_edit_neighbours(w, letters))[rng.integers(0, 20)] for w in words[:1500]]
    right = np.array(edited + list(rng.choice(words, 1500)), dtype=object)
    from rapidfuzz import process
    from rapidfuzz.distance import OSA, JaroWinkler

    sim = process.cpdist(left, right, scorer=JaroWinkler.normalized_similarity)
    at = np.arange(len(left))
    raised = sim.copy()
    prob.near_miss(left, right, raised, at)
    distance = process.cpdist(left, right, scorer=OSA.distance)
    longer = np.array([max(len(a), len(b)) for a, b in zip(left, right, strict=True)])
    near = (sim < prob.TEXT_BANDS[0]) & (distance <= 1) & (longer >= prob.NEAR_MISS_MIN_LENGTH)
    assert near.sum() > 300
    expected = np.where(near, prob.TEXT_BANDS[0], sim)
    np.testing.assert_array_equal(raised, expected)


def _town_names() -> list[str]:
    return [
        "12 SMITH STREET KEW",
        "14 SMITH STREET KEW",
        "3 JONES COURT RICHMOND",
        "UNIT 2 7 OAK AVENUE CARLTON",
        "40 HIGH ROAD FITZROY 3065",
    ]


TOWN_QUERIES = ["12 SMTIH ST KEW", "3 JONES CRT RICHMND", "2/7 OAK AVE CARLTON", "40 HIGH RD"]


def test_a_saved_index_keeps_its_fuzzy_side_and_links_the_same(tmp_path: Path) -> None:
    index = _index(_town_names())
    queries = pd.DataFrame({"query": TOWN_QUERIES})
    before = resolve(index, queries, OFF)
    index.save(tmp_path / "index")
    assert (tmp_path / "index" / "fuzzy" / "side.json").is_file()
    loaded = AssetIndex.load(tmp_path / "index")
    side, saved = index.fuzzy_side(), loaded.fuzzy_side()
    assert saved.parsed.vocabulary.tolist() == side.parsed.vocabulary.tolist()
    np.testing.assert_array_equal(saved.parsed.keys, side.parsed.keys)
    np.testing.assert_array_equal(saved.groups.rows, side.groups.rows)
    after = resolve(loaded, queries, OFF)
    assert after["asset_id"].tolist() == before["asset_id"].tolist() == ["P0", "P2", "P3", "P4"]
    np.testing.assert_allclose(after["probability"], before["probability"])


def test_a_damaged_fuzzy_side_is_rebuilt_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    index = _index(_town_names())
    index.save(tmp_path / "index")
    (tmp_path / "index" / "fuzzy" / "keys.npy").write_bytes(b"not an array")
    loaded = AssetIndex.load(tmp_path / "index")
    with caplog.at_level("WARNING"):
        result = resolve(loaded, pd.DataFrame({"query": TOWN_QUERIES}), OFF)
    assert "rebuilding the fuzzy matching data" in caplog.text
    assert result["asset_id"].tolist() == ["P0", "P2", "P3", "P4"]


def test_candidates_are_capped_per_query_keeping_those_sharing_most_keys() -> None:
    names = [f"{n} SMITH STREET KEW" for n in range(1, 61)] + ["7 JONES ROAD RICHMOND"]
    assets = Parsed.of(Analysis.of(pd.Series(names)))
    queries = Parsed.of(
        Analysis.of(pd.Series(["7 SMITH STREET KEW", "7 JONES RD RICHMOND", "99 NOWHERE"])),
        field_data=True,
    )
    groups = KeyGroups.of(assets.key_rows, assets.keys)
    q, a = candidate_pairs(queries, groups, len(assets))
    assert (np.diff(q) >= 0).all()  # grouped by query
    per_query = np.bincount(q, minlength=3)
    assert per_query[0] == MAX_CANDIDATES < 61  # capped
    assert per_query[2] == 0  # shares no key with any asset
    chosen = {int(q_): set() for q_ in np.unique(q)}
    for q_, a_ in zip(q, a, strict=True):
        chosen[int(q_)].add(names[int(a_)])
    assert "7 SMITH STREET KEW" in chosen[0] and "7 JONES ROAD RICHMOND" in chosen[1]
    # Only the allowed assets count, and only they are offered.
    allowed = np.zeros(len(assets), dtype=bool)
    allowed[names.index("8 SMITH STREET KEW")] = True
    q, a = candidate_pairs(
        queries, KeyGroups.of(assets.key_rows, assets.keys, allowed), len(assets)
    )
    assert [names[int(x)] for x in a] == ["8 SMITH STREET KEW"] and q.tolist() == [0]


def test_a_batch_split_over_threads_links_exactly_as_in_one_piece(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    streets = ["SMITH", "JONES", "BROWN", "WILSON", "TAYLOR", "MARTIN", "WHITE", "CLARKE"]
    towns = ["KEW", "RICHMOND", "CARLTON", "FITZROY", "BRIGHTON", "ELWOOD"]
    frame = pd.DataFrame(
        {
            "number": rng.integers(1, 300, 2000).astype(str),
            "street": rng.choice(streets, 2000),
            "town": rng.choice(towns, 2000),
        }
    ).drop_duplicates()
    names = (frame["number"] + " " + frame["street"] + " STREET " + frame["town"]).tolist()
    index = _index(names)
    picked = rng.choice(len(names), 300)
    queries = pd.DataFrame(
        {"query": [names[i].replace(" STREET ", " ST ").replace("I", "Y", 1) for i in picked]}
    )
    whole = resolve(index, queries, OFF)
    # In ranges of 7 queries over threads, each range's pairs made 50 at a time.
    monkeypatch.setattr(prob, "PARALLEL_MIN_QUERIES", 2)
    monkeypatch.setattr(prob, "RANGE_QUERIES", 7)
    monkeypatch.setattr(blocking, "RANGE_PAIRS", 50)
    split = resolve(index, queries, OFF)
    pd.testing.assert_frame_equal(split, whole)
    expected = [f"P{i}" for i in picked]
    assert (whole["asset_id"] == expected).mean() > 0.9
    # The pairs themselves: in ranges, exactly those of one pass (and in its order).
    side = index.fuzzy_side()
    parsed = Parsed.of(Analysis.of(queries["query"]), field_data=True)
    groups = KeyGroups.of(side.parsed.key_rows, side.parsed.keys)
    in_ranges = candidate_pairs(parsed, groups, len(side.parsed))
    monkeypatch.setattr(blocking, "RANGE_PAIRS", 10**9)
    at_once = candidate_pairs(parsed, groups, len(side.parsed))
    assert len(at_once[0]) > 1000
    np.testing.assert_array_equal(in_ranges[0], at_once[0])
    np.testing.assert_array_equal(in_ranges[1], at_once[1])


def test_an_index_written_as_one_string_keeps_its_fuzzy_side(
    caplog: pytest.LogCaptureFixture,
) -> None:
    index = _index(_town_names())
    queries = pd.DataFrame({"query": TOWN_QUERIES})
    before = resolve(index, queries, OFF)
    out = io.BytesIO()
    index.dump(out)
    with caplog.at_level("WARNING"):
        loaded = AssetIndex.loads(out.getvalue())
        side = loaded.fuzzy_side()
        after = resolve(loaded, queries, OFF)
    assert "rebuilding" not in caplog.text
    np.testing.assert_array_equal(side.groups.rows, index.fuzzy_side().groups.rows)
    assert after["asset_id"].tolist() == before["asset_id"].tolist()
    np.testing.assert_allclose(after["probability"], before["probability"])


@pytest.mark.parametrize(
    "values",
    [
        np.array([5, 3, 5, 0, 3, 3, 9], dtype=np.int64),
        np.array([7], dtype=np.int64),
        np.array([], dtype=np.int64),
        # Too wide to pack whole beside the positions (their top bits are), and negative.
        np.array([2**62, 1, 2**62, 5], dtype=np.int64),
        np.array([-4, 2, -4], dtype=np.int64),
        np.random.default_rng(3).integers(0, 2**40, 200_000),
        np.random.default_rng(4).integers(0, 500, 200_000),
    ],
)
def test_factorize_gives_each_value_its_distinct_index(values: np.ndarray) -> None:
    """``_factorize``'s distinct values are each value once, and each value's index points
    at its own value: the set and grouping pandas' factorize gives."""
    distinct, inverse = prob._factorize(values)
    assert distinct.dtype == np.int64 and inverse.dtype == np.int64
    assert len(inverse) == len(values)
    assert np.array_equal(distinct[inverse], values)
    assert len(np.unique(distinct)) == len(distinct) == len(pd.unique(values))
    codes, _ = pd.factorize(values)
    # The same grouping: two values share an index exactly when pandas gives them one.
    assert len(pd.unique(codes.astype(np.int64) * (len(distinct) + 1) + inverse)) == len(distinct)
