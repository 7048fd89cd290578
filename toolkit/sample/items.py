"""Register items: the kinds of faulty rows, their shares, and the rows spoilt to match.

:func:`build_items` draws each row's kind and true parcel, then fills the address, suburb,
property number, coordinate or WKT columns as that kind spoils them (abbreviations, typos,
field noise, sounds-alike spellings, bad values), beside a truth table of the parcel meant.
"""

from __future__ import annotations

import math
from typing import Final, Literal, get_args

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.sample.columns import (
    assemble,
    choose,
    join_text,
    probabilities,
    take_strings,
    to_text,
)
from toolkit.sample.parcels import Parcels, expanded_name, inner_points, to_lonlat
from toolkit.sample.vocab import (
    ABSENT_STREET_NAMES,
    DAMAGE_LEVELS,
    DAMAGE_WEIGHTS,
    HABITABLE_VALUES,
    HABITABLE_WEIGHTS,
    INSPECTORS,
    LOCALITIES,
    NON_ASCII_INSPECTORS,
    NOTE_WEIGHTS,
    NOTES,
    STREET_NAMES,
    STREET_TYPES,
)

ITEM_COLUMNS: Final = (
    "Reference",
    "Address",
    "Suburb",
    "Property Number",
    "Latitude",
    "Longitude",
    "WKT",
    "Damage Level",
    "Inspection Date",
    "Habitable",
    "Occupants",
    "Inspector",
    "Notes",
)
TRUTH_COLUMNS: Final = ("Reference", "asset_id", "kind")
Kind = Literal[
    "exact",
    "abbreviated",
    "expanded",
    "typo",
    "unit",
    "missing_suburb",
    "swapped",
    "case_space",
    "field",
    "propnum_only",
    "coords_only",
    "wkt_only",
    "bad_address",
    "bad_latitude",
    "bad_wkt",
    "bad_date",
    "bad_occupants",
]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
# Share of item rows of each kind; "exact" takes what is left. Every kind gets at least one
# row once there are as many rows as kinds.
KIND_SHARES: Final[dict[Kind, float]] = {
    "abbreviated": 0.15,
    "expanded": 0.02,
    "typo": 0.10,
    "unit": 0.07,
    "missing_suburb": 0.08,
    "swapped": 0.05,
    "case_space": 0.08,
    "field": 0.15,
    "propnum_only": 0.05,
    "coords_only": 0.05,
    "wkt_only": 0.03,
    "bad_address": 0.002,
    "bad_latitude": 0.002,
    "bad_wkt": 0.002,
    "bad_date": 0.002,
    "bad_occupants": 0.002,
}
# Bad rows whose true parcel cannot be recovered from the row: their truth asset_id is empty.
NO_PARCEL_KINDS: Final[frozenset[Kind]] = frozenset({"bad_address", "bad_latitude", "bad_wkt"})


def _kind_counts(m: int) -> dict[Kind, int]:
    counts: dict[Kind, int] = {kind: math.floor(share * m) for kind, share in KIND_SHARES.items()}
    if m >= len(KINDS):
        counts = {kind: max(1, count) for kind, count in counts.items()}
    # Tiny sets: every kind once may be more than the shares allow; the largest give way.
    while sum(counts.values()) > m and max(counts.values()) > 1:
        counts[max(counts, key=lambda kind: counts[kind])] -= 1
    counts["exact"] = max(0, m - sum(counts.values()))
    return counts


