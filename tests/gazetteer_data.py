"""Generated G-NAF-style address points and the noisy queries that should find them.

``gnaf_points(n)`` lays out streets in the sample's localities, numbers along each, some
lots split into units, plus one STREET LOCALITY point per street and one LOCALITY point
per locality, in the columns of the G-NAF Core file. ``noisy_queries`` writes addresses
the way officers type them (abbreviated types, a typo in the street name, no postcode,
unit forms ``3/12``, lower case and commas), each with the PID it names.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from toolkit.sample.vocab import LOCALITIES, STREET_NAMES, STREET_TYPES

GNAF_COLUMNS = (
    "ADDRESS_DETAIL_PID",
    "FLAT_TYPE",
    "FLAT_NUMBER",
    "NUMBER_FIRST",
    "NUMBER_LAST",
    "STREET_NAME",
    "STREET_TYPE",
    "STREET_SUFFIX",
    "LOCALITY_NAME",
    "STATE",
    "POSTCODE",
    "GEOCODE_TYPE",
    "LONGITUDE",
    "LATITUDE",
)
NUMBERS_PER_STREET = 40
UNIT_SHARE = 0.05
# About as many addresses per locality as G-NAF has (15 million in 15 thousand localities):
# beyond the sample's 52, more localities are made up from street names.
POINTS_PER_LOCALITY = 1000
LOCALITY_SUFFIXES = ("PARK", "HEIGHTS", "VALE", "HILL", "CREEK", "DOWNS", "FLAT", "NORTH")
QUERY_KINDS = ("exact", "abbreviated", "typo", "no_postcode", "unit", "casual")


def gnaf_points(n: int, seed: int = 0) -> pd.DataFrame:
    """About ``n`` address points (premises, then street and locality points)."""
    rng = np.random.default_rng(seed)
    n_premises = max(1, int(n * 0.97))
    n_streets = max(1, -(-n_premises // NUMBERS_PER_STREET))
    types = list(STREET_TYPES)
    places = _localities(max(len(LOCALITIES), n // POINTS_PER_LOCALITY), rng)
    combos = len(places) * len(STREET_NAMES) * len(types)
    if n_streets > combos:
        raise ValueError(f"at most {combos * NUMBERS_PER_STREET:,} points")
    street_code = rng.choice(combos, n_streets, replace=False)
    locality = street_code // (len(STREET_NAMES) * len(types))
    name = (street_code // len(types)) % len(STREET_NAMES)
    kind = street_code % len(types)
    street = np.repeat(np.arange(n_streets), NUMBERS_PER_STREET)[:n_premises]
    number = (np.arange(n_premises) % NUMBERS_PER_STREET) * 2 + 1
    units = rng.random(n_premises) < UNIT_SHARE
    flat = np.where(units, rng.integers(1, 9, n_premises), 0)
    # Each street a short line of points somewhere around Ballarat.
    x0 = 143.70 + rng.random(n_streets) * 0.3
    y0 = -37.70 + rng.random(n_streets) * 0.3
    localities = np.array([loc for loc, _ in places], dtype=object)
    postcodes = np.array([code for _, code in places], dtype=object)
    names = np.array(STREET_NAMES, dtype=object)
    type_names = np.array(types, dtype=object)
    premises = pd.DataFrame(
        {
            "FLAT_TYPE": np.where(units, "UNIT", ""),
            "FLAT_NUMBER": np.where(units, flat.astype(str), ""),
            "NUMBER_FIRST": number.astype(str),
            "NUMBER_LAST": "",
            "STREET_NAME": names[name[street]],
            "STREET_TYPE": type_names[kind[street]],
            "STREET_SUFFIX": "",
            "LOCALITY_NAME": localities[locality[street]],
            "STATE": "VIC",
            "POSTCODE": postcodes[locality[street]],
            "GEOCODE_TYPE": np.where(units, "BUILDING CENTROID", "PROPERTY CENTROID"),
            "LONGITUDE": np.round(x0[street] + number * 1e-5 + flat * 1e-7, 7),
            "LATITUDE": np.round(y0[street] + flat * 1e-7, 7),
        }
    )
    streets = pd.DataFrame(
        {
            "FLAT_TYPE": "",
            "FLAT_NUMBER": "",
            "NUMBER_FIRST": "",
            "NUMBER_LAST": "",
            "STREET_NAME": names[name],
            "STREET_TYPE": type_names[kind],
            "STREET_SUFFIX": "",
            "LOCALITY_NAME": localities[locality],
            "STATE": "VIC",
            "POSTCODE": postcodes[locality],
            "GEOCODE_TYPE": "STREET LOCALITY",
            "LONGITUDE": np.round(x0 - 1e-5, 7),
            "LATITUDE": np.round(y0 - 1e-5, 7),
        }
    ).iloc[: max(0, n - n_premises - len(places))]
    centres = pd.DataFrame(
        {
            "FLAT_TYPE": "",
            "FLAT_NUMBER": "",
            "NUMBER_FIRST": "",
            "NUMBER_LAST": "",
            "STREET_NAME": "",
            "STREET_TYPE": "",
            "STREET_SUFFIX": "",
            "LOCALITY_NAME": localities,
            "STATE": "VIC",
            "POSTCODE": postcodes,
            "GEOCODE_TYPE": "LOCALITY",
            "LONGITUDE": np.round(143.7 + np.arange(len(localities)) * 0.005, 7),
            "LATITUDE": -37.9,
        }
    )
    frame = pd.concat([premises, streets, centres], ignore_index=True)
    frame.insert(0, "ADDRESS_DETAIL_PID", [f"GAVIC{400000000 + i}" for i in range(len(frame))])
    return frame[list(GNAF_COLUMNS)]


def _localities(count: int, rng: np.random.Generator) -> list[tuple[str, str]]:
    """The sample's localities, then made-up ones (BANKSIA HEIGHTS 3417), ``count`` in all."""
    made = [
        (f"{name} {suffix}", f"{3000 + i % 1000}")
        for i, (name, suffix) in enumerate(
            (name, suffix) for suffix in LOCALITY_SUFFIXES for name in STREET_NAMES
        )
    ]
    order = rng.permutation(len(made))
    extra = [made[i] for i in order[: max(0, count - len(LOCALITIES))]]
    return [*LOCALITIES, *extra]


