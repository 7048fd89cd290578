"""The import, import-status, rules and record commands, run as a user runs them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli import cli

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "site.sqlite"), "--rules", str(RULES), *args]
    )
    return result.exit_code, result.stdout, result.stderr


def _facilities(tmp_path: Path) -> Path:
    path = tmp_path / "facilities.csv"
    path.write_text("Code,Name,Capacity\nF1,Hall,200\nF2,Pool,lots\n", encoding="utf-8")
    return path


def test_import_prints_a_summary_and_writes_rejects(tmp_path: Path) -> None:
    rejects = tmp_path / "rejects.csv"
    code, out, err = _run(
        tmp_path,
        "import",
        str(_facilities(tmp_path)),
        "--type",
        "asset",
        "--rule",
        "test-facilities",
        "--rejects",
        str(rejects),
    )
    assert code == 0, err
    assert "Import job 1: COMPLETE" in out
    assert "read 2, inserted 1, updated 0, unchanged 0, skipped 0, retired 0, rejected 1" in out
    assert "row 2 Capacity 'lots': is not a whole number" in out
    assert f"Rejected rows written to {rejects}" in err
    assert rejects.read_text().splitlines()[1] == "2,F2,Pool,lots,Capacity: is not a whole number"


def test_import_json_is_the_job_object_and_a_failed_job_exits_1(tmp_path: Path) -> None:
    code, out, err = _run(
        tmp_path,
        "--json",
        "import",
        str(_facilities(tmp_path)),
        "--type",
        "asset",
        "--rule",
        "test-facilities",
        "--rollback-on-error",
    )
    job = json.loads(out)
    assert code == 1
    assert (job["status"], job["code"], job["id"]) == ("FAILED", 400, 1)
    # stdout stays one JSON document; the reason goes to stderr.
    assert err == (
        "Error: import job 1 FAILED: 1 row(s) rejected and --rollback-on-error is set; "
        "nothing was written\n"
    )
    assert set(job) >= {"code", "id", "status", "dateCreated", "dateCompleted", "userId", "result"}
    code, out, _ = _run(tmp_path, "import-status", "1", "--json")
    assert code == 0
    assert json.loads(out)["status"] == "FAILED"
    code, out, _ = _run(tmp_path, "import-status", "--json")
    assert [j["id"] for j in json.loads(out)] == [1]


def test_a_bad_request_is_an_error_message_not_a_job(tmp_path: Path) -> None:
    source = tmp_path / "obs.csv"
    source.write_text("Reference\nR1\n")
    code, _, err = _run(
        tmp_path, "import", str(source), "--type", "item", "--rule", "test-observations"
    )
    assert code == 1
    assert "Error: --event-id and --region-id required" in err
    code, _, err = _run(tmp_path, "import", str(source), "--type", "item", "--rule", "nope")
    assert code == 1
    assert "Error: --rule 'nope' is not one of:" in err


def test_rules_list_and_show(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, "rules", "list", "--json")
    names = {rule["name"] for rule in json.loads(out)}
    assert code == 0
    assert {"damage-assessments", "property-assets", "test-facilities"} <= names
    code, out, _ = _run(tmp_path, "rules", "show", "damage-assessments")
    assert code == 0
    assert "Damage Level" in out
    assert "code in 'Property Number' on propnum" in out


def test_events_items_assets_and_audit_from_the_command_line(tmp_path: Path) -> None:
    code, out, _ = _run(tmp_path, "--json", "event", "create", "Flood", "--tag", "flood")
    assert code == 0
    event = json.loads(out)
    source = tmp_path / "obs.csv"
    source.write_text("Reference,Level\nR1,High\nR2,Low\n")
    code, _, err = _run(
        tmp_path,
        "import",
        str(source),
        "--type",
        "item",
        "--rule",
        "test-observations",
        "--event-id",
        str(event["id"]),
        "--region-id",
        "1",
    )
    assert code == 0, err
    code, out, _ = _run(
        tmp_path, "item", "list", "--register", "observation", "--cql", "level:high", "--json"
    )
    page = json.loads(out)
    assert (page["count"], page["total"]) == (1, "1")
    assert next(iter(page["models"].values()))["reference"] == "R1"
    code, out, _ = _run(tmp_path, "event", "update", str(event["id"]), "--status", "0", "--json")
    assert json.loads(out)["active"] is False
    code, out, _ = _run(tmp_path, "audit-log", "list", "--event-id", str(event["id"]), "--json")
    assert json.loads(out)["total"] == "4"
    # Every list takes the time bounds and every order the CLI offers.
    for command in (["audit-log", "list"], ["event", "list"], ["asset", "list"]):
        code, out, err = _run(tmp_path, *command, "--order", "dateModified", "--json")
        assert code == 0, err
        code, out, err = _run(tmp_path, *command, "--since", "2999-01-01", "--json")
        assert (code, json.loads(out)["total"]) == (0, "0"), err
    code, out, err = _run(tmp_path, "item", "list", "--register", "observation", "--limit", "2000")
    assert code == 1
    assert "limit 2000 is over the maximum of 1000" in err


def test_the_real_entry_point_exits_1_on_a_failed_job(tmp_path: Path) -> None:
    process = subprocess.run(
        [
            sys.executable,
            "-m",
            "toolkit",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--rules",
            str(RULES),
            "import",
            str(_facilities(tmp_path)),
            "--type",
            "asset",
            "--rule",
            "test-facilities",
            "--rollback-on-error",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert process.returncode == 1
    assert "Import job 1: FAILED" in process.stdout
    # The reason on stderr too, for batch logs that keep only stderr.
    assert process.stderr == (
        "Error: import job 1 FAILED: 1 row(s) rejected and --rollback-on-error is set; "
        "nothing was written\n"
    )


def test_a_20_mb_value_leaves_its_row_out_and_the_import_goes_on(tmp_path: Path) -> None:
    source = tmp_path / "poles.csv"
    source.write_text(
        "code,name,wkt\nP1,one,POINT (143.85 -37.56)\nP2,"
        + "x" * (20 * 1024 * 1024)
        + ",POINT (143.86 -37.57)\nP3,three,POINT (143.87 -37.58)\n",
        encoding="utf-8",
    )
    code, out, err = _run(
        tmp_path, "import", str(source), "--type", "asset", "--rule", "assets-csv"
    )
    assert code == 0, out + err
    assert "Import job 1: COMPLETE" in out
    assert "inserted 2" in out and "rejected 1" in out
    assert "row 2 name 'xxxxxxxxxx" in out
    assert "the value is longer than 8388608 bytes; row left out" in out
    assert "internal error" not in out + err


def test_a_garbled_prj_is_named_and_import_status_shows_the_failed_job(tmp_path: Path) -> None:
    import zipfile

    sample = Path(__file__).resolve().parent.parent / "sample_data" / "parcels.zip"
    garbled = tmp_path / "parcels.zip"
    with zipfile.ZipFile(sample) as original, zipfile.ZipFile(garbled, "w") as copy:
        for name in original.namelist():
            data = b"GEOGCS[garbage" if name.endswith(".prj") else original.read(name)
            copy.writestr(name, data)
    code, out, err = _run(
        tmp_path, "import", str(garbled), "--type", "asset", "--rule", "property-assets"
    )
    assert code == 1
    assert "Import job 1: FAILED" in out
    assert "rule property-assets (asset), overwrite rule updateAndInsert" in out
    assert f"reason: {garbled}: the .prj could not be understood: parcels.prj: " in out
    assert err.startswith(
        f"Error: import job 1 FAILED: {garbled}: the .prj could not be understood: parcels.prj: "
    )
    assert "no .prj" not in out
