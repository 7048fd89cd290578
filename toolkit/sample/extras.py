"""Extras for the committed sample: other council assets in the town, and the service's users."""

from __future__ import annotations

from typing import Final

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.sample.columns import flat_strings, join_text, take_strings, to_text
from toolkit.sample.parcels import ROAD_WIDTH, Parcels, to_lonlat
from toolkit.sample.vocab import LAND_USE_CLASSES, LOCALITIES, STREET_NAMES

ASSET_COLUMNS: Final = ("id", "type", "name", "code", "friendly", "wkt", "asset_no")
USER_COLUMNS: Final = (
    "Username",
    "First Name",
    "Last Name",
    "Email",
    "Phone",
    "Position",
    "Organisation",
)


def assets_table(parcels: Parcels, rng: np.random.Generator) -> pa.Table:
    """A few dozen other council assets in the same town: points, lines across roads, parks."""
    import pandas as pd
    import shapely

    plain = np.setdiff1d(
        np.flatnonzero(parcels.unit == 0), np.r_[parcels.multipart, parcels.bowtie]
    )
    plain = plain[rng.permutation(plain.size)]  # so each street's first is a random lot
    # Sites on distinct streets, community land first, so names and places do not repeat.
    street_key = (parcels.locality * 1000 + parcels.street_name) * 100 + parcels.street_type
    _, first = np.unique(street_key[plain], return_index=True)
    candidates = plain[first]
    not_community = parcels.lu_class[candidates] != LAND_USE_CLASSES.index("COMMUNITY")
    candidates = candidates[np.lexsort((rng.random(candidates.size), not_community))]
    site = np.sort(candidates[:24])
    crossing = np.sort(candidates[24:32])
    kinds = np.array(["Evacuation Centre"] * 8 + ["Fire Station"] * 6 + ["School"] * 10)[
        : site.size
    ]
    suffix = take_strings(
        ("COMMUNITY HALL", "FIRE STATION", "PRIMARY SCHOOL"),
        np.searchsorted(["Evacuation Centre", "Fire Station", "School"], kinds),
    )
    # Named after the locality, or after the street when the locality has one already.
    place = pd.DataFrame({"kind": kinds, "locality": parcels.locality[site]})
    locality = pc.if_else(
        pa.array(place.duplicated().to_numpy()),
        take_strings(STREET_NAMES, parcels.street_name[site]),
        take_strings([loc for loc, _ in LOCALITIES], parcels.locality[site]),
    )
    centre = parcels.corners[site].mean(axis=1)
    point_geoms = shapely.points(np.round(np.column_stack(to_lonlat(centre)), 6))

    # Bridges and culverts: short lines across the road in front of a lot.
    front_mid = parcels.corners[crossing][:, :2].mean(axis=1)
    far_side = front_mid + np.column_stack(
        [np.zeros(crossing.size), parcels.facing[crossing] * ROAD_WIDTH]
    )
    lon0, lat0 = to_lonlat(front_mid)
    lon1, lat1 = to_lonlat(far_side)
    line_geoms = shapely.linestrings(
        np.stack([np.column_stack([lon0, lat0]), np.column_stack([lon1, lat1])], axis=1)
    )
    line_kinds = np.array(["Bridge"] * 5 + ["Culvert"] * 3)[: crossing.size]
    street = flat_strings(pc.take(parcels.table["street"], crossing))
    line_names = pc.if_else(
        pa.array(line_kinds == "Bridge"),
        join_text(street, "BRIDGE"),
        join_text(
            "CULVERT", street, join_text("CH", to_text(rng.integers(1, 40, crossing.size) * 10))
        ),
    )

    # Parks and reserves: open land just north of the built-up area.
    top = parcels.corners[:, :, 1].max()
    left = parcels.corners[:, :, 0].min()
    park_names = ("VICTORIA PARK", "PRINCES PARK", "LAKE RESERVE", "MOUNT BUNINYONG RESERVE")
    x = left + 60.0 + np.arange(len(park_names)) * 500.0
    y = np.full(len(park_names), top + 60.0)
    w = rng.uniform(200.0, 400.0, len(park_names))
    h = rng.uniform(150.0, 300.0, len(park_names))
    boxes = np.stack(
        [np.column_stack(c) for c in ((x, y), (x + w, y), (x + w, y + h), (x, y + h))], axis=1
    )
    lon, lat = to_lonlat(boxes.reshape(-1, 2))
    park_geoms = shapely.polygons(np.column_stack([lon, lat]).reshape(-1, 4, 2))

    count = site.size + crossing.size + len(park_names)
    asset_type = np.r_[
        kinds, line_kinds, ["Reserve" if "RESERVE" in p else "Park" for p in park_names]
    ]
    name = pa.concat_arrays(
        [
            join_text(locality, suffix),
            line_names,
            pa.array(park_names),
        ]
    )
    friendly = pa.concat_arrays(
        [
            join_text(
                join_text(locality, suffix),
                flat_strings(pc.take(parcels.table["name"], site)),
                sep=", ",
            ),
            join_text(
                line_names,
                take_strings([loc for loc, _ in LOCALITIES], parcels.locality[crossing]),
                sep=", ",
            ),
            pa.array(park_names),
        ]
    )
    prefix = {"Evacuation Centre": "EC", "Fire Station": "FS", "School": "SCH", "Bridge": "BR"}
    code_prefix = np.array([prefix.get(t, "CV" if t == "Culvert" else "PK") for t in asset_type])
    geoms = np.concatenate([point_geoms, line_geoms, park_geoms])
    return pa.table(
        {
            "id": to_text(900_001 + np.arange(count)),
            "type": pa.array(asset_type),
            "name": name,
            "code": join_text(
                pa.array(code_prefix),
                pc.utf8_lpad(to_text(np.arange(1, count + 1)), 3, "0"),
                sep="-",
            ),
            "friendly": friendly,
            "wkt": pa.array(shapely.to_wkt(geoms, rounding_precision=6)),
            "asset_no": join_text(
                "A", to_text(rng.choice(90_000, count, replace=False) + 10_000), sep=""
            ),
        }
    )


