"""Errors in the command line's words: the option a user typed (``--type``), never the
API field behind it (``importType``); ``--matching-id`` takes a heading or a field."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.cli.words import in_cli_words, option_words

RULES = Path(__file__).resolve().parent / "fixtures_rules"
SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
API_FIELDS = ("importType", "importRule", "matchingId", "eventId", "regionId", "overwriteRule")


def _run(tmp_path: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "site.sqlite"), "--rules", str(RULES), *args]
    )
    return result.exit_code, result.stdout, result.stderr


def _facilities(tmp_path: Path, name: str = "Hall") -> Path:
    path = tmp_path / "facilities.csv"
    path.write_text(f"Code,Name,Capacity\nF1,{name},200\nF2,Pool,50\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--type", "asset", "--rule", "damage-assessments"],
            "Error: --rule 'damage-assessments' imports items, not assets; pass --type item\n",
        ),
        (
            ["--type", "item", "--rule", "damage-assessments", "--event-id", "9"],
            "Error: --region-id required: items are stored within events (pass --event-id "
            "and --region-id)\n",
        ),
        (
            [
                "--type",
                "item",
                "--rule",
                "damage-assessments",
                "--event-id",
                "9",
                "--region-id",
                "1",
            ],
            "Error: --event-id 9 is not an event of this site\n",
        ),
        (
            ["--type", "asset", "--rule", "test-facilities", "--matching-id", "Nope"],
            "Error: --matching-id 'Nope' is neither a field of rule 'test-facilities' "
            "(capacity, code, id, manager, name, type) nor a heading of one (Code, Name, "
            "Type, Capacity, Manager)\n",
        ),
    ],
    ids=["type", "region", "event", "matching"],
)
def test_import_errors_name_the_options(tmp_path: Path, args: list[str], expected: str) -> None:
    code, out, err = _run(tmp_path, "import", str(_facilities(tmp_path)), *args)
    assert (code, out) == (1, "")
    assert err == expected
    assert not any(field in err for field in API_FIELDS)


def test_matching_id_takes_the_files_heading_as_well_as_the_field(tmp_path: Path) -> None:
    base = ("import", "--type", "asset", "--rule", "test-facilities")
    code, _, err = _run(tmp_path, base[0], str(_facilities(tmp_path)), *base[1:])
    assert code == 0, err
    for turn, matching in enumerate(("Code", " CODE ", "code")):
        renamed = _facilities(tmp_path, name=f"Hall {turn}")
        code, out, err = _run(
            tmp_path, "--json", base[0], str(renamed), *base[1:], "--matching-id", matching
        )
        assert code == 0, err
        summary = json.loads(out)["summary"]
        assert summary["matchingId"] == "code"  # the heading names the field
        assert (summary["counts"]["updated"], summary["counts"]["inserted"]) == (1, 0)
    code, out, _ = _run(tmp_path, "--json", "asset", "list", "--all")
    names = sorted(a["name"] for a in json.loads(out)["models"].values())
    assert names == ["Hall 2", "Pool"]


def test_a_failed_jobs_reason_and_notes_use_the_options_too(tmp_path: Path) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("Code,Name,Capacity\nF1,Hall,lots\n", encoding="utf-8")
    code, out, err = _run(
        tmp_path, "import", str(bad), "--type", "asset", "--rule", "test-facilities",
        "--rollback-on-error",
    )  # fmt: skip
    assert code == 1
    assert "reason: 1 row(s) rejected and --rollback-on-error is set" in out
    assert "note: --rollback-on-error: a row was rejected, so nothing was written" in out
    assert err == (
        "Error: import job 1 FAILED: 1 row(s) rejected and --rollback-on-error is set; "
        "nothing was written\n"
    )
    # --json keeps the API's words: it is the job object of the spec.
    code, out, _ = _run(tmp_path, "--json", "import-status", "1")
    assert "rollbackOnError is set" in json.loads(out)["summary"]["reason"]


def test_the_lookup_options_are_named_as_typed(tmp_path: Path) -> None:
    code, _, err = _run(
        tmp_path, "lookup", "123", "--mode", "code", "--code-field", "nope",
        "--assets", str(SAMPLE / "parcels.zip"),
    )  # fmt: skip
    assert code == 1
    assert err.startswith("Error: --code-field is 'nope'; this asset index has the code fields:")


def test_the_mapping_is_read_off_each_command() -> None:
    import_command = cli.commands["import"]
    words = option_words(import_command)
    assert {k: words[k] for k in API_FIELDS} == {
        "importType": "--type",
        "importRule": "--rule",
        "matchingId": "--matching-id",
        "eventId": "--event-id",
        "regionId": "--region-id",
        "overwriteRule": "--overwrite-rule",
    }
    assert words["maxRejects"] == "--max-rejects" and words["importTag"] == "--tag"
    ctx = click.Context(import_command)
    # Plain words and the fields a message lists are left alone.
    assert in_cli_words("the message names importType item", ctx) == (
        "the message names --type item"
    )
    assert in_cli_words("its fields: id, eventId, regionId", ctx) == (
        "its fields: id, eventId, regionId"
    )
    assert in_cli_words("eventId 3", click.Context(cli.commands["ping"])) == "eventId 3"
