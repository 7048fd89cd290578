"""External lookups of a site: its gazetteer and geocoding service as the last resort of an
asset lookup, upgradeExternalLookupToInternalAsset, the same through `toolkit serve` and
through the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from gazetteer_data import gnaf_points, write_psv
from geocoding_server import PLACES, GeocodingService
from serving import free_port, running

from toolkit.cli import cli
from toolkit.geocoding import NOT_CONFIGURED, ServiceSettings, load_files
from toolkit.geocoding.http import HttpGeocoder
from toolkit.importing.pipeline import ImportRequest
from toolkit.remote.client import Credentials, Profile
from toolkit.remote.site import RemoteSite
from toolkit.server import ServerSettings, create_app
from toolkit.site import LocalSite


# Two parcels in Kew (the geocoding server's "12 Smith Street" lies inside the first) and
# a hydrant.
def _square(x: float, y: float) -> str:
    corners = [(x, y), (x + 2e-4, y), (x + 2e-4, y - 2e-4), (x, y - 2e-4), (x, y)]
    return "POLYGON ((" + ", ".join(f"{a:.4f} {b:.4f}" for a, b in corners) + "))"


ASSETS = f"""id,type,code,name,friendly,wkt
101,Property,P101,12 SMITH STREET KEW,"12 Smith Street, Kew","{_square(145.03, -37.80)}"
102,Property,P102,3 OLD ROAD KEW,"3 Old Road, Kew","{_square(145.04, -37.81)}"
103,Hydrant,H1,HYDRANT OLD ROAD KEW,,POINT (145.0401 -37.8101)
"""
UPGRADE = {
    "mode": "soundex",
    "assetClass": "Property",
    "upgradeExternalLookupToInternalAsset": True,
    "geocoderOptions": {"requiredFeatures": ["premise"]},
}


@pytest.fixture(scope="module")
def points() -> pd.DataFrame:
    return gnaf_points(3000, seed=5)


@pytest.fixture
def site_path(tmp_path: Path) -> Path:
    path = tmp_path / "site.sqlite"
    source = tmp_path / "assets.csv"
    source.write_text(ASSETS, encoding="utf-8")
    with LocalSite(path, "demo", user_id="officer") as site:
        job = site.run_import(ImportRequest("asset", "assets-csv", source))
        assert job["status"] == "COMPLETE", job["result"]
    return path


@pytest.fixture
def site(site_path: Path) -> Iterator[LocalSite]:
    with LocalSite(site_path, "demo", user_id="officer") as local:
        yield local


@pytest.fixture
def with_gazetteer(site: LocalSite, points: pd.DataFrame, tmp_path: Path) -> LocalSite:
    load_files(site.store, [write_psv(points, tmp_path / "GNAF.psv")], name="gnaf")
    return site


@pytest.fixture
def service() -> Iterator[tuple[GeocodingService, str]]:
    fake = GeocodingService(list(PLACES))
    with running(fake.app()) as url:
        yield fake, url


def premise(points: pd.DataFrame, n: int = 0) -> pd.Series:
    return points[(points["NUMBER_FIRST"] != "") & (points["FLAT_NUMBER"] == "")].iloc[n]


def typed(row: pd.Series) -> str:
    """The address as an officer types it: short street type, a typo, lower case."""
    name = row["STREET_NAME"]
    name = name[0] + name[2] + name[1] + name[3:]
    kind = row["STREET_TYPE"].lower()
    return f"{row['NUMBER_FIRST']} {name.lower()} {kind} {row['LOCALITY_NAME'].title()}"


def assets_named(site: LocalSite, name: str) -> list[dict[str, Any]]:
    found = site.list_assets({"fulltext": name, "limit": "100"})
    return list(found["models"].values())


def test_without_a_source_the_error_says_what_to_configure(site: LocalSite) -> None:
    entry = site.asset_lookup("5 High Road Camberwell")["1"]
    assert entry["asset"] is None
    assert entry["err"] == (
        f"no asset name sounds like this (soundex, maxRank 2); external lookup: {NOT_CONFIGURED}"
    )
    off = site.asset_lookup("5 High Road Camberwell", {"useExternalLookups": "false"})["1"]
    assert off["err"] == "no asset name sounds like this (soundex, maxRank 2)"


def test_a_miss_falls_back_to_the_gazetteer(
    with_gazetteer: LocalSite, points: pd.DataFrame
) -> None:
    row = premise(points, 3)
    entry = with_gazetteer.asset_lookup(typed(row))["1"]
    assert entry["err"] is None
    asset = entry["asset"]
    assert asset["id"] is None
    assert (asset["source"], asset["code"], asset["friendlyType"]) == (
        "gazetteer:gnaf",
        row["ADDRESS_DETAIL_PID"],
        "premise",
    )
    assert asset["geo"]["points"] == [
        {"longitude": repr(float(row["LONGITUDE"])), "latitude": repr(float(row["LATITUDE"]))}
    ]
    assert float(asset["accuracy"]) >= 80
    # Assets still come first: a query an asset matches never reaches the gazetteer.
    internal = with_gazetteer.asset_lookup("12 Smith St Kew")["1"]["asset"]
    assert (internal["id"], internal["source"]) == ("101", "assets.csv")


def test_upgrade_makes_an_audited_asset_found_internally_next_time(
    with_gazetteer: LocalSite, points: pd.DataFrame
) -> None:
    row = premise(points, 5)
    text = typed(row)
    first = with_gazetteer.asset_lookup(text, UPGRADE)["1"]
    made = first["asset"]
    assert first["err"] is None
    assert made["id"] not in (None, "101", "102", "103")
    assert (made["type"], made["source"], made["name"]) == (
        "Property",
        "gazetteer:gnaf",
        f"{row['NUMBER_FIRST']} {row['STREET_NAME']} {row['STREET_TYPE']} "
        f"{row['LOCALITY_NAME']} VIC {row['POSTCODE']}",
    )
    assert {e["key"]: e["value"] for e in made["extraInfo"]} == {
        "externalSource": "gazetteer:gnaf",
        "externalId": row["ADDRESS_DETAIL_PID"],
        "externalFeature": "premise",
    }
    stored = with_gazetteer.get_asset(made["id"])
    assert (stored["source"], stored["geo"]) == ("gazetteer:gnaf", made["geo"])
    audit = with_gazetteer.list_audit_logs({"limit": "1000"})["models"].values()
    entries = [a for a in audit if str(a.get("recordId")) == made["id"]]
    assert len(entries) == 1
    assert entries[0]["action"] == "create" or "insert" in str(entries[0]["action"]).lower()
    assert "upgradeExternalLookupToInternalAsset" in entries[0]["message"]
    assert "gazetteer:gnaf" in json.dumps(entries[0])
    # The next lookup finds it among the assets, by soundex, and makes nothing new.
    second = with_gazetteer.asset_lookup(text, UPGRADE)["1"]
    assert second["asset"]["id"] == made["id"]
    assert second["asset"]["source"] == "gazetteer:gnaf"
    plain = with_gazetteer.asset_lookup(text, {"useExternalLookups": False})["1"]
    assert plain["asset"]["id"] == made["id"]
    assert len(assets_named(with_gazetteer, row["STREET_NAME"])) == 1


def test_a_batch_makes_each_distinct_place_once(
    with_gazetteer: LocalSite, points: pd.DataFrame
) -> None:
    one, two = premise(points, 11), premise(points, 12)
    queries = [
        {"code": "a", "str": typed(one)},
        {
            "code": "b",
            "str": f"{one['NUMBER_FIRST']} {one['STREET_NAME']} {one['STREET_TYPE']}"
            f" {one['LOCALITY_NAME']} {one['POSTCODE']}",
        },
        {"code": "c", "str": typed(two)},
        {"code": "d", "str": "99999 Nowhere Boulevard Atlantis"},
    ]
    before = with_gazetteer.list_assets({"limit": "1"})["total"]
    answer = with_gazetteer.asset_lookup(queries, UPGRADE, "id")
    after = with_gazetteer.list_assets({"limit": "1"})["total"]
    assert int(after) - int(before) == 2
    assert answer["a"]["asset"] == answer["b"]["asset"] != answer["c"]["asset"]
    assert answer["d"]["asset"] is None
    assert "gazetteer:gnaf: no address point" in answer["d"]["err"]


def test_upgrade_links_a_place_inside_an_asset_to_it(
    site: LocalSite, service: tuple[GeocodingService, str]
) -> None:
    fake, url = service
    site.geocoding_service = HttpGeocoder(url, "nominatim", rate_per_s=100.0)
    before = site.list_assets({"limit": "1"})["total"]
    # "12 Smith Street Kew" is an asset; its street number typed wrong reaches the service,
    # whose point lies inside parcel 101: that parcel is the answer, no new asset.
    entry = site.asset_lookup("12 Smith Street Kew Victoria", {**UPGRADE, "maxRank": 1})["1"]
    assert entry["err"] is None
    assert entry["asset"]["id"] == "101"
    assert site.list_assets({"limit": "1"})["total"] == before
    # A place outside every parcel becomes one, its source the service.
    outside = site.asset_lookup("busy 5 High Road Camberwell", UPGRADE)["1"]["asset"]
    assert outside["source"] == site.geocoding_service.source
    assert {e["key"]: e["value"] for e in outside["extraInfo"]}["externalId"] == "way/55"
    assert fake.asked["busy 5 High Road Camberwell"] == 2  # 429, then the answer


def test_gazetteer_then_service(
    with_gazetteer: LocalSite, service: tuple[GeocodingService, str]
) -> None:
    _, url = service
    with_gazetteer.geocoding_service = HttpGeocoder(url, "nominatim", rate_per_s=100.0)
    answer = with_gazetteer.asset_lookup(
        [{"code": 1, "str": "Kew Primary School"}, {"code": 2, "str": "nothing anywhere"}]
    )
    assert answer["1"]["asset"]["source"] == with_gazetteer.geocoding_service.source
    assert answer["2"]["err"] == (
        "no asset name sounds like this (soundex, maxRank 2); external lookup: "
        "gazetteer:gnaf: no address point name sounds like this (soundex, maxRank 2); "
        "fallback fuzzy: no address point shares a number, street or locality with this "
        f"address (fuzzy); {with_gazetteer.geocoding_service.source}: no place found"
    )


def test_the_same_through_toolkit_serve(
    site_path: Path, points: pd.DataFrame, tmp_path: Path, service: tuple[GeocodingService, str]
) -> None:
    fake, geocoder_url = service
    with LocalSite(site_path, "demo") as local:
        load_files(local.store, [write_psv(points, tmp_path / "GNAF.psv")], name="gnaf")
        local.add_user("api", positions=["API User"], approved=True, terms_accepted=True)
        key = local.issue_api_key("api")["key"]
    settings = ServerSettings(geocoder=ServiceSettings.of(geocoder_url))
    with running(create_app(site_path, settings=settings)) as url:
        remote = RemoteSite(Profile(url, "demo", Credentials(api_key=key)))
        row = premise(points, 20)
        single = remote.asset_lookup(typed(row))["1"]
        batch = remote.asset_lookup(
            [{"code": "x", "str": "Kew Primary School"}, {"code": "y", "str": typed(row)}],
            {"assetClass": "Property", "upgradeExternalLookupToInternalAsset": True},
        )
        again = remote.asset_lookup(typed(row), {"useExternalLookups": False})["1"]
        none = remote.asset_lookup("Kew Primary School", {"useExternalLookups": False})["1"]
    port = geocoder_url.rsplit(":", 1)[1]
    assert single["asset"]["source"] == "gazetteer:gnaf"
    assert single["asset"]["code"] == row["ADDRESS_DETAIL_PID"]
    assert batch["x"]["asset"]["source"] == f"nominatim:127.0.0.1:{port}"
    assert batch["x"]["asset"]["type"] == "Property"
    assert batch["y"]["asset"]["source"] == "gazetteer:gnaf"
    assert again["asset"]["id"] == batch["y"]["asset"]["id"]
    assert none["asset"]["id"] == batch["x"]["asset"]["id"]
    assert fake.asked["Kew Primary School"] == 1


# --- the command line --------------------------------------------------------------------


def run(*args: str) -> Any:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result


def test_cli_gazetteer_load_info_lookup_remove(
    site_path: Path, points: pd.DataFrame, tmp_path: Path
) -> None:
    psv = write_psv(points, tmp_path / "GNAF_CORE.psv")
    store = str(site_path)
    loaded = run(
        "--store",
        store,
        "--site",
        "demo",
        "--json",
        "gazetteer",
        "load",
        str(psv),
        "--name",
        "gnaf",
    )
    assert loaded.exit_code == 0, loaded.output
    document = json.loads(loaded.stdout)
    assert (document["name"], document["points"], document["kept"]) == ("gnaf", 3000, 3000)
    info = run("--store", store, "--site", "demo", "gazetteer", "info")
    assert info.exit_code == 0
    assert "Gazetteer 'gnaf' (gazetteer:gnaf)" in info.stdout
    assert "3,000 address points" in info.stdout
    row = premise(points, 30)
    looked = run(
        "--store",
        store,
        "--site",
        "demo",
        "lookup",
        typed(row),
        "--upgrade",
        "--asset-class",
        "Property",
        "--required-feature",
        "premise",
        "--json",
    )
    assert looked.exit_code == 0, looked.output
    made = json.loads(looked.stdout)["1"]["asset"]
    assert (made["type"], made["source"]) == ("Property", "gazetteer:gnaf")
    with LocalSite(site_path, "demo") as local:
        assert local.get_asset(made["id"])["name"] == made["name"]
    removed = run("--store", store, "--site", "demo", "gazetteer", "remove")
    assert (removed.exit_code, removed.stdout.strip()) == (0, "Removed the gazetteer")
    missing = run("--store", store, "--site", "demo", "--json", "gazetteer", "info")
    assert json.loads(missing.stdout) is None


def test_cli_bad_input(site_path: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("code,lat,lon\nx,-37.8,145.0\n", encoding="utf-8")
    result = run("--store", str(site_path), "--site", "demo", "gazetteer", "load", str(bad))
    assert result.exit_code == 1
    assert "Error: " in result.stderr and "bad.csv: no address columns" in result.stderr
    column = run(
        "--store",
        str(site_path),
        "--site",
        "demo",
        "gazetteer",
        "load",
        str(bad),
        "--column",
        "number",
    )
    assert column.exit_code == 2 and "'number' is not ROLE=HEADING" in column.stderr
    remote = run("--url", "http://127.0.0.1:9", "gazetteer", "info")
    assert remote.exit_code == 1 and "the API has no route for it" in remote.stderr
    upgrade = run("--store", str(site_path), "lookup", "x", "--upgrade", "--assets", str(bad))
    assert upgrade.exit_code == 2
    for command in (["gazetteer", "load", "--help"], ["gazetteer", "info", "--help"]):
        shown = run(*command)
        assert shown.exit_code == 0 and "Examples:" in shown.stdout


# --- imports' asset linking -------------------------------------------------------------

GEO_RULE = """
from toolkit.importing.rules import AssetLink, FieldRule, ImportRule

