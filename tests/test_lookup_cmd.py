"""`toolkit lookup` against the sample parcels: text, codes, files, saved indexes, the site."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
PARCELS = SAMPLE / "parcels.zip"


def _run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_one_query_gives_the_spec_object() -> None:
    code, out, err = _run(
        "--json", "lookup", "55 SMITH ROAD BUNINYONG 3357", "--assets", str(PARCELS)
    )
    assert code == 0, err
    entry = json.loads(out)["1"]
    assert (entry["reference"], entry["query"], entry["err"]) == (
        1,
        "55 SMITH ROAD BUNINYONG 3357",
        None,
    )
    asset = entry["asset"]
    assert (asset["id"], asset["type"], asset["name"]) == (
        "102559",
        "Property",
        "55 SMITH ROAD BUNINYONG 3357",
    )
    assert {"key": "propnum", "value": asset["extraInfo"][0]["value"]} in asset["extraInfo"]
    assert asset["geo"]["polygons"] and asset["geo"]["points"] == []
    assert float(asset["accuracy"]) == 100.0
    assert "1 queries: 1 matched (soundex 1)" in err


def test_a_tie_is_never_guessed_and_candidates_are_listed() -> None:
    code, out, err = _run(
        "--json",
        "lookup",
        "55 SMITH RD",
        "--assets",
        str(PARCELS),
        "--candidates",
        "3",
        "--output",
        "id",
    )
    entry = json.loads(out)["1"]
    assert code == 4  # the one query found no asset: a tie is no asset
    assert entry["asset"] is None
    assert "2 assets tied" in entry["err"]
    assert entry["candidates"].count(":100.0") == 2
    assert "1 ambiguous" in err


def test_a_file_resolves_to_a_csv_and_the_saved_index_is_reused(tmp_path: Path) -> None:
    out_file, index_dir = tmp_path / "matches.csv", tmp_path / "parcels.idx"
    args = [
        "lookup",
        "--file",
        str(SAMPLE / "damage_assessments.csv"),
        "--column",
        "Address",
        "--code-column",
        "Reference",
        "--assets",
        str(PARCELS),
        "--index",
        str(index_dir),
        "--max-rank",
        "3",
        "--fallback-mode",
        "fuzzy",
        "-o",
        str(out_file),
    ]
    code, _, err = _run(*args)
    assert code == 3, err  # some addresses found no asset
    assert (index_dir / "index.json").exists()
    built = (index_dir / "index.json").stat().st_mtime_ns
    with out_file.open(encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 1000
    truth = {
        r["Reference"]: r["asset_id"]
        for r in csv.DictReader((SAMPLE / "damage_assessments_truth.csv").open(encoding="utf-8"))
    }
    matched = [r for r in rows if r["asset_id"]]
    assert len(matched) > 650
    assert all(truth[r["reference"]] == r["asset_id"] for r in matched)
    code, _, _ = _run(*args)
    assert code == 3
    assert (index_dir / "index.json").stat().st_mtime_ns == built  # reloaded, not rebuilt


def test_without_assets_the_sites_assets_are_used(tmp_path: Path) -> None:
    store = str(tmp_path / "site.sqlite")
    code, _, err = _run(
        "--store", store, "import", str(PARCELS), "--type", "asset", "--rule", "property-assets"
    )
    assert code == 0, err
    code, out, _ = _run(
        "--store", store, "--json", "lookup", "102559", "--mode", "id", "--output", "id"
    )
    assert json.loads(out)["1"]["asset"] == "102559"


def test_queries_and_file_are_one_or_the_other() -> None:
    code, _, err = _run("lookup", "--assets", str(PARCELS))
    assert code == 2
    assert "give QUERIES or --file" in err
    code, _, err = _run("lookup", "x", "--file", str(PARCELS), "--column", "name")
    assert code == 2


def test_fuzzy_explains_its_links_in_json_and_with_explain() -> None:
    code, out, err = _run(
        "--json",
        "lookup",
        "78 WADR COURT BALLARAT CENTRAL",
        "55 SMITH RD",
        "--assets",
        str(PARCELS),
        "--mode",
        "fuzzy",
        "--output",
        "id",
    )
    assert code == 3, err  # one linked, one tied
    linked, tied = json.loads(out)["1"], json.loads(out)["2"]
    # The spec's keys are unchanged; the explanation sits beside them.
    assert list(linked)[:4] == ["reference", "query", "asset", "err"]
    assert linked["asset"] == "100441" and linked["explain"]["assetId"] == "100441"
    evidence = linked["explain"]["evidence"]
    assert set(evidence) == {"number", "street", "type", "locality", "postcode", "unit", "state"}
    assert evidence["number"] > 0 and evidence["street"] > 0 and evidence["locality"] > 0
    assert linked["explain"]["probability"] >= 0.8
    # A tie is explained too: its best candidate is below the link threshold.
    assert tied["asset"] is None and tied["explain"]["probability"] < 0.5
    assert "about equally likely" in tied["err"]
    code, out, _ = _run(
        "lookup", "78 WADR COURT BALLARAT CENTRAL", "--assets", str(PARCELS), "--mode", "fuzzy",
        "--explain",
    )  # fmt: skip
    assert code == 0
    assert "best candidate 100441: probability 0.9" in out
    assert "evidence in bits: number +5.4" in out


FOUND = "55 SMITH ROAD BUNINYONG 3357"
NOT_FOUND = "ZZZ QQQ NOWHERE"


def test_the_exit_status_says_whether_every_some_or_no_query_found_an_asset() -> None:
    assets = ("--assets", str(PARCELS))
    code, out, err = _run("lookup", FOUND, *assets)
    assert code == 0, err
    assert out.startswith(f"1\t{FOUND}\t102559 {FOUND} (accuracy 100")
    code, out, err = _run("lookup", FOUND, NOT_FOUND, *assets)
    assert code == 3, err
    assert "2 queries: 1 matched (soundex 1), 0 ambiguous, 1 unmatched" in err
    assert out.splitlines()[1].startswith(f"2\t{NOT_FOUND}\t-\tno asset name sounds like this")
    code, out, err = _run("--json", "lookup", NOT_FOUND, *assets)
    assert code == 4, err
    assert json.loads(out)["1"]["asset"] is None  # the answer is still printed whole
    # A tie gives no asset: it counts as not found (with one that is found: some).
    code, _, err = _run("lookup", FOUND, "55 SMITH RD", *assets)
    assert code == 3 and "1 ambiguous" in err
    code, _, err = _run("lookup", "x", "--assets", str(SAMPLE / "missing.zip"))
    assert code == 2  # a usage error stays 2


def test_the_exit_statuses_are_in_the_help() -> None:
    code, out, _ = _run("lookup", "--help")
    assert code == 0
    assert "0  every query found an asset" in out
    assert "3  some queries found none: unmatched, or ambiguous" in out
    assert "4  no query found an asset" in out


def test_candidates_are_listed_in_the_text_output_too() -> None:
    code, out, err = _run("lookup", "55 SMITH RD", "--assets", str(PARCELS), "--candidates", "3")
    assert code == 4, err
    lines = out.splitlines()
    assert lines[0].startswith("1\t55 SMITH RD\t-\t") and "2 assets tied" in lines[0]
    # The two that tied, and no third: no other asset sounds like it.
    assert [line.strip() for line in lines[1:]] == [
        "candidate 1: 101552 55 SMITH ROAD LAKE GARDENS 3355 (soundex, score 100.0)",
        "candidate 2: 102559 55 SMITH ROAD BUNINYONG 3357 (soundex, score 100.0)",
    ]
    # Without --candidates, one line per query.
    code, out, _ = _run("lookup", "55 SMITH RD", "--assets", str(PARCELS))
    assert code == 4 and len(out.splitlines()) == 1


def test_a_lookup_on_a_server_exits_with_the_same_statuses(tmp_path: Path) -> None:
    from serving import running

    from toolkit.importing.pipeline import ImportRequest
    from toolkit.server.app import create_app
    from toolkit.server.state import ServerSettings
    from toolkit.site import LocalSite

    path = tmp_path / "server.sqlite"
    with LocalSite(path, "staging") as site:
        assert site.run_import(ImportRequest("asset", "property-assets", PARCELS))["status"] == (
            "COMPLETE"
        )
        site.add_user("looker", positions=["API User"], approved=True, terms_accepted=True)
        key = site.issue_api_key("looker")["key"]
    settings = ServerSettings(rate_limit=None, auth_rate_limit=None)
    with running(create_app(path, settings=settings)) as url:
        runner = CliRunner(env={"TOOLKIT_API_KEY": key})
        remote = ("--url", url, "--site", "staging", "lookup")
        statuses = [
            runner.invoke(cli, [*remote, *queries]).exit_code
            for queries in ([FOUND], [FOUND, NOT_FOUND], [NOT_FOUND])
        ]
        assert statuses == [0, 3, 4]
        refused = runner.invoke(cli, [*remote, FOUND, "--candidates", "2"])
        assert refused.exit_code == 2
        assert "--candidates work offline" in refused.stderr
        # The server's message names the API's option; the command shows the CLI's.
        bad = runner.invoke(cli, [*remote, "123", "--mode", "code", "--code-field", "nope"])
        assert bad.exit_code == 1
        assert "HTTP 400: --code-field is 'nope'; this asset index has" in bad.stderr
        assert "codeField" not in bad.stderr

        # A long list goes in batches, each numbered on from the last; progress moves a
        # batch at a time, counting queries.
        from toolkit.remote.client import Credentials, Profile
        from toolkit.remote.site import LOOKUP_BATCH, RemoteSite

        shown: list[tuple[str, int, int | None]] = []

        def record(stage: str, done: int, total: int | None, **_: object) -> None:
            shown.append((stage, done, total))

        queries = [{"str": FOUND if i % 2 else NOT_FOUND} for i in range(2 * LOOKUP_BATCH + 7)]
        with RemoteSite(Profile(url, "staging", Credentials(api_key=key))) as remote_site:
            document = remote_site.asset_lookup(queries, {"mode": "soundex"}, progress=record)
        n = len(queries)
        assert list(document) == [str(i) for i in range(1, n + 1)]
        assert [bool(document[str(i + 1)]["asset"]) for i in range(n)] == [
            i % 2 == 1 for i in range(n)
        ]
        assert shown == [
            ("lookup", 0, n),
            ("lookup", LOOKUP_BATCH, n),
            ("lookup", 2 * LOOKUP_BATCH, n),
            ("lookup", n, n),
        ]
