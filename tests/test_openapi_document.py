"""The OpenAPI document and the server's own constants agree (no server needed).

Schemathesis (``test_server_fuzz.py``) checks answers against the document; these
check the document against the code that decides: every parameter a collection
honours is documented, no other, and every closed set the server checks (orders,
operators, modes, formats, limits) is the document's enum.
"""

from __future__ import annotations

from typing import Any, get_args

import pytest

from toolkit.importing.overwrite import OVERWRITE_RULES
from toolkit.importing.request import DATA_ENCODINGS
from toolkit.importing.rules import ImportType
from toolkit.matching.options import MAX_RANKS, MODES, OUTPUTS, LookupOptions, _wire_name
from toolkit.query.filters import COMMON_PARAMETERS, DIRECTIONS, MAX_LIMIT, OPERATORS, ORDER_COLUMNS
from toolkit.reports.runner import Format
from toolkit.server import openapi_document
from toolkit.server.routes_records import WRITE_PARAMETERS
from toolkit.server.routes_rpc import IMPORT_MODES, REPORT_MODES
from toolkit.site import local as site
from toolkit.site.writes import MAX_MESSAGE_CHARS

DOC = openapi_document()
SCHEMAS = DOC["components"]["schemas"]

COLLECTIONS = {
    "/api/json/item": (site.ITEM_FILTERS, site.ITEM_ALIASES),
    "/api/json/asset": (site.ASSET_FILTERS, site.ASSET_ALIASES),
    "/api/json/event": (site.EVENT_FILTERS, {}),
    "/api/json/audit-log": (site.AUDIT_FILTERS, {}),
}


def _query_parameters(path: str, method: str = "get") -> dict[str, dict[str, Any]]:
    return {
        p["name"]: p["schema"]
        for p in DOC["paths"][path][method]["parameters"]
        if p["in"] == "query"
    }


@pytest.mark.parametrize("path", sorted(COLLECTIONS))
def test_a_collection_documents_exactly_the_parameters_it_honours(path: str) -> None:
    filters, aliases = COLLECTIONS[path]
    assert set(_query_parameters(path)) == {*filters, *aliases, *COMMON_PARAMETERS}


@pytest.mark.parametrize("path", sorted(COLLECTIONS))
def test_paging_and_ordering_enums_are_the_servers(path: str) -> None:
    params = _query_parameters(path)
    assert params["order"]["enum"] == list(ORDER_COLUMNS)
    assert params["direction"]["enum"] == list(DIRECTIONS)
    assert params["since_operator"]["enum"] == list(OPERATORS)
    assert params["until_operator"]["enum"] == list(OPERATORS)
    assert (params["limit"]["minimum"], params["limit"]["maximum"]) == (0, MAX_LIMIT)
    assert params["offset"]["minimum"] == 0


WRITES = [
    ("/api/json/item", "post"),
    ("/api/json/item/id/{id}", "put"),
    ("/api/json/item/id/{id}", "patch"),
    ("/api/json/event/id/{id}", "put"),
    ("/api/json/event/id/{id}", "patch"),
]


@pytest.mark.parametrize(("path", "method"), WRITES)
def test_item_and_event_writes_document_their_audit_message(path: str, method: str) -> None:
    params = _query_parameters(path, method)
    assert set(params) == set(WRITE_PARAMETERS)
    assert params["message"] == {"type": "string", "maxLength": MAX_MESSAGE_CHARS}


def test_typed_filters_are_typed_in_the_document() -> None:
    kinds = {"int": "integer", "float": "number", "bool": "boolean", "text": "string"}
    for path, (filters, _aliases) in COLLECTIONS.items():
        params = _query_parameters(path)
        for name, kind in filters.items():
            expected = "string" if kind == "time" else kinds[kind]
            assert params[name]["type"] == expected, (path, name)


def test_event_fulltext_operators_are_the_servers() -> None:
    params = _query_parameters("/api/json/event")
    assert params["fulltext_operator"]["enum"] == list(site.FULLTEXT_OPERATORS)


def test_lookup_options_are_the_servers() -> None:
    options = SCHEMAS["LookupOptions"]["properties"]
    wire = {_wire_name(f) for f in LookupOptions.__dataclass_fields__}
    assert set(options) == wire
    assert options["mode"]["enum"] == list(MODES)
    assert options["fallbackMode"]["enum"] == list(MODES)
    assert options["maxRank"]["enum"] == list(MAX_RANKS)
    params = _query_parameters("/api/json/asset-lookup")
    assert set(params) == wire | {"query", "output"}
    assert params["output"]["enum"] == list(OUTPUTS)
    assert SCHEMAS["LookupRequest"]["properties"]["output"]["enum"] == list(OUTPUTS)


def test_rpc_modes_have_one_request_schema_each() -> None:
    for name, modes in (("ImportRequest", IMPORT_MODES), ("ReportRequest", REPORT_MODES)):
        mapping = SCHEMAS[name]["discriminator"]["mapping"]
        assert list(mapping) == list(modes)
        for mode, ref in mapping.items():
            schema = SCHEMAS[ref.rsplit("/", 1)[1]]
            assert schema["properties"]["mode"]["const"] == mode
            assert schema["additionalProperties"] is False


def test_import_and_report_enums_are_the_servers() -> None:
    schedule = SCHEMAS["ImportSchedule"]["properties"]
    assert set(schedule["importType"]["enum"]) == set(get_args(ImportType))
    assert schedule["overwriteRule"]["enum"] == list(OVERWRITE_RULES)
    assert schedule["encoding"]["enum"] == list(DATA_ENCODINGS)
    fetch = SCHEMAS["ReportFetchRequest"]["properties"]
    assert set(fetch["format"]["enum"]) == set(get_args(Format))


def test_a_run_answer_and_an_instance_are_told_apart() -> None:
    """Status and fetch answers must match only ReportInstance, a run answer only ReportRun."""
    import jsonschema

    def matches(name: str, value: dict[str, Any]) -> bool:
        schema = {**SCHEMAS[name], "components": DOC["components"]}
        return jsonschema.Draft202012Validator(schema).is_valid(value)

    run = {"code": 200, "result": "report 1 scheduled", "id": "7"}
    instance = {
        **run,
        "status": "COMPLETED",
        "dateRun": None,
        "dateCompleted": None,
        "userId": "duty",
        "timeTaken": "0.1",
        "rowCount": "3",
        "params": {},
        "contents": "YQ==",
        "format": "csv",
    }
    assert matches("ReportRun", run) and not matches("ReportInstance", run)
    assert matches("ReportInstance", instance) and not matches("ReportRun", instance)
