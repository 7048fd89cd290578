"""One contract, two faces: the same scenarios on an embedded site and on `toolkit serve`.

Each face gets its own fresh site file, set up the same way; the server is reached over
real HTTP on loopback. Results must be identical, timestamps aside.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from serving import running

from toolkit.cli import cli
from toolkit.errors import NotFoundError, OptionError, ToolkitError
from toolkit.importing.pipeline import ImportRequest
from toolkit.matching.lookup import index_from_file
from toolkit.remote import RemoteSite
from toolkit.remote.client import Credentials, Profile
from toolkit.reports.waiting import wait_for_report
from toolkit.server.app import create_app
from toolkit.server.state import ServerSettings
from toolkit.site import LocalSite
from toolkit.site.protocol import Delivery, operations

pytestmark = pytest.mark.slow

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
USER = "officer"
TIME_KEYS = {
    "dateCreated",
    "dateModified",
    "dateCompleted",
    "dateRun",
    "timestamp",
    "timeTaken",
    "startDate",
}


def _set_up(path: Path) -> tuple[int, str]:
    """Parcels, an event, and an API user on duty; returns the event id and the key."""
    with LocalSite(path, "contract", user_id=USER) as site:
        site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        event = site.create_event({"name": "Flood", "tags": ["flood"]})["id"]
        site.add_user(USER, positions=["API User"], approved=True, terms_accepted=True)
        site.put_on_duty(USER, event, "Recovery Officer")
        return event, site.issue_api_key(USER)["key"]


@dataclass
class Faces:
    local: LocalSite
    remote: RemoteSite
    event: int
    job: dict[str, Any]  # the local import of the sample's items
    pushed: Any  # the same import pushed to the server
    writes: tuple[list[Any], list[Any]]  # REST item writes, on each face


@pytest.fixture(scope="module")
def faces(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Faces]:
    root = tmp_path_factory.mktemp("contract")
    (root / "local").mkdir()
    (root / "remote").mkdir()
    event, _ = _set_up(root / "local" / "site.sqlite")
    remote_event, key = _set_up(root / "remote" / "site.sqlite")
    assert event == remote_event
    items = []
    for side in ("local", "remote"):
        copy = root / side / "damage_assessments.csv"
        copy.write_bytes((SAMPLE / "damage_assessments.csv").read_bytes())
        items.append(copy)
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
    with running(create_app(root / "remote" / "site.sqlite", settings=settings)) as url:
        profile = Profile(url, "contract", Credentials(api_key=key))
        with (
            LocalSite(root / "local" / "site.sqlite", "contract", user_id=USER) as local,
            RemoteSite(profile) as remote,
        ):
            # Both faces import here, not in a test, so every test of the module sees the
            # items whichever worker (pytest-xdist) runs it and in whatever order.
            # One call on both faces: run in place, or checked offline and pushed.
            job = local.import_file(
                ImportRequest("item", "damage-assessments", items[0], event_id=event, region_id=1)
            ).to_dict()
            index = index_from_file(SAMPLE / "parcels.zip")
            pushed = remote.import_file(
                ImportRequest("item", "damage-assessments", items[1], event_id=event, region_id=1),
                delivery=Delivery(asset_index=lambda: index, poll_interval_s=0.05),
            )
            # REST writes here too, after the imports, so every test sees the same items.
            writes = (_item_writes(local, event), _item_writes(remote, event))
            yield Faces(local, remote, event, job, pushed, writes)


def _item_writes(site: Any, event: int) -> list[Any]:
    """Create, patch and replace one item; what each step returned."""
    created = site.create_item({"registerId": "damage-assessment", "eventId": event})
    patched = site.patch_item(created["id"], {"status": 2})
    replaced = site.replace_item(created["id"], {"eventId": event, "status": 3})
    return [created, patched, replaced]


def _timeless(value: Any) -> Any:
    """``value`` with every timestamp replaced by a marker, so two runs compare equal."""
    if isinstance(value, dict):
        return {
            k: ("<time>" if k in TIME_KEYS and v is not None else _timeless(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_timeless(v) for v in value]
    return value


def _both(faces: Faces, call: Any) -> tuple[Any, Any]:
    return _timeless(call(faces.local)), _timeless(call(faces.remote))


def test_an_import_gives_the_same_items_and_counts(faces: Faces) -> None:
    job, pushed = faces.job, faces.pushed
    assert job["status"] == "COMPLETE" and pushed.ok and pushed.failure() is None
    # Rows refused offline stay home, yet the push's counts are the whole file's.
    assert pushed.counts() == job["summary"]["counts"]
    params = {"registerId": "damage-assessment", "limit": "1000"}
    local, remote = _both(faces, lambda site: site.list_items(params))
    assert local == remote
    assert local["total"] == "993"  # the sample's 992 and one created by REST


def test_reads_filters_and_lookups_agree(faces: Faces) -> None:
    calls = [
        lambda s: s.list_items(
            {
                "registerId": "damage-assessment",
                "cql": "damageLevel:Severe AND NOT habitable:true",
                "limit": "50",
                "order": "id",
                "direction": "desc",
            }
        ),
        lambda s: s.list_items(
            {
                "type": "damage-assessment",
                "limit": "5",
                "offset": "10",
                "since": "2000-01-01",
                "since_operator": "gt",
            }
        ),
        lambda s: s.get_item(7),
        lambda s: s.list_assets({"isImpacted": "true", "limit": "20"}),
        lambda s: s.list_assets({"latitude": "-37.56", "longitude": "143.85", "range": "300"}),
        lambda s: s.get_asset("102559"),
        lambda s: s.asset_types(),
        lambda s: s.list_events({"fulltext": "flood"}),
        lambda s: s.get_event(faces.event),
        lambda s: s.asset_lookup("55 SMITH ROAD BUNINYONG", {"mode": "soundex", "maxRank": 3}),
        lambda s: s.asset_lookup(
            [{"code": "a", "str": "55 SMITH RD"}, {"code": "b", "str": "815320"}],
            {"mode": "auto", "codeField": "propnum"},
            "id",
        ),
        # A push's changes name its chunk's job and message; everything else must agree.
        lambda s: {
            id_: {k: v for k, v in entry.items() if k not in ("message", "importJobId")}
            for id_, entry in s.list_audit_logs({"itemId": "7"})["models"].items()
        },
    ]
    for number, call in enumerate(calls):
        local, remote = _both(faces, call)
        assert local == remote, f"call {number} differs"


def test_updates_and_errors_agree(faces: Faces) -> None:
    local, remote = _both(
        faces, lambda s: s.update_event(faces.event, {"description": "River flood, north bank"})
    )
    assert local == remote
    assert local["description"] == "River flood, north bank"
    for call in (lambda s: s.get_item(999_999), lambda s: s.get_event(999_999)):
        for site in (faces.local, faces.remote):
            with pytest.raises(NotFoundError):
                call(site)
    messages = []
    for site in (faces.local, faces.remote):
        with pytest.raises(ToolkitError) as caught:
            site.list_items({"registerId": "damage-assessment", "limit": "5000"})
        messages.append(str(caught.value))
    assert all("limit 5000 is over the maximum of 1000" in m for m in messages)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (
            lambda s: s.list_items({"registerId": "damage-assesment"}),
            "registerId 'damage-assesment' is not a register of this site; "
            "registers: damage-assessment",
        ),
        (
            lambda s: s.list_items({"registerId": "damage-assessment", "cql": "suburbs:x"}),
            "cql: 'suburbs' is not a field of register 'damage-assessment'; its fields: "
            "reference, address, suburb,",
        ),
        (
            lambda s: s.list_items({"registerId": "damage-assessment", "assetId": "7"}),
            "assetId 7 is not an asset of this site",
        ),
        (
            lambda s: s.list_assets({"type": "Propety"}),
            "type 'Propety' is not an asset class of this site; classes: Property",
        ),
        (
            lambda s: s.asset_lookup("12 SMITH ST", {"assetClass": "Propety"}),
            "assetClass 'Propety' is not a class of the assets; classes: Property",
        ),
        (
            lambda s: s.asset_lookup(
                [{"code": "a", "str": "12 SMITH ST"}], {"assetClass": "Propety"}
            ),
            "assetClass 'Propety' is not a class of the assets; classes: Property",
        ),
        (
            lambda s: s.list_audit_logs({"importJobId": "99"}),
            "importJobId 99 is not an import job of this site",
        ),
    ],
    ids=[
        "register",
        "cql field",
        "asset id",
        "asset type",
        "asset class",
        "asset class list",
        "job",
    ],
)
def test_an_unknown_name_is_a_400_listing_the_known_ones_on_both_faces(
    faces: Faces, call: Any, message: str
) -> None:
    for site in (faces.local, faces.remote):
        with pytest.raises(ToolkitError) as caught:
            call(site)
        assert message in str(caught.value)
        if site is faces.remote:
            assert getattr(caught.value, "status", None) == 400
        else:
            assert isinstance(caught.value, OptionError)


def test_reports_agree(faces: Faces) -> None:
    def run(site: Any) -> dict[str, Any]:
        started = site.report_run({"reportId": 2, "params": {"eventId": faces.event}})
        # The server runs reports in the background; the embedded site has run it already.
        status = wait_for_report(lambda: site.report_status(started["id"]))
        fetched = site.report_fetch(started["id"], "json")
        contents = fetched["contents"]
        # Metadata about when the data was read is a time like the others, and so are the
        # data's timestamp fields (the two sites imported their items at different moments).
        meta = [m for m in contents["meta"] if not m["key"].startswith("date")]
        times = {f["key"] for f in contents["spec"] if f["type"] in ("timestamp", "date")}
        data = [
            {k: ("<time>" if k in times and v is not None else v) for k, v in row.items()}
            for row in contents["data"]
        ]
        return {
            "status": status["status"],
            "rowCount": status["rowCount"],
            "data": data,
            "spec": contents["spec"],
            "meta": meta,
        }

    local, remote = _both(faces, run)
    assert local == remote
    assert local["status"] == "COMPLETED"


@pytest.mark.parametrize(
    "command",
    [
        ["item", "list", "--register", "damage-assessment", "--limit", "5"],
        ["item", "get", "3"],
        ["asset", "list", "--impacted", "--limit", "5"],
        ["asset", "get", "102559"],
        ["asset", "types"],
        ["event", "list", "--fulltext", "flood"],
        ["audit-log", "list", "--event-id", "1", "--limit", "1"],
        ["lookup", "55 SMITH ROAD BUNINYONG 3357", "--output", "id"],
    ],
    ids=lambda c: " ".join(c[:2]),
)
def test_commands_print_the_same_json_locally_and_remotely(
    faces: Faces, command: list[str]
) -> None:
    local_args = ["--store", str(faces.local.db.path), "--site", "contract", "--json", *command]
    profile = faces.remote.profile
    remote_args = ["--url", profile.base_url, "--site", "contract", "--json", *command]
    env = {"TOOLKIT_API_KEY": profile.credentials.api_key or ""}
    local = CliRunner().invoke(cli, local_args)
    remote = CliRunner(env=env).invoke(cli, remote_args)
    assert local.exit_code == remote.exit_code == 0, (local.stderr, remote.stderr)
    assert _timeless(json.loads(local.stdout)) == _timeless(json.loads(remote.stdout))


def test_item_writes_agree(faces: Faces) -> None:
    local, remote = (_timeless(w) for w in faces.writes)
    assert local == remote
    assert [w["status"] for w in local] == [1, 2, 3]


def test_plumbing_agrees(faces: Faces) -> None:
    assert faces.local.name == faces.remote.name == "contract"
    assert faces.local.ping()["status"] == faces.remote.ping()["status"] == 200
    local, remote = _both(faces, lambda s: s.list_registers())
    assert local == remote

    def parcels_job(site: Any) -> dict[str, Any]:  # job 1 imported the parcels, on both
        job = site.import_status(1)
        # The summary's timings per stage differ run to run; its counts must not.
        return {**{k: v for k, v in job.items() if k != "summary"}, **job["summary"]["counts"]}

    local, remote = _both(faces, parcels_job)
    assert local == remote and local["status"] == "COMPLETE"
    uploaded = [
        s.upload_media("note.txt", b"contract bytes", "text/plain")
        for s in (faces.local, faces.remote)
    ]
    assert _timeless(uploaded[0]) == _timeless(uploaded[1])
    assert faces.local.download_media(uploaded[0]["id"]) == faces.remote.download_media(
        uploaded[1]["id"]
    )
    assert faces.local.download_media(uploaded[0]["id"])[0] == b"contract bytes"


def test_what_the_api_has_no_route_for_says_so(faces: Faces) -> None:
    """The embedded site does these; over HTTP each is one clear error, not a crash."""
    assert faces.local.report_list()
    with pytest.raises(OptionError, match="no way to list its reports"):
        faces.remote.report_list()
    with pytest.raises(OptionError, match="no way to create events"):
        faces.remote.create_event({"name": "Storm"})
    assert [u["username"] for u in faces.local.list_users()] == [USER]
    assert faces.local.get_user(USER)["username"] == USER
    assert len(faces.local.list_api_keys(USER)) == 1
    calls = {
        "user add": lambda s: s.add_user("clerk"),
        "user get": lambda s: s.get_user(USER),
        "user list": lambda s: s.list_users(),
        "user update": lambda s: s.update_user(USER, approved=True),
        "user password": lambda s: s.set_password(USER, "a long password"),
        "user totp": lambda s: s.register_totp(USER),
        "user totp removal": lambda s: s.remove_totp(USER),
        "api-key issue": lambda s: s.issue_api_key(USER),
        "api-key revoke": lambda s: s.revoke_api_key(1),
        "api-key list": lambda s: s.list_api_keys(USER),
        "duty add": lambda s: s.put_on_duty(USER, faces.event, "Recovery Officer"),
        "duty remove": lambda s: s.take_off_duty(USER, faces.event),
    }
    for operation, call in calls.items():
        with pytest.raises(OptionError) as caught:
            call(faces.remote)
        assert str(caught.value).startswith(
            f"{operation} is an operation of the embedded site; the API has no route for it"
        )


def test_user_list_over_the_api_is_a_clear_error_not_a_crash(faces: Faces) -> None:
    profile = faces.remote.profile
    env = {"TOOLKIT_API_KEY": profile.credentials.api_key or ""}
    result = CliRunner(env=env).invoke(
        cli, ["--url", profile.base_url, "--site", "contract", "user", "list"]
    )
    assert result.exit_code != 0
    assert "unexpected internal error" not in result.stderr
    assert "user list is an operation of the embedded site" in result.stderr


# Which test (or fixture) of this module exercises each operation of ``Site`` on both
# faces; an operation added to the protocol without a contract test fails the next test.
CONTRACT = {
    "__enter__": "faces",
    "__exit__": "faces",
    "close": "faces",
    "name": "test_plumbing_agrees",
    "ping": "test_plumbing_agrees",
    "list_registers": "test_plumbing_agrees",
    "import_status": "test_plumbing_agrees",
    "upload_media": "test_plumbing_agrees",
    "download_media": "test_plumbing_agrees",
    "import_schedule": "faces",  # the push schedules its chunks; the local face runs them
    "import_file": "test_an_import_gives_the_same_items_and_counts",  # run in the fixture
    "asset_lookup": "test_reads_filters_and_lookups_agree",  # and the tie test
    "list_items": "test_reads_filters_and_lookups_agree",
    "get_item": "test_reads_filters_and_lookups_agree",
    "list_assets": "test_reads_filters_and_lookups_agree",
    "get_asset": "test_reads_filters_and_lookups_agree",
    "asset_types": "test_reads_filters_and_lookups_agree",
    "list_events": "test_reads_filters_and_lookups_agree",
    "get_event": "test_reads_filters_and_lookups_agree",
    "list_audit_logs": "test_reads_filters_and_lookups_agree",
    "get_audit_log": "test_audit_log_entries_agree",
    "update_event": "test_updates_and_errors_agree",
    "create_item": "test_item_writes_agree",
    "patch_item": "test_item_writes_agree",
    "replace_item": "test_item_writes_agree",
    "report_run": "test_reports_agree",
    "report_status": "test_reports_agree",
    "report_fetch": "test_reports_agree",
    "report_write": "test_report_files_agree",
    "report_list": "test_what_the_api_has_no_route_for_says_so",
    "create_event": "test_what_the_api_has_no_route_for_says_so",
    **dict.fromkeys(
        (
            "add_user",
            "get_user",
            "list_users",
            "update_user",
            "set_password",
            "register_totp",
            "remove_totp",
            "issue_api_key",
            "revoke_api_key",
            "list_api_keys",
            "put_on_duty",
            "take_off_duty",
        ),
        "test_what_the_api_has_no_route_for_says_so",
    ),
}


def test_every_operation_of_the_site_has_a_contract_test() -> None:
    protocol = {*operations(), "__enter__", "__exit__"}
    assert sorted(protocol - CONTRACT.keys()) == [], "operations without a contract test"
    assert sorted(CONTRACT.keys() - protocol) == [], "contract tests of no operation"
    missing = {test for test in CONTRACT.values() if test not in globals()}
    assert not missing, f"named contract tests that do not exist: {missing}"


def test_audit_log_entries_agree(faces: Faces) -> None:
    def first(site: Any) -> dict[str, Any]:
        entries = site.list_audit_logs({"itemId": "7", "limit": "1", "order": "id"})["models"]
        entry = site.get_audit_log(int(next(iter(entries))))
        return {k: v for k, v in entry.items() if k not in ("id", "message", "importJobId")}

    local, remote = _both(faces, first)
    assert local == remote and local["itemId"] == 7


def test_report_files_agree(faces: Faces) -> None:
    import io

    def written(site: Any) -> tuple[str, dict[str, Any]]:
        started = site.report_run({"reportId": 2, "params": {"eventId": faces.event}})
        deadline = time.monotonic() + 60
        while site.report_status(started["id"])["status"] not in ("COMPLETED", "FAILED"):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        out = io.BytesIO()
        fetched = site.report_write(started["id"], "csv", out)
        return out.getvalue().decode("utf-8").splitlines()[0], {
            k: v for k, v in fetched.items() if k == "status"
        }

    local, remote = _both(faces, written)
    assert local == remote
    assert local[0]  # the CSV's heading row


def test_a_long_lookup_list_is_one_call_on_both_faces(faces: Faces) -> None:
    """More queries than one request carries: the remote site batches them, and queries
    without a code keep their place in the whole list (not restarting at 1 per batch)."""
    queries = [{"str": "55 SMITH ROAD BUNINYONG"} for _ in range(1001)] + [
        {"code": "last", "str": "815320"}
    ]
    local, remote = _both(faces, lambda s: s.asset_lookup(queries, {"mode": "auto"}, "id"))
    assert local == remote
    assert len(local) == 1002 and local["1001"]["reference"] == 1001


def test_lookup_of_a_long_file_over_the_api_keeps_every_query(faces: Faces, tmp_path: Path) -> None:
    """More rows than one request carries: the remote site batches (the command no longer
    does), and every query comes back, keyed as the embedded site keys it."""
    queries = tmp_path / "queries.csv"
    queries.write_text("Address\n" + "55 SMITH ROAD BUNINYONG\n" * 1001)
    command = ["--json", "lookup", "--file", str(queries), "--column", "Address"]
    profile = faces.remote.profile
    env = {"TOOLKIT_API_KEY": profile.credentials.api_key or ""}
    remote = CliRunner(env=env).invoke(
        cli, ["--url", profile.base_url, "--site", "contract", *command]
    )
    local = CliRunner().invoke(
        cli, ["--store", str(faces.local.db.path), "--site", "contract", *command]
    )
    assert remote.exit_code == local.exit_code == 0, (remote.stderr, local.stderr)
    remote_keys, local_keys = (list(json.loads(r.stdout)) for r in (remote, local))
    assert len(remote_keys) == 1001 and remote_keys == local_keys


def test_a_tie_is_a_field_of_the_answer_not_a_word_of_its_error(faces: Faces) -> None:
    """Several assets tied and none was chosen: ``tied`` says how many, on both faces, and
    the command counts the query as ambiguous from it (not by searching ``err``)."""
    local, remote = _both(faces, lambda s: s.asset_lookup("55 SMITH ROAD", {"mode": "soundex"}))
    assert local == remote
    assert local["1"]["asset"] is None and local["1"]["tied"] == 2
    assert "tied" not in faces.local.asset_lookup("55 SMITH ROAD BUNINYONG 3357")["1"]
    profile = faces.remote.profile
    env = {"TOOLKIT_API_KEY": profile.credentials.api_key or ""}
    command = ["--json", "lookup", "55 SMITH ROAD", "55 SMITH ROAD BUNINYONG 3357"]
    remote_run = CliRunner(env=env).invoke(
        cli, ["--url", profile.base_url, "--site", "contract", *command]
    )
    local_run = CliRunner().invoke(
        cli, ["--store", str(faces.local.db.path), "--site", "contract", *command]
    )
    for run in (local_run, remote_run):
        assert run.exit_code == 3, run.stderr
        assert "2 queries: 1 matched" in run.stderr and "1 ambiguous, 0 unmatched" in run.stderr
    assert json.loads(local_run.stdout) == json.loads(remote_run.stdout)
    assert json.loads(local_run.stdout)["1"]["tied"] == 2
