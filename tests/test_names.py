"""One home for allowed values: the CLI's choices, the server's checks and the OpenAPI
document all read their sets from ``toolkit.names``; here they must agree."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, get_args

import click

from toolkit import names
from toolkit.cli import cli
from toolkit.importing import overwrite, request, rules
from toolkit.matching import options
from toolkit.query import filters
from toolkit.reports import runner
from toolkit.server import openapi_document
from toolkit.site import local

# Each command-line option with a fixed set of values: its Literal and its name in the
# OpenAPI document.
OPTIONS: dict[str, tuple[Any, str]] = {
    "--mode": (names.LookupMode, "mode"),
    "--fallback-mode": (names.LookupMode, "fallbackMode"),
    "--output": (names.LookupOutput, "output"),
    "--type": (names.ImportType, "importType"),
    "--overwrite-rule": (names.OverwriteRule, "overwriteRule"),
    "--fulltext-operator": (names.FulltextOperator, "fulltext_operator"),
    "--order": (names.Order, "order"),
    "--direction": (names.Direction, "direction"),
    "--since-operator": (names.Operator, "since_operator"),
    "--until-operator": (names.Operator, "until_operator"),
    "--format": (names.DataType, "dataType"),
}
# Options whose values differ by command: a report's format is not a file's.
BY_COMMAND: dict[tuple[str, str], tuple[Any, str]] = {
    ("report fetch", "--format"): (names.ReportFormat, "format"),
}


def _choices(command: click.Command, path: str = "") -> Iterator[tuple[str, str, list[str]]]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _choices(sub, f"{path} {name}".strip())
        return
    for param in command.params:
        if isinstance(param.type, click.Choice):
            yield path, param.opts[0], list(param.type.choices)


def _enums(node: Any) -> Iterator[tuple[str, list[Any]]]:
    """Every (name, enum) of the document: named parameters and schema properties."""
    if isinstance(node, dict):
        if "name" in node and isinstance(node.get("schema"), dict) and "enum" in node["schema"]:
            yield node["name"], node["schema"]["enum"]
        for key, value in (node.get("properties") or {}).items():
            if isinstance(value, dict) and "enum" in value:
                yield key, value["enum"]
        for value in node.values():
            yield from _enums(value)
    elif isinstance(node, list):
        for value in node:
            yield from _enums(value)


def test_every_cli_choice_is_a_literal_of_names() -> None:
    seen = set()
    for command, option, choices in _choices(cli):
        assert option in OPTIONS, f"{command} {option} has choices but no home in names"
        literal = BY_COMMAND.get((command, option), OPTIONS[option])[0]
        assert choices == list(get_args(literal)), f"{command} {option}"
        seen.add(option)
    assert seen == set(OPTIONS)


def test_the_openapi_document_offers_the_same_values() -> None:
    found: dict[str, list[list[Any]]] = {}
    for name, enum in _enums(openapi_document()):
        found.setdefault(name, []).append(enum)
    for option, (literal, api_name) in [*OPTIONS.items(), *BY_COMMAND.items()]:
        assert api_name in found, f"{api_name} ({option}) is not in the document"
        allowed = list(get_args(literal))
        for enum in found[api_name]:
            # A name may mean different things in two places (``format`` of a report and of
            # an import's data); only the places that mean this set must agree exactly.
            if set(enum) & set(allowed):
                assert sorted(enum) == sorted(allowed), f"{api_name}: {enum} != {allowed}"


def test_the_server_checks_against_the_same_sets() -> None:
    assert rules.IMPORT_TYPES is names.IMPORT_TYPES
    assert overwrite.OVERWRITE_RULES is names.OVERWRITE_RULES
    assert options.MODES is names.LOOKUP_MODES and options.OUTPUTS is names.LOOKUP_OUTPUTS
    assert filters.OPERATORS is names.OPERATORS
    assert filters.ORDER_COLUMNS is names.ORDER_COLUMNS
    assert filters.DIRECTIONS is names.DIRECTIONS
    assert runner.FORMATS is names.REPORT_FORMATS
    assert request.DATA_TYPES is names.DATA_TYPES
    assert request.DATA_ENCODINGS is names.DATA_ENCODINGS
    assert local.FULLTEXT_OPERATORS is names.FULLTEXT_OPERATORS


def test_the_document_names_the_same_states_and_encodings() -> None:
    """Values the command line never offers as choices, pinned to the document by schema."""
    schemas = openapi_document()["components"]["schemas"]
    for schema, field, literal in (
        ("ImportJob", "status", names.JobStatus),
        ("ReportInstance", "status", names.ReportStatus),
        ("ImportSchedule", "encoding", names.DataEncoding),
    ):
        assert schemas[schema]["properties"][field]["enum"] == list(get_args(literal)), schema