def build_items(parcels: Parcels, m: int, rng: np.random.Generator) -> tuple[pa.Table, pa.Table]:
    """The register items and their truth: the parcel each row refers to and how it was spoilt."""
    n = parcels.corners.shape[0]
    everything = np.arange(n)
    located = np.setdiff1d(everything, parcels.bowtie)  # points inside a bow-tie are ambiguous
    expandable = np.array([expanded_name(name) != name for name in STREET_NAMES])
    abbreviable = np.array([STREET_TYPES[t][0] != t for t in STREET_TYPES])
    pools: dict[Kind, np.ndarray] = {
        "unit": np.flatnonzero(parcels.unit > 0),
        "expanded": np.flatnonzero(expandable[parcels.street_name]),
        "abbreviated": np.flatnonzero(abbreviable[parcels.street_type]),
        "coords_only": located,
        "wkt_only": located,
        "bad_latitude": located,
        "bad_wkt": located,
    }

    counts = _kind_counts(m)
    for kind, pool in pools.items():
        if pool.size == 0 and counts[kind]:  # too few parcels to have any of this kind
            counts["exact"] += counts[kind]
            counts[kind] = 0
    kind_of_row = np.repeat(np.arange(len(KINDS)), [counts[kind] for kind in KINDS])
    rng.shuffle(kind_of_row)
    rows_of = {kind: np.flatnonzero(kind_of_row == i) for i, kind in enumerate(KINDS)}
    target = np.empty(m, np.int64)
    for kind, rows in rows_of.items():
        pool = pools.get(kind, everything)
        if rows.size:
            target[rows] = rng.choice(pool, rows.size, replace=rows.size > pool.size)

    columns: dict[str, list[tuple[np.ndarray, pa.Array]]] = {
        "Address": [],
        "Suburb": [],
        "Property Number": [],
        "Latitude": [],
        "Longitude": [],
        "WKT": [],
    }
    for kind, rows in rows_of.items():
        if rows.size:
            for column, values in _spoil(kind, parcels, target[rows], rng).items():
                part_rows, part_values = values
                columns[column].append((rows[part_rows], part_values))

    width = max(6, len(str(m)))
    reference = join_text("DA", pc.utf8_lpad(to_text(np.arange(1, m + 1)), width, "0"), sep="-")
    damage = rng.choice(len(DAMAGE_LEVELS), m, p=probabilities(DAMAGE_WEIGHTS))
    days = np.datetime64("2026-02-01") + rng.integers(0, 45, m).astype("timedelta64[D]")
    iso = pa.array(np.datetime_as_string(days, unit="D"))
    australian = join_text(
        pc.utf8_slice_codeunits(iso, 8, 10),
        pc.utf8_slice_codeunits(iso, 5, 7),
        pc.utf8_slice_codeunits(iso, 0, 4),
        sep="/",
    )
    date = pc.if_else(pa.array(rng.random(m) < 0.15), australian, iso)
    occupants = to_text(rng.choice(7, m, p=probabilities((25, 20, 25, 12, 10, 5, 3))))
    inspector = rng.choice(len(INSPECTORS), m)
    if m >= 2:  # make sure the non-ASCII names are there
        for row, name in zip(rng.choice(m, 2, replace=False), NON_ASCII_INSPECTORS, strict=True):
            inspector[row] = INSPECTORS.index(name)
    bad_date, bad_occupants = rows_of["bad_date"], rows_of["bad_occupants"]
    date = assemble(
        m,
        [(bad_date, take_strings(("31/02/2026", "30/02/2026", "2026-02-30"), bad_date % 3))],
        date,
    )
    occupants = assemble(
        m, [(bad_occupants, take_strings(("three", "two", "four"), bad_occupants % 3))], occupants
    )

    items = pa.table(
        {
            "Reference": reference,
            **{column: assemble(m, parts) for column, parts in columns.items()},
            "Damage Level": take_strings(DAMAGE_LEVELS, damage),
            "Inspection Date": date,
            "Habitable": take_strings(
                HABITABLE_VALUES,
                rng.choice(len(HABITABLE_VALUES), m, p=probabilities(HABITABLE_WEIGHTS)),
            ),
            "Occupants": occupants,
            "Inspector": take_strings(INSPECTORS, inspector),
            "Notes": take_strings(NOTES, rng.choice(len(NOTES), m, p=probabilities(NOTE_WEIGHTS))),
        }
    )
    no_parcel = np.isin(kind_of_row, [KINDS.index(kind) for kind in NO_PARCEL_KINDS])
    truth = pa.table(
        {
            "Reference": reference,
            "asset_id": pc.if_else(
                pa.array(no_parcel),
                pa.scalar(None, pa.string()),
                pc.take(parcels.table["id"], target),
            ),
            "kind": take_strings(KINDS, kind_of_row),
        }
    )
    return items, truth