RULE = ImportRule(
    name="geo-inspections",
    import_type="item",
    description="Inspections linked by address, geocoded where no asset matches",
    register="inspection",
    fields=(
        FieldRule("reference", "Reference", required=True),
        FieldRule("address", "Address"),
    ),
    asset_link=AssetLink(
        friendly_columns=("Address",),
        use_geometry=False,
        options={
            "mode": "soundex",
            "assetClass": "Property",
            "useExternalLookups": True,
            "upgradeExternalLookupToInternalAsset": True,
            "geocoderOptions": {"requiredFeatures": ["premise"]},
        },
    ),
    matching_id="reference",
    overwrite_rule="updateAndInsert",
)
"""


def test_an_import_links_rows_to_places_made_assets(
    site_path: Path, points: pd.DataFrame, tmp_path: Path
) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "geo_inspections.py").write_text(GEO_RULE, encoding="utf-8")
    one, two = premise(points, 40), premise(points, 41)
    source = tmp_path / "inspections.csv"
    source.write_text(
        "Reference,Address\n"
        "R1,12 Smith St Kew\n"  # an asset already
        f"R2,{typed(one)}\n"
        f"R3,{one['NUMBER_FIRST']} {one['STREET_NAME']} {one['STREET_TYPE']} "
        f"{one['LOCALITY_NAME']}\n"  # the same place again
        f"R4,{typed(two)}\n"
        "R5,99999 Nowhere Boulevard Atlantis\n",
        encoding="utf-8",
    )
    with LocalSite(site_path, "demo", user_id="officer", rule_paths=[rules]) as site:
        load_files(site.store, [write_psv(points, tmp_path / "GNAF.psv")], name="gnaf")
        event = site.create_event({"name": "Storm"})["id"]
        total = int(site.list_assets({"limit": "1"})["total"])
        dry = site.run_import(
            ImportRequest(
                "item", "geo-inspections", source, event_id=event, region_id=1, dry_run=True
            )
        )
        assert dry["status"] == "COMPLETE", dry["result"]
        assert dry["summary"]["linking"] == {"soundex": 1, "external": 3, "unlinked": 1}
        assert int(site.list_assets({"limit": "1"})["total"]) == total  # a dry run makes none
        job = site.run_import(
            ImportRequest("item", "geo-inspections", source, event_id=event, region_id=1)
        )
        assert job["status"] == "COMPLETE", job["result"]
        assert int(site.list_assets({"limit": "1"})["total"]) == total + 2
        items = site.list_items({"registerId": "inspection", "limit": "10"})["models"]
        by_reference = {i["reference"]: i["assetId"] for i in items.values()}
        assert by_reference["R1"] == "101"
        assert by_reference["R2"] == by_reference["R3"] not in (None, "101", "102", "103")
        assert by_reference["R4"] not in (None, by_reference["R2"])
        assert by_reference["R5"] is None
        made = site.get_asset(by_reference["R2"])
        assert (made["type"], made["source"]) == ("Property", "gazetteer:gnaf")
        audit = site.list_audit_logs({"importJobId": str(job["id"]), "limit": "100"})
        assets_audited = {
            str(a["recordId"]) for a in audit["models"].values() if a.get("recordType") == "asset"
        }
        assert assets_audited == {str(by_reference["R2"]), str(by_reference["R4"])}
        links = site.store.jobs.links(job["id"]).set_index("reference")
        assert links.loc["R3", "asset_id"] == int(by_reference["R3"])
        assert "gazetteer:gnaf: no address point" in links.loc["R5", "err"]


@pytest.mark.slow
def test_toolkit_serve_geocoder_flag_over_real_processes(
    site_path: Path, service: tuple[GeocodingService, str]
) -> None:
    """`toolkit serve --geocoder URL` in its own process; `toolkit --url ... lookup` asks it."""
    fake, geocoder_url = service
    with LocalSite(site_path, "demo") as local:
        local.add_user("api", positions=["API User"], approved=True, terms_accepted=True)
        key = local.issue_api_key("api")["key"]
    port = free_port()
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "toolkit", "--store", str(site_path), "--quiet", "serve"),
            *("--port", str(port), "--geocoder", geocoder_url),
            *("--geocoder-protocol", "nominatim"),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                if httpx.get(f"{url}/api/json/ping", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert process.poll() is None and time.monotonic() < deadline, "serve did not start"
            time.sleep(0.05)
        runner = CliRunner(env={"TOOLKIT_API_KEY": key})
        shown = runner.invoke(
            cli, ["--url", url, "--site", "demo", "--json", "lookup", "Kew Primary School"]
        )
    finally:
        process.terminate()
        process.wait(10)
    entry = json.loads(shown.stdout)["1"]
    assert entry["err"] is None
    assert entry["asset"]["source"] == f"nominatim:127.0.0.1:{geocoder_url.rsplit(':', 1)[1]}"
    assert entry["asset"]["name"] == "Kew Primary School"
    assert fake.asked["Kew Primary School"] == 1


def test_serve_geocoder_flags_are_checked() -> None:
    alone = CliRunner().invoke(cli, ["serve", "--geocoder-protocol", "pelias"])
    assert alone.exit_code == 2 and "--geocoder-protocol goes with --geocoder" in alone.output
    bad = CliRunner().invoke(cli, ["serve", "--geocoder", "ftp://geo.example.org"])
    assert bad.exit_code == 1 and "must be an http:// or https:// URL" in bad.output


def test_a_place_made_earlier_is_reused_not_made_again(site: LocalSite) -> None:
    from toolkit.geocoding import Places, make_assets
    from toolkit.store import Actor

    places = Places(
        pd.DataFrame(
            {
                "source": ["pelias:geo", "pelias:geo"],
                "place_id": ["node/1", "node/2"],
                "label": ["1 A Street, Kew", "2 B Street, Kew"],
                "longitude": [145.1, 145.2],
                "latitude": [-37.1, -37.2],
                "feature": ["premise", "premise"],
                "name": ["1 A STREET KEW", "2 B STREET KEW"],
                "query": ["1 a st kew", "2 b st kew"],
            }
        ),
        np.array([0, 1]),
    )
    first = make_assets(site.store, places, "Property", Actor("officer", "test"))
    again = make_assets(site.store, places, "Property", Actor("officer", "test"))
    assert first.tolist() == again.tolist()
    assert len({*first.tolist(), 101, 102, 103}) == 5
    # Another class is another asset.
    other = make_assets(site.store, places, "Hydrant", Actor("officer", "test"))
    assert set(other.tolist()).isdisjoint(first.tolist())
