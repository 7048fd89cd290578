"""List commands write CSV and JSON lines and page through everything, on both faces."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from serving import running

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.server.app import create_app
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PARCELS = 3000  # sample_data/parcels.zip
ITEMS = 992  # the good rows of sample_data/damage_assessments.csv


@dataclass
class World:
    path: Path
    api_key: str
    url: str = ""


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """3,000 parcels and 992 items (more than one page of each), an API user on duty, and
    the site served on loopback."""
    path = tmp_path_factory.mktemp("lists") / "site.sqlite"
    with LocalSite(path, "default") as site:
        assert site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))[
            "status"
        ] == ("COMPLETE")
        event = site.create_event({"name": '=HYPERLINK("http://x")'})["id"]
        job = site.run_import(
            ImportRequest(
                "item",
                "damage-assessments",
                SAMPLE / "damage_assessments.csv",
                event_id=event,
                region_id=1,
            )
        )
        assert job["summary"]["counts"]["inserted"] == ITEMS
        site.add_user("reader", positions=["API User"], approved=True, terms_accepted=True)
        site.put_on_duty("reader", event, "Recovery Officer")
        key = site.issue_api_key("reader")["key"]
    app = create_app(path, settings=ServerSettings(rate_limit=None, auth_rate_limit=None))
    with running(app) as url:
        yield World(path, key, url)


def local(world: World, *args: str) -> Result:
    result = CliRunner().invoke(cli, [*args, "--store", str(world.path)])
    assert result.exit_code == 0, result.output
    return result


def remote(world: World, *args: str) -> Result:
    result = CliRunner(env={"TOOLKIT_API_KEY": world.api_key}).invoke(
        cli, [*args, "--url", world.url]
    )
    assert result.exit_code == 0, result.output
    return result


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def test_asset_list_all_as_csv_holds_every_asset_once(world: World) -> None:
    rows = csv_rows(local(world, "asset", "list", "--all", "--csv").stdout)
    assert len(rows) == PARCELS
    assert len({r["id"] for r in rows}) == PARCELS
    assert rows[0]["id"] == "100001" and rows[0]["type"] == "Property"
    # Nested values are JSON text in their cell.
    assert json.loads(rows[0]["extraInfo"])[0]["key"] == "propnum"
    assert json.loads(rows[0]["geo"])["polygons"]


def test_without_all_one_page_and_a_note_saying_how_many_there_are(world: World) -> None:
    result = local(world, "asset", "list", "--csv", "--limit", "50", "--offset", "10")
    rows = csv_rows(result.stdout)
    assert [r["id"] for r in rows] == [str(100011 + i) for i in range(50)]
    assert "50 of 3,000 records; --all for every one" in result.stderr


def test_json_lines_and_the_streamed_envelope(world: World) -> None:
    total = int(json.loads(local(world, "audit-log", "list", "--json").stdout)["total"])
    assert total > PARCELS + ITEMS  # the parcels, the items, the event and the account
    lines = local(world, "audit-log", "list", "--all", "--nl").stdout.splitlines()
    entries = [json.loads(line) for line in lines]
    assert len(entries) == total
    assert [e["id"] for e in entries] == sorted({e["id"] for e in entries})
    assert sum(e["recordType"] == "asset" for e in entries) == PARCELS
    document = json.loads(local(world, "asset", "list", "--all", "--json").stdout)
    assert (document["count"], document["total"]) == (PARCELS, str(PARCELS))
    assert list(document["models"])[:2] == ["100001", "100002"]
    assert len(document["models"]) == PARCELS


def test_all_pages_by_the_limit_given(world: World) -> None:
    rows = csv_rows(
        local(
            world, "item", "list", "--register", "damage-assessment", "--all", "--csv",
            "--limit", "250", "--offset", "2",
        ).stdout
    )  # fmt: skip
    assert len(rows) == ITEMS - 2
    ids = [int(r["id"]) for r in rows]
    assert ids == sorted(ids) and len(set(ids)) == ITEMS - 2
    assert "damageLevel" in rows[0]


def test_the_remote_face_pages_through_the_api_to_the_same_rows(world: World) -> None:
    for command in (
        ("asset", "list"),
        ("item", "list", "--register", "damage-assessment"),
    ):
        here = local(world, *command, "--all", "--csv").stdout
        there = remote(world, *command, "--all", "--csv").stdout
        assert len(csv_rows(there)) in (PARCELS, ITEMS)
        assert there == here, command
    nl = remote(world, "audit-log", "list", "--all", "--nl", "--limit", "400").stdout
    entries = [json.loads(line) for line in nl.splitlines()]
    assert len(entries) == len({e["id"] for e in entries})
    assert sum(e["recordType"] == "asset" for e in entries) == PARCELS
    assert sum(e["recordType"] == "item" for e in entries) == ITEMS


def test_a_formula_looking_cell_is_neutralised(world: World) -> None:
    rows = csv_rows(local(world, "event", "list", "--csv").stdout)
    assert rows[0]["name"] == '\'=HYPERLINK("http://x")'
    line = json.loads(local(world, "event", "list", "--nl").stdout)
    assert line["name"] == '=HYPERLINK("http://x")'  # JSON is data, not a spreadsheet


def test_import_status_as_csv_and_json_lines(world: World) -> None:
    rows = csv_rows(local(world, "import-status", "--csv").stdout)
    assert [(r["id"], r["type"], r["rule"], r["status"]) for r in rows] == [
        ("1", "asset", "property-assets", "COMPLETE"),
        ("2", "item", "damage-assessments", "COMPLETE"),
    ]
    assert (rows[1]["read"], rows[1]["inserted"], rows[1]["rejected"]) == ("1000", "992", "8")
    assert list(rows[0])[-7:] == [
        "read", "inserted", "updated", "unchanged", "skipped", "retired", "rejected",
    ]  # fmt: skip
    jobs = [json.loads(line) for line in local(world, "import-status", "--nl").stdout.splitlines()]
    assert [j["id"] for j in jobs] == [1, 2] and jobs[1]["summary"]["counts"]["inserted"] == ITEMS
    one = csv_rows(local(world, "import-status", "2", "--csv").stdout)
    assert [r["id"] for r in one] == ["2"]


@pytest.mark.parametrize(
    "flags", [("--csv", "--nl"), ("--csv", "--json"), ("--nl", "--json")], ids=" ".join
)
def test_two_output_formats_at_once_is_a_usage_error(world: World, flags: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, ["asset", "list", *flags, "--store", str(world.path)])
    assert result.exit_code == 2
    assert "each choose the output; give one" in result.output