_Spoilt = dict[str, tuple[np.ndarray, pa.Array]]


def _spoil(kind: Kind, parcels: Parcels, target: np.ndarray, rng: np.random.Generator) -> _Spoilt:
    """The columns a row of this kind fills, each as (positions within ``target``, values)."""
    count = target.size
    every = np.arange(count)
    number = pc.take(parcels.number_text, target)
    name_idx = parcels.street_name[target]
    type_idx = parcels.street_type[target]
    name = take_strings(STREET_NAMES, name_idx)
    full_type = take_strings(tuple(STREET_TYPES), type_idx)
    locality = take_strings([loc for loc, _ in LOCALITIES], parcels.locality[target])
    suburb = pc.if_else(pa.array(rng.random(count) < 0.3), pc.utf8_title(locality), locality)
    street = join_text(name, full_type)
    address = join_text(number, street)

    def with_suburb(values: pa.Array) -> _Spoilt:
        return {"Address": (every, values), "Suburb": (every, suburb)}

    if kind in ("exact", "bad_date", "bad_occupants"):
        # A quarter of officers type the whole address, locality and postcode included.
        whole = pc.take(parcels.table["name"], target)
        return with_suburb(pc.if_else(pa.array(rng.random(count) < 0.25), whole, address))
    if kind == "abbreviated":
        return with_suburb(join_text(number, name, _abbreviation(type_idx, rng)))
    if kind == "expanded":
        expanded = take_strings([expanded_name(s) for s in STREET_NAMES], name_idx)
        return with_suburb(join_text(number, expanded, full_type))
    if kind == "typo":
        return with_suburb(join_text(number, _typo(name_idx, rng), full_type))
    if kind == "unit":
        unit = to_text(parcels.unit[target])
        house = to_text(parcels.house[target])
        form = rng.integers(0, 4, count)
        unit_part = choose(
            form,
            [
                join_text(unit, house, sep="/"),
                join_text("UNIT", unit, house),
                join_text(join_text("U", unit, sep=""), house),
                join_text("FLAT", unit, house),
            ],
        )
        street_type = pc.if_else(
            pa.array(rng.random(count) < 0.5), _abbreviation(type_idx, rng), full_type
        )
        return with_suburb(join_text(unit_part, name, street_type))
    if kind == "missing_suburb":
        return {"Address": (every, address)}
    if kind == "swapped":
        # Either the number after the street, or address and suburb typed in each other's column.
        in_columns = rng.random(count) < 0.4
        swapped = np.flatnonzero(in_columns)
        kept = np.flatnonzero(~in_columns)
        return {
            "Address": (
                np.r_[kept, swapped],
                pa.concat_arrays([join_text(street, number).take(kept), suburb.take(swapped)]),
            ),
            "Suburb": (
                np.r_[kept, swapped],
                pa.concat_arrays([suburb.take(kept), address.take(swapped)]),
            ),
        }
    if kind == "case_space":
        form = rng.integers(0, 5, count)
        messy = choose(
            form,
            [
                pc.utf8_title(address),
                pc.utf8_lower(address),
                pc.replace_substring(address, " ", "  ", max_replacements=1),
                join_text("", address, " ", sep=" "),
                join_text(address, ".", sep=""),
            ],
        )
        return with_suburb(messy)
    if kind == "field":
        spoilt, kept = _field_noise(address, rng)
        suburb_noise = rng.random(count)
        typed = _typo_text(pc.utf8_upper(suburb).to_numpy(zero_copy_only=False), rng)
        field_suburb = pc.if_else(pa.array(suburb_noise < 0.15), typed, suburb)
        # A fifth of the rows lose the suburb; never both the suburb and the number.
        has_suburb = (suburb_noise >= 0.35) | ~kept
        rows = np.flatnonzero(has_suburb)
        return {
            "Address": (every, spoilt),
            "Suburb": (rows, field_suburb.take(pa.array(rows))),
        }
    if kind == "propnum_only":
        propnum = pc.take(parcels.table["propnum"], target)
        # Excel drops leading zeros when a column is opened as numbers.
        stripped = pc.utf8_ltrim(propnum, "0")
        return {
            "Property Number": (
                every,
                pc.if_else(pa.array(rng.random(count) < 0.4), stripped, propnum),
            )
        }
    if kind in ("coords_only", "bad_latitude", "wkt_only", "bad_wkt"):
        lon, lat = to_lonlat(inner_points(parcels, target, rng))
        if kind == "coords_only":
            return {"Latitude": (every, to_text(lat)), "Longitude": (every, to_text(lon))}
        if kind == "bad_latitude":  # a slipped decimal point puts it out of range
            return {
                "Latitude": (every, to_text(np.round(lat * 10, 5))),
                "Longitude": (every, to_text(lon)),
            }
        lon_text, lat_text = to_text(lon), to_text(lat)
        if kind == "wkt_only":
            return {
                "WKT": (every, join_text("POINT (", join_text(lon_text, lat_text), ")", sep=""))
            }
        broken = choose(
            every % 3,
            [
                join_text(join_text("POINT (", lon_text, sep=""), lat_text),  # unclosed
                join_text(join_text("POINT (", lon_text, ",", sep=""), lat_text, ")", sep=""),
                join_text("POINT (", lon_text, ")", sep=""),  # one coordinate
            ],
        )
        return {"WKT": (every, broken)}
    if kind == "bad_address":
        absent = take_strings(ABSENT_STREET_NAMES, rng.integers(0, len(ABSENT_STREET_NAMES), count))
        real_street_far = join_text(to_text(9000 + parcels.house[target]), street)
        made_up = join_text(number, absent, full_type)
        return with_suburb(pc.if_else(pa.array(every % 2 == 0), made_up, real_street_far))
    raise AssertionError(f"unhandled kind {kind}")


