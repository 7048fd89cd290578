"""The REST commands (spec 4.6 to 4.9): items, assets, asset types, events, audit logs.

Paths where the spec is silent are DESIGN.md's. Register data (items, their
audit entries, event updates) needs the user on duty in the event (spec 5,
rule 5); assets and event searches do not. Writes take the audit log's text as
``?message=`` (our choice: the spec names ``message`` only for imports).
"""

from __future__ import annotations

from typing import Any

from starlette.routing import Route

from toolkit.errors import OptionError
from toolkit.query.filters import parse_int
from toolkit.server.calls import Call, endpoint
from toolkit.site.writes import checked_message

# The query parameters of item and event writes (POST, PUT, PATCH): text for the audit log.
WRITE_PARAMETERS = ("message",)


def list_items(call: Call) -> Any:
    params = call.params
    if "eventId" in params:
        call.require_duty(params["eventId"])
        return call.local.list_items(params)
    return call.local.list_items(params, within_events=call.duty())


def create_item(call: Call) -> Any:
    body = _object(call)
    message = _message(call)
    call.require_duty(body.get("eventId"))
    return call.local.create_item(body, message=message)


def get_item(call: Call) -> Any:
    item = call.local.get_item(call.path_int())
    call.require_duty(item["eventId"])
    return item


def _update_item(call: Call, *, replace: bool) -> Any:
    item_id = call.path_int()
    body = _object(call)
    message = _message(call)
    call.require_duty(call.local.get_item(item_id)["eventId"])
    if body.get("eventId") is not None:
        call.require_duty(body["eventId"])
    if replace:
        return call.local.replace_item(item_id, body, message=message)
    return call.local.patch_item(item_id, body, message=message)


def replace_item(call: Call) -> Any:
    return _update_item(call, replace=True)


def patch_item(call: Call) -> Any:
    return _update_item(call, replace=False)


def list_registers(call: Call) -> Any:
    return call.local.list_registers()


def list_assets(call: Call) -> Any:
    return call.local.list_assets(call.params)


def get_asset(call: Call) -> Any:
    return call.local.get_asset(call.path_int())


def asset_types(call: Call) -> Any:
    return call.local.asset_types()


def list_events(call: Call) -> Any:
    return call.local.list_events(call.params)


def get_event(call: Call) -> Any:
    return call.local.get_event(call.path_int())


def _update_event(call: Call, *, replace: bool) -> Any:
    event_id = call.path_int()
    message = _message(call)
    call.local.get_event(event_id)  # 404 before 403: another site's event is not found
    call.require_duty(event_id)
    return call.local.update_event(event_id, _object(call), replace=replace, message=message)


def replace_event(call: Call) -> Any:
    return _update_event(call, replace=True)


def patch_event(call: Call) -> Any:
    return _update_event(call, replace=False)


def list_audit_logs(call: Call) -> Any:
    params = call.params
    if "itemId" in params:
        item_id = parse_int("itemId", params["itemId"], minimum=0)
        call.require_duty(call.local.get_item(item_id)["eventId"])
        return call.local.list_audit_logs(params)
    if "eventId" in params:
        call.require_duty(params["eventId"])
        return call.local.list_audit_logs(params)
    return call.local.list_audit_logs(params, within_events=call.duty())


def get_audit_log(call: Call) -> Any:
    entry = call.local.get_audit_log(call.path_int())
    if entry["eventId"] is not None:
        call.require_duty(entry["eventId"])
    return entry


def _message(call: Call) -> str | None:
    """The audit message of a write, ``?message=`` (as an import's ``message`` field); a
    write takes no other parameter."""
    params = call.params
    unknown = sorted(set(params) - set(WRITE_PARAMETERS))
    if unknown:
        raise OptionError(
            f"unknown parameter(s) {', '.join(unknown)}; a write takes only "
            + ", ".join(WRITE_PARAMETERS)
        )
    return checked_message(params.get("message"))


def _object(call: Call) -> dict[str, Any]:
    if not isinstance(call.body, dict):
        raise OptionError("the request body must be a JSON object")
    return call.body


ROUTES = [
    Route("/api/json/item", endpoint(list_items), methods=["GET"]),
    Route("/api/json/item", endpoint(create_item), methods=["POST"]),
    Route("/api/json/item/id/{id}", endpoint(get_item), methods=["GET"]),
    Route("/api/json/item/id/{id}", endpoint(replace_item), methods=["PUT"]),
    Route("/api/json/item/id/{id}", endpoint(patch_item), methods=["PATCH"]),
    Route("/api/json/register", endpoint(list_registers), methods=["GET"]),
    Route("/api/json/asset", endpoint(list_assets), methods=["GET"]),
    Route("/api/json/asset/id/{id}", endpoint(get_asset), methods=["GET"]),
    Route("/api/json/asset-type", endpoint(asset_types), methods=["GET"]),
    Route("/api/json/event", endpoint(list_events), methods=["GET"]),
    Route("/api/json/event/id/{id}", endpoint(get_event), methods=["GET"]),
    Route("/api/json/event/id/{id}", endpoint(replace_event), methods=["PUT"]),
    Route("/api/json/event/id/{id}", endpoint(patch_event), methods=["PATCH"]),
    Route("/api/json/audit-log", endpoint(list_audit_logs), methods=["GET"]),
    Route("/api/json/audit-log/id/{id}", endpoint(get_audit_log), methods=["GET"]),
]