_USERS: Final[tuple[tuple[str, ...], ...]] = (
    (
        "apiuser",
        "Integration",
        "Service",
        "api@ballarat.vic.gov.au",
        "03 5320 5500",
        "API User",
        "City of Ballarat",
    ),
    (
        "smitchell",
        "Sarah",
        "Mitchell",
        "sarah.mitchell@ballarat.vic.gov.au",
        "0412 345 678",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "dchen",
        "David",
        "Chen",
        "david.chen@ballarat.vic.gov.au",
        "0423 456 789",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "psharma",
        "Priya",
        "Sharma",
        "priya.sharma@ballarat.vic.gov.au",
        "0434 567 890",
        "Recovery Officer",
        "City of Ballarat",
    ),
    (
        "tobrien",
        "Tom",
        "O'Brien",
        "tom.obrien@ballarat.vic.gov.au",
        "0445 678 901",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "ewilson",
        "Emma",
        "Wilson",
        "emma.wilson@ballarat.vic.gov.au",
        "03 5320 5501",
        "Municipal Recovery Manager",
        "City of Ballarat",
    ),
    (
        "lkelly",
        "Liam",
        "Kelly",
        "liam.kelly@ballarat.vic.gov.au",
        "0456 789 012",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "arahman",
        "Aisha",
        "Rahman",
        "aisha.rahman@ballarat.vic.gov.au",
        "0467 890 123",
        "Recovery Officer",
        "City of Ballarat",
    ),
    (
        "jthompson",
        "Jack",
        "Thompson",
        "jack.thompson@ballarat.vic.gov.au",
        "0478 901 234",
        "Emergency Management Coordinator",
        "City of Ballarat",
    ),
    (
        "mlin",
        "Mei",
        "Lin",
        "mei.lin@ballarat.vic.gov.au",
        "03 5320 5502",
        "GIS Officer",
        "City of Ballarat",
    ),
    (
        "bharris",
        "Ben",
        "Harris",
        "ben.harris@ballarat.vic.gov.au",
        "0489 012 345",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "znguyen",
        "Zoë",
        "Nguyễn",
        "zoe.nguyen@ballarat.vic.gov.au",
        "0490 123 456",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "jalvarez",
        "José",
        "Álvarez",
        "jose.alvarez@ballarat.vic.gov.au",
        "0401 234 567",
        "Field Inspector",
        "City of Ballarat",
    ),
    (
        "rpatel",
        "Raj",
        "Patel",
        "raj.patel@ballarat.vic.gov.au",
        "03 5320 5503",
        "Customer Service Officer",
        "City of Ballarat",
    ),
    (
        "kobrien",
        "Kate",
        "O'Brien",
        "kate.obrien@ballarat",
        "0413 222 333",
        "Recovery Officer",
        "City of Ballarat",
    ),
    (
        "gwatson",
        "Greg",
        "Watson",
        "greg.watson@cfa.vic.gov.au",
        "0424 333 444",
        "Incident Controller",
        "CFA",
    ),
    (
        "hmurphy",
        "Helen",
        "Murphy",
        "helen.murphy@cfa.vic.gov.au",
        "0435 444 555",
        "Field Inspector",
        "CFA",
    ),
    (
        "ncampbell",
        "Nathan",
        "Campbell",
        "nathan.campbell@ses.vic.gov.au",
        "0446 555 666",
        "Field Inspector",
        "VICSES",
    ),
    (
        "ojames",
        "Olivia",
        "James",
        "olivia.james@ses.vic.gov.au",
        "0457 666 777",
        "Recovery Officer",
        "VICSES",
    ),
    (
        "sking",
        "Steven",
        "King",
        "steven.king@redcross.org.au",
        "0468 777 888",
        "Relief Centre Coordinator",
        "Australian Red Cross",
    ),
    (
        "cyoung",
        "Chloe",
        "Young",
        "chloe.young@redcross.org.au",
        "0479 888 999",
        "Recovery Officer",
        "Australian Red Cross",
    ),
    (
        "mevans",
        "Mark",
        "Evans",
        "mark.evans@ballarat.vic.gov.au",
        "03 5320 5504",
        "Building Surveyor",
        "City of Ballarat",
    ),
    (
        "lnguyen",
        "Linh",
        "Nguyen",
        "linh.nguyen@ballarat.vic.gov.au",
        "0480 999 000",
        "Environmental Health Officer",
        "City of Ballarat",
    ),
    (
        "reporting",
        "Reporting",
        "Service",
        "reports@ballarat.vic.gov.au",
        "03 5320 5505",
        "API User",
        "City of Ballarat",
    ),
)


def users_table() -> pa.Table:
    """Two dozen users of the service; one has a malformed email address on purpose."""
    return pa.table({name: [user[i] for user in _USERS] for i, name in enumerate(USER_COLUMNS)})
