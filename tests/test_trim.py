"""Stored text is trimmed at the rule stage, so CQL finds what a person would type; a rule
keeps a text field's spaces with ``trim=False``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.errors import OptionError
from toolkit.importing.rules import FieldRule

# A person rule as a user writes one: the code keeps its padding (fixed-width codes).
RULE = """
from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="people",
    import_type="item",
    description="people, as record-linkage data gives them",
    register="person",
    fields=(
        FieldRule("recId", "rec_id", required=True),
        FieldRule("givenName", "given_name"),
        FieldRule("surname", "surname"),
        FieldRule("age", "age", type="integer"),
        FieldRule("state", "state", type="lookup", choices=("vic", "nsw")),
        FieldRule("code", "code", trim=False),
    ),
    matching_id="recId",
)
"""
# Spaces around values, as FEBRL-style extracts have them (this file is made up here).
PEOPLE = (
    "rec_id,given_name,surname,age,state,code\n"
    "rec-1, joshua , waller, 32 , vic ,  A1 \n"
    "rec-2,emily,waller ,41,nsw,B2\n"
    " rec-3 ,  ,  ,,, \n"
)


def _run(store: Path, rules: Path, *args: str) -> Any:
    return CliRunner().invoke(cli, ["--store", str(store), "--rules", str(rules), *args])


@pytest.fixture
def site(tmp_path: Path) -> tuple[Path, Path]:
    rules = tmp_path / "people.py"
    rules.write_text(RULE, encoding="utf-8")
    people = tmp_path / "people.csv"
    people.write_text(PEOPLE, encoding="utf-8")
    store = tmp_path / "site.sqlite"
    assert _run(store, rules, "event", "create", "Census").exit_code == 0
    result = _run(
        store,
        rules,
        *("--json", "import", str(people), "--type", "item", "--rule", "people"),
        *("--event-id", "1", "--region-id", "1"),
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["summary"]["counts"]["inserted"] == 3
    return store, rules


def _items(store: Path, rules: Path, cql: str) -> list[dict[str, Any]]:
    result = _run(store, rules, "--json", "item", "list", "--register", "person", "--cql", cql)
    assert result.exit_code == 0, result.output
    return list(json.loads(result.stdout)["models"].values())


def test_cql_finds_values_that_came_with_spaces(site: tuple[Path, Path]) -> None:
    store, rules = site
    found = _items(store, rules, "surname:waller")
    assert [(p["recId"], p["givenName"], p["surname"]) for p in found] == [
        ("rec-1", "joshua", "waller"),
        ("rec-2", "emily", "waller"),
    ]
    assert [p["recId"] for p in _items(store, rules, "givenName:joshua")] == ["rec-1"]
    # A cell of spaces only is empty, as before.
    (third,) = _items(store, rules, "recId:rec-3")
    assert (third["givenName"], third["surname"], third["age"]) == (None, None, None)


def test_a_field_that_opts_out_keeps_its_spaces(site: tuple[Path, Path]) -> None:
    store, rules = site
    codes = {p["recId"]: p["code"] for p in _items(store, rules, "is:active")}
    assert codes == {"rec-1": "  A1 ", "rec-2": "B2", "rec-3": None}
    shown = _run(store, rules, "rules", "show", "people").stdout
    assert "text, spaces kept" in shown
    described = json.loads(_run(store, rules, "--json", "rules", "show", "people").stdout)
    assert {f["name"]: f["trim"] for f in described["fields"]}["code"] is False


def test_a_rerun_of_the_trimmed_file_changes_nothing(site: tuple[Path, Path]) -> None:
    store, rules = site
    people = store.parent / "people.csv"
    result = _run(
        store,
        rules,
        *("--json", "import", str(people), "--type", "item", "--rule", "people"),
        *("--event-id", "1", "--region-id", "1"),
    )
    assert json.loads(result.stdout)["summary"]["counts"]["unchanged"] == 3


def test_other_columns_kept_by_a_rule_are_trimmed_too(tmp_path: Path) -> None:
    assets = tmp_path / "assets.csv"
    assets.write_text("code,name,asset_no\n C1 , Hall ,  A76710 \n", encoding="utf-8")
    store = tmp_path / "site.sqlite"
    result = CliRunner().invoke(
        cli,
        ["--store", str(store), "import", str(assets), "--type", "asset", "--rule", "assets-csv"],
    )
    assert result.exit_code == 0, result.output
    got = CliRunner().invoke(cli, ["--store", str(store), "--json", "asset", "get", "1"])
    asset = json.loads(got.stdout)
    assert (asset["code"], asset["name"]) == ("C1", "Hall")
    assert asset["extraInfo"] == [{"key": "asset_no", "value": "A76710"}]


def test_trim_off_is_for_text_fields_only() -> None:
    with pytest.raises(OptionError, match="field 'age': trim=False keeps the spaces of a text"):
        FieldRule("age", "Age", type="integer", trim=False)