def _abbreviation(type_idx: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """Abbreviated street types: mostly the standard form, sometimes another common one."""
    abbreviations = list(STREET_TYPES.values())
    standard = take_strings([forms[0] for forms in abbreviations], type_idx)
    other = take_strings([forms[-1] for forms in abbreviations], type_idx)
    return pc.if_else(pa.array(rng.random(type_idx.size) < 0.8), standard, other)


def _typo(name_idx: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """Each name with one letter substituted, dropped or swapped with the next (never the first)."""
    return _typo_text(np.asarray(STREET_NAMES, dtype=object)[name_idx], rng)


# Sounds-alike spellings officers write (one applied per row that gets a phonetic slip).
_PHONETIC = (("PH", "F"), ("CK", "K"), ("EE", "EA"), ("OU", "OW"), ("IE", "Y"), ("C", "K"))
_FIELD_OPS = ("typo", "drop_number", "drop_type", "double", "swap", "join", "split", "phonetic")


def _field_noise(address: pa.Array, rng: np.random.Generator) -> tuple[pa.Array, np.ndarray]:
    """``number name type`` addresses spoilt as field data is: per row one of a typo in any
    word (the street type included), the number or the street type left out, a word
    doubled, two words swapped, two words joined, a word split, or a sounds-alike spelling.
    Returns the spoilt text and whether each row still holds its house number."""
    count = len(address)
    lists = pc.split_pattern(address, " ")
    offsets = lists.offsets.to_numpy().astype(np.int64)
    words = np.asarray(lists.flatten().to_numpy(zero_copy_only=False), dtype=object)
    length = np.diff(offsets)
    op = rng.integers(0, len(_FIELD_OPS), count)
    op[(length < 3) & (op == _FIELD_OPS.index("drop_type"))] = 0
    # Only a house number is left out, not a unit's UNIT keyword.
    first_digits = pc.match_substring_regex(pc.list_element(lists, 0), "^[0-9]").to_numpy(
        zero_copy_only=False
    )
    op[~first_digits & (op == _FIELD_OPS.index("drop_number"))] = 0
    # A word of each row, never its number (the first word): the street name or type.
    which = offsets[:-1] + 1 + (rng.random(count) * (length - 1)).astype(np.int64)
    which = np.minimum(which, offsets[1:] - 1)
    # Words with digits (a unit's house number) are left alone: the row's last word instead.
    digits = pc.match_substring_regex(pa.array(words, pa.string()), "[0-9]").to_numpy(
        zero_copy_only=False
    )
    which = np.where(digits[which], offsets[1:] - 1, which)
    # Joins are of two words of the name (or name and type), never the number.
    join_rows = op == _FIELD_OPS.index("join")
    which[join_rows] = np.minimum(
        np.maximum(which[join_rows], offsets[:-1][join_rows] + 2), offsets[1:][join_rows] - 1
    )
    op[join_rows & (length < 3)] = 0
    repeat = np.ones(len(words), dtype=np.int64)
    kept = np.ones(count, dtype=bool)

    def rows(name: str) -> np.ndarray:
        return np.flatnonzero(op == _FIELD_OPS.index(name))

    at = which[rows("typo")]
    words[at] = np.asarray(_typo_text(words[at], rng).to_pylist(), dtype=object)
    at = offsets[:-1][rows("drop_number")]
    repeat[at] = 0
    kept[rows("drop_number")] = False
    repeat[offsets[1:][rows("drop_type")] - 1] = 0
    repeat[which[rows("double")]] = 2
    swap = rows("swap")
    first, second = which[swap] - 1, which[swap]
    words[first], words[second] = words[second].copy(), words[first].copy()
    join = rows("join")
    left = which[join] - 1
    words[left] = words[left] + words[which[join]]
    repeat[which[join]] = 0
    split = which[rows("split")]
    cut = [max(1, len(w) // 2) for w in words[split]]
    words[split] = [w[:c] + " " + w[c:] for w, c in zip(words[split], cut, strict=True)]
    phonetic = which[rows("phonetic")]
    pattern = rng.integers(0, len(_PHONETIC), phonetic.size)
    spelt = words[phonetic]
    for i, (old, new) in enumerate(_PHONETIC):
        chosen = pattern == i
        spelt[chosen] = [w.replace(old, new, 1) for w in spelt[chosen]]
    words[phonetic] = spelt
    row = np.repeat(np.arange(count), length)
    row, words = np.repeat(row, repeat), np.repeat(words, repeat)
    new_offsets = np.concatenate([[0], np.cumsum(np.bincount(row, minlength=count))])
    joined = pc.binary_join(
        pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), pa.array(words, pa.string())),
        " ",
    )
    return joined, kept


def _typo_text(texts: np.ndarray, rng: np.random.Generator) -> pa.Array:
    """Each text with one letter substituted, dropped or swapped with the next, never the
    first letter (texts of fewer than three letters are left alone)."""
    if not len(texts):
        return pa.array([], pa.string())
    width = max(len(str(t)) for t in texts) + 1
    text = np.asarray(texts, dtype=f"<U{width}")
    short = np.char.str_len(text) < 3
    chars = text.view(np.uint32).reshape(-1, width).copy()
    length = np.char.str_len(text)
    rows = np.arange(chars.shape[0])
    pos = 1 + (rng.random(rows.size) * (length - 2)).astype(np.int64)  # 1 .. length-2
    op = rng.integers(0, 3, rows.size)
    # Swapping two equal letters (the LL in RUSSELL) changes nothing: substitute instead.
    op[(op == 2) & (chars[rows, pos] == chars[rows, pos + 1])] = 0
    letter = chars[rows, pos].astype(np.int64)
    replacement = (letter - 65 + rng.integers(1, 26, rows.size)) % 26 + 65
    sub = op == 0
    chars[rows[sub], pos[sub]] = replacement[sub]
    swap = op == 2
    a, b = chars[rows[swap], pos[swap]], chars[rows[swap], pos[swap] + 1]
    chars[rows[swap], pos[swap]], chars[rows[swap], pos[swap] + 1] = b, a
    drop = op == 1
    columns = np.arange(width)[None, :]
    shifted = np.minimum(columns + (columns >= pos[drop, None]), width - 1)
    chars[drop] = np.take_along_axis(chars[drop], shifted, axis=1)
    chars[drop, width - 1] = 0
    spoilt = chars.view(f"<U{width}").ravel()
    return pa.array(np.where(short, text, spoilt))