def write_psv(frame: pd.DataFrame, path: Path) -> Path:
    """The points as G-NAF Core writes them: pipe-separated, one header line."""
    frame.to_csv(path, sep="|", index=False)
    return path


def _typo(words: str, rng: np.random.Generator) -> str:
    """Two neighbouring letters of the longest word swapped (SMITH -> SMTIH)."""
    parts = words.split()
    longest = max(range(len(parts)), key=lambda i: len(parts[i]))
    word = parts[longest]
    if len(word) >= 4:
        at = int(rng.integers(1, len(word) - 2))
        word = word[:at] + word[at + 1] + word[at] + word[at + 2 :]
    parts[longest] = word
    return " ".join(parts)


def noisy_queries(points: pd.DataFrame, n: int, seed: int = 1) -> pd.DataFrame:
    """``n`` premise addresses as typed (columns ``query``, ``truth``, ``kind``)."""
    rng = np.random.default_rng(seed)
    premises = points[points["NUMBER_FIRST"] != ""]
    chosen = premises.iloc[rng.choice(len(premises), min(n, len(premises)), replace=False)]
    short = {full: abbreviations[0] for full, abbreviations in STREET_TYPES.items()}
    rows = []
    for i, row in enumerate(chosen.itertuples(index=False)):
        kind = QUERY_KINDS[i % len(QUERY_KINDS)]
        number = row.NUMBER_FIRST
        if row.FLAT_NUMBER:
            number = (
                f"{row.FLAT_NUMBER}/{number}"
                if kind in ("unit", "casual")
                else (f"UNIT {row.FLAT_NUMBER} {number}")
            )
        street = f"{row.STREET_NAME} {row.STREET_TYPE}"
        tail = f"{row.LOCALITY_NAME} {row.STATE} {row.POSTCODE}"
        if kind == "abbreviated":
            street = f"{row.STREET_NAME} {short.get(row.STREET_TYPE, row.STREET_TYPE)}"
        elif kind == "typo":
            street = f"{_typo(row.STREET_NAME, rng)} {row.STREET_TYPE}"
        elif kind == "no_postcode":
            tail = row.LOCALITY_NAME
        query = f"{number} {street} {tail}"
        if kind == "casual":
            query = f"{number} {street.title()}, {row.LOCALITY_NAME.title()}"
        rows.append({"query": query, "truth": row.ADDRESS_DETAIL_PID, "kind": kind})
    return pd.DataFrame(rows)
