"""`toolkit item add|update|retire` and `toolkit media upload|get`, on both faces.

The embedded face writes the site file directly; the remote face goes over real HTTP to
a server serving the same file, as an API user on duty in the event. Every test reads
what was stored back from the file, so both faces are held to the same values.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from serving import running

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.server.app import create_app
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
REGISTER = "damage-assessment"
FACES = ("local", "remote")


@dataclass
class World:
    path: Path
    url: str
    event: int  # the writer is on duty here
    other_event: int  # nobody is on duty here
    asset: str
    keys: dict[str, str]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    """A site with assets, two events, five items (so the register exists), a writer on
    duty in the first event, a reader on duty nowhere, and a second site with its own user;
    served on loopback."""
    folder = tmp_path_factory.mktemp("writes")
    path = folder / "site.sqlite"
    items = folder / "items.csv"
    lines = (SAMPLE / "damage_assessments.csv").read_text(encoding="utf-8").splitlines()
    items.write_text("\n".join(lines[:6]) + "\n", encoding="utf-8")
    keys: dict[str, str] = {}
    with LocalSite(path, "default", user_id="operator") as site:
        job = site.run_import(ImportRequest("asset", "assets-csv", SAMPLE / "assets.csv"))
        assert job["status"] == "COMPLETE", job["result"]
        event = site.create_event({"name": "Flood 2026"})["id"]
        other_event = site.create_event({"name": "Storm 2025"})["id"]
        job = site.run_import(
            ImportRequest("item", "damage-assessments", items, event_id=event, region_id=1)
        )
        assert job["status"] == "COMPLETE", job["result"]
        for name, duty in (("writer", event), ("reader", None)):
            site.add_user(name, positions=["API User"], approved=True, terms_accepted=True)
            if duty is not None:
                site.put_on_duty(name, duty, "Field Inspector")
            keys[name] = site.issue_api_key(name)["key"]
        asset = str(next(iter(site.list_assets({"limit": "1"})["models"])))
    with LocalSite(path, "beta", user_id="operator") as beta:
        beta_event = beta.create_event({"name": "Beta fire"})["id"]
        beta.add_user("intruder", positions=["API User"], approved=True, terms_accepted=True)
        beta.put_on_duty("intruder", beta_event, "Field Inspector")
        keys["beta"] = beta.issue_api_key("intruder")["key"]
    app = create_app(path, settings=ServerSettings(rate_limit=None, auth_rate_limit=None))
    with running(app) as url:
        yield World(path, url, event, other_event, asset, keys)


def run(
    world: World, face: str, *args: str, key: str = "writer", stdin: bytes | str | None = None
) -> Result:
    """The CLI on one face: ``--store`` the file, or ``--url`` the server with a key."""
    if face == "local":
        return CliRunner().invoke(cli, [*args, "--store", str(world.path)], input=stdin)
    runner = CliRunner(env={"TOOLKIT_API_KEY": world.keys[key]})
    return runner.invoke(cli, [*args, "--url", world.url], input=stdin)


def ok(result: Result) -> Result:
    assert result.exit_code == 0, result.output
    return result


def stored(world: World, item_id: int) -> dict[str, Any]:
    with LocalSite(world.path, "default", create=False) as site:
        return site.get_item(item_id)


def audit(world: World, item_id: int) -> list[dict[str, Any]]:
    with LocalSite(world.path, "default", create=False) as site:
        models = site.list_audit_logs({"itemId": str(item_id), "limit": "1000"})["models"]
    return list(models.values())


def item_count(world: World) -> int:
    with LocalSite(world.path, "default", create=False) as site:
        return int(site.list_items({"registerId": REGISTER, "limit": "1"})["total"])


def add(world: World, face: str, *args: str, **kwargs: Any) -> dict[str, Any]:
    base = ["--json", "item", "add", "--register", REGISTER, "--event-id", str(world.event)]
    return dict(json.loads(ok(run(world, face, *base, *args, **kwargs)).stdout))


# --- item add, update, retire ---------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
def test_add_update_and_retire_store_the_values_and_the_audit_messages(
    world: World, face: str
) -> None:
    notes = "Überschwemmung, 洪水 — 家が浸水 🌊"
    created = add(
        world,
        face,
        "--field",
        "damageLevel=severe",
        "--field",
        "habitable=no",
        "--field",
        "occupants=3",
        "--field",
        f"notes={notes}",
        "--asset-id",
        world.asset,
        "--message",
        "phoned in by the SES",
    )
    item = stored(world, created["id"])
    assert created == item  # --json prints the saved record, as the API answers
    # Values are converted and stored as an import stores them: a lookup in its spelling.
    assert (item["damageLevel"], item["habitable"], item["occupants"]) == ("Severe", False, 3)
    assert item["notes"] == notes and str(item["assetId"]) == world.asset
    assert (item["status"], item["eventId"], item["registerId"]) == (1, world.event, REGISTER)

    patched = run(
        world,
        face,
        "item",
        "update",
        str(item["id"]),
        "--field",
        "damageLevel=Minor",
        "--message",
        "re-inspected",
    )
    assert ok(patched).stdout.startswith(
        f"Item {item['id']} updated (PATCH): changed damageLevel\n"
    )
    after_patch = stored(world, item["id"])
    assert after_patch["damageLevel"] == "Minor"
    assert after_patch["notes"] == notes and after_patch["occupants"] == 3  # untouched

    # The same change again changes nothing: no entry, the date of the last change kept.
    same = ok(run(world, face, "item", "update", str(item["id"]), "--field", "damageLevel=Minor"))
    assert same.stdout.startswith(f"Item {item['id']} updated (PATCH): no value changed\n")
    assert stored(world, item["id"])["dateModified"] == after_patch["dateModified"]

    retired = ok(run(world, face, "item", "retire", str(item["id"]), "--message", "duplicate"))
    assert retired.stdout.startswith(f"Retired item {item['id']} (status 1 -> 0)\n")
    assert stored(world, item["id"])["status"] == 0

    # Setting an inactive status is the API's way to retire, and is audited as one.
    entries = audit(world, item["id"])
    assert [(e["action"], e["message"]) for e in entries] == [
        ("create", "phoned in by the SES"),
        ("update", "re-inspected"),
        ("retire", "duplicate"),
    ]
    who = "writer" if face == "remote" else entries[0]["userId"]
    assert {e["userId"] for e in entries} == {who}

    # Retiring again changes nothing and writes no audit entry.
    again = ok(run(world, face, "item", "retire", str(item["id"])))
    assert "already retired (status 0); unchanged" in again.stdout
    assert len(audit(world, item["id"])) == 3


@pytest.mark.parametrize("face", FACES)
def test_replace_sends_the_whole_record_and_clears_what_it_omits(
    world: World, face: str, tmp_path: Path
) -> None:
    item = add(
        world, face, "--field", "notes=keep?", "--field", "inspector=Ana", "--asset-id", world.asset
    )
    record = {"eventId": world.event, "status": 2, "damageLevel": "Moderate"}
    values = tmp_path / "item.json"
    values.write_text(json.dumps(record), encoding="utf-8")
    result = ok(
        run(
            world,
            face,
            "item",
            "update",
            str(item["id"]),
            "--replace",
            "--values",
            str(values),
            "--field",
            "inspector=Bo",
        )
    )
    assert f"Item {item['id']} replaced (PUT): changed " in result.stdout
    after = stored(world, item["id"])
    assert (after["status"], after["damageLevel"], after["inspector"]) == (2, "Moderate", "Bo")
    assert after["notes"] is None and after["assetId"] is None  # a PUT nulls what it omits

    # A PUT without the status it needs is refused, naming what is missing; nothing changes.
    partial = run(world, face, "item", "update", str(item["id"]), "--replace", "--field", "notes=x")
    assert partial.exit_code == 1
    assert "Error:" in partial.stderr and "needs --event-id and status" in partial.stderr
    assert stored(world, item["id"]) == after


@pytest.mark.parametrize("face", FACES)
def test_values_from_stdin_and_json_field_values(world: World, face: str) -> None:
    body = json.dumps({"registerId": REGISTER, "damageLevel": "None", "occupants": 1})
    created = dict(
        json.loads(
            ok(
                run(
                    world,
                    face,
                    "--json",
                    "item",
                    "add",
                    "--values",
                    "-",
                    "--event-id",
                    str(world.event),
                    "--field",
                    "occupants:=4",
                    "--field",
                    "notes:=null",
                    stdin=body,
                )
            ).stdout
        )
    )
    item = stored(world, created["id"])
    assert (item["damageLevel"], item["occupants"], item["notes"]) == ("None", 4, None)
    # A field cleared with NAME:=null.
    ok(run(world, face, "item", "update", str(item["id"]), "--field", "damageLevel:=null"))
    assert stored(world, item["id"])["damageLevel"] is None


@pytest.mark.parametrize("face", FACES)
def test_unknown_register_or_field_is_an_error_listing_the_known_ones(
    world: World, face: str
) -> None:
    before = item_count(world)
    wrong_register = run(
        world, face, "item", "add", "--register", "damage", "--event-id", str(world.event)
    )
    assert wrong_register.exit_code == 1
    assert "Error:" in wrong_register.stderr
    assert "'damage' is not a register of this site; registers: damage-assessment" in (
        wrong_register.stderr
    )
    wrong_field = run(
        world,
        face,
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        "--field",
        "damagelevel=Severe",
    )
    assert wrong_field.exit_code == 1
    assert "unknown item field(s) damagelevel" in wrong_field.stderr
    assert "damageLevel" in wrong_field.stderr.split("unknown item field(s) damagelevel")[1]
    bad_value = run(
        world,
        face,
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        "--field",
        "damageLevel=Catastrophic",
    )
    assert bad_value.exit_code == 1 and "Catastrophic" in bad_value.stderr
    assert "Severe" in bad_value.stderr  # the choices
    unknown_item = run(world, face, "item", "update", "999999", "--field", "notes=x")
    assert unknown_item.exit_code == 1 and "999999" in unknown_item.stderr
    assert item_count(world) == before  # nothing half-written


@pytest.mark.parametrize("face", FACES)
def test_huge_values_and_messages_are_refused_whole(world: World, face: str) -> None:
    before = item_count(world)
    huge = run(
        world,
        face,
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        "--field",
        "notes=" + "ä" * 10_001,
    )
    assert huge.exit_code == 1
    assert "notes" in huge.stderr and "longer than 10000 characters" in huge.stderr
    long_message = run(
        world,
        face,
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        "--message",
        "m" * 1001,
    )
    assert long_message.exit_code == 1
    assert "message is 1,001 characters; an audit message is at most 1,000" in (long_message.stderr)
    assert item_count(world) == before
    # The longest message and text fit, whatever their script, and come back whole.
    text, message = "洪" * 10_000, "é" * 1000
    created = add(world, face, "--field", f"notes={text}", "--message", message)
    assert stored(world, created["id"])["notes"] == text
    assert audit(world, created["id"])[0]["message"] == message


def test_a_values_file_that_is_not_an_object_names_the_file(world: World, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"notes": "unterminated', encoding="utf-8")
    result = run(world, "local", "item", "add", "--register", REGISTER, "--values", str(broken))
    assert result.exit_code == 1
    assert f"{broken} is not valid JSON: Unterminated string" in result.stderr
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]", encoding="utf-8")
    result = run(world, "local", "item", "add", "--register", REGISTER, "--values", str(listed))
    assert result.exit_code == 1 and "must be one JSON object" in result.stderr
    twice = run(
        world,
        "local",
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        "1",
        "--field",
        "notes=a",
        "--field",
        "notes=b",
    )
    assert twice.exit_code == 2 and "field 'notes' is given twice" in twice.stderr
    missing = run(world, "local", "item", "add", "--register", REGISTER)
    assert missing.exit_code == 2 and "--event-id" in missing.stderr


def test_another_sites_token_writes_nothing(world: World) -> None:
    before = item_count(world)
    result = run(
        world,
        "remote",
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        "--field",
        "notes=intruder",
        key="beta",
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: authentication at ") and "401" in result.stderr
    assert world.keys["beta"] not in result.output
    assert item_count(world) == before


def test_without_duty_in_the_event_nothing_is_written(world: World) -> None:
    before = item_count(world)
    reader = run(
        world,
        "remote",
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        key="reader",
    )
    assert reader.exit_code == 1
    assert "HTTP 403" in reader.stderr and "needs duty in that event" in reader.stderr
    # The writer is on duty in one event, not in the other.
    elsewhere = run(
        world, "remote", "item", "add", "--register", REGISTER, "--event-id", str(world.other_event)
    )
    assert elsewhere.exit_code == 1 and "HTTP 403" in elsewhere.stderr
    item = add(world, "local")
    moved = run(
        world, "remote", "item", "update", str(item["id"]), "--event-id", str(world.other_event)
    )
    assert moved.exit_code == 1 and "HTTP 403" in moved.stderr
    retire = run(world, "remote", "item", "retire", str(item["id"]), key="reader")
    assert retire.exit_code == 1 and "HTTP 403" in retire.stderr
    assert item_count(world) == before + 1
    assert stored(world, item["id"])["status"] == 1


def test_event_update_message_reaches_the_audit_log_on_a_server(world: World) -> None:
    result = run(
        world,
        "remote",
        "event",
        "update",
        str(world.event),
        "--description",
        "river peaked",
        "--message",
        "from the field",
    )
    ok(result)
    with LocalSite(world.path, "default", create=False) as site:
        assert site.get_event(world.event)["description"] == "river peaked"
        entries = site.list_audit_logs({"eventId": str(world.event), "limit": "1000"})["models"]
    mine = [e for e in entries.values() if e["recordType"] == "event" and e["action"] == "update"]
    assert [(e["userId"], e["message"]) for e in mine][-1] == ("writer", "from the field")


# --- media ----------------------------------------------------------------------------------


@pytest.mark.parametrize("face", FACES)
def test_media_round_trip_bytes_and_attach_to_an_item(
    world: World, face: str, tmp_path: Path
) -> None:
    content = bytes(range(256)) * 40 + b"\x00\xff end"
    source = tmp_path / "roof photo.png"
    source.write_bytes(content)
    uploaded = json.loads(ok(run(world, face, "--json", "media", "upload", str(source))).stdout)
    media_id = int(uploaded["id"])
    # The type is what the name suggests, on both faces.
    assert uploaded["contentType"] == "image/png" and uploaded["size"] == len(content)
    text = ok(run(world, face, "media", "upload", str(source), "--name", "copy.bin"))
    assert text.stdout.startswith(f"Uploaded {source} as media file ")

    target = tmp_path / "back.png"
    got = ok(run(world, face, "--json", "media", "get", str(media_id), "-o", str(target)))
    assert target.read_bytes() == content
    info = json.loads(got.stdout)
    assert (info["contentType"], info["size"]) == ("image/png", len(content))
    piped = ok(run(world, face, "media", "get", str(media_id), "-o", "-"))
    assert piped.stdout_bytes == content

    item = add(world, face, "--field", f"photos:=[{media_id}]")
    assert stored(world, item["id"])["photos"] == [media_id]


@pytest.mark.parametrize("face", FACES)
def test_media_errors_are_clear_and_write_nothing(world: World, face: str, tmp_path: Path) -> None:
    target = tmp_path / "none.bin"
    missing = run(world, face, "media", "get", "987654", "-o", str(target))
    assert missing.exit_code == 1 and "media file 987654 does not exist" in missing.stderr
    assert not target.exists() and not list(tmp_path.iterdir())
    big = tmp_path / "big.bin"
    with big.open("wb") as handle:
        handle.truncate(11 * 1024 * 1024)  # sparse: refused by its size, before reading
    too_big = run(world, face, "media", "upload", str(big))
    assert too_big.exit_code == 1
    assert "media file 'big.bin' is 11,534,336 bytes; a media file is at most" in too_big.stderr
    nameless = run(world, face, "media", "upload", "-", stdin=b"abc")
    assert nameless.exit_code == 2 and "--name" in nameless.stderr
    unknown = run(
        world,
        face,
        "item",
        "add",
        "--register",
        REGISTER,
        "--event-id",
        str(world.event),
        "--field",
        "photos:=[987654]",
    )
    assert unknown.exit_code == 1 and "987654" in unknown.stderr


def test_media_from_stdin_keeps_its_name_and_bytes(world: World, tmp_path: Path) -> None:
    content = "plan, ünïcode\n".encode() * 100
    uploaded = json.loads(
        ok(
            run(
                world,
                "remote",
                "--json",
                "media",
                "upload",
                "-",
                "--name",
                "plan.txt",
                stdin=content,
            )
        ).stdout
    )
    assert uploaded["name"] == "plan.txt" and uploaded["contentType"] == "text/plain"
    with LocalSite(world.path, "default", create=False) as site:
        assert site.download_media(int(uploaded["id"])) == (content, "text/plain")


def test_every_new_command_has_an_example(world: World) -> None:
    for command in (
        ["item", "add"],
        ["item", "update"],
        ["item", "retire"],
        ["media", "upload"],
        ["media", "get"],
    ):
        shown = ok(CliRunner().invoke(cli, [*command, "--help"])).stdout
        assert "Examples:" in shown and f"toolkit {' '.join(command)} " in shown


def test_a_write_takes_only_the_message_parameter(world: World) -> None:
    import httpx

    headers = {"X-Site": "default"}
    with httpx.Client(base_url=world.url, headers=headers, timeout=60) as api:
        device = {"uuid": "u", "platform": "p", "version": "1", "name": "n"}
        token = api.post("/api/json/auth", json={**device, "apiKey": world.keys["writer"]})
        api.headers["Authorization"] = f"Bearer {token.json()['token']}"
        body = {"registerId": REGISTER, "eventId": world.event}
        before = item_count(world)
        answer = api.post("/api/json/item", params={"msg": "typo"}, json=body)
        assert answer.status_code == 400
        assert answer.json()["message"] == "unknown parameter(s) msg; a write takes only message"
        patched = api.patch(f"/api/json/event/id/{world.event}", params={"message": ""}, json={})
        assert patched.status_code == 200  # an empty message is no message
        assert item_count(world) == before
