"""The RPC-style commands (spec 4.1 to 4.5): ping, auth, asset-lookup, import, report."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from starlette.routing import Route

from toolkit.errors import OptionError
from toolkit.query.filters import format_time, parse_int
from toolkit.server.calls import Call, client_of, endpoint
from toolkit.server.errors import ApiError, RateLimited

LOOKUP_FIELDS = ("options", "query", "output")
REPORT_MODES = ("run", "status", "fetch")
IMPORT_MODES = ("schedule", "status")
UNFINISHED_RETRY_S = 10.0  # a guess: runs take seconds to minutes; the client asks again


def ping(call: Call) -> dict[str, Any]:
    """Connectivity: ``{status, timestamp, auth}``; ``auth`` names the user of a valid token."""
    return {
        "status": 200,
        "timestamp": format_time(call.state.settings.clock()),
        "auth": None,
    }


def auth(call: Call) -> Any:
    """Spec 5: a token for a user (username, password, mfaCode) or a machine (apiKey)."""
    body = _body_object(call)
    call.state.auth_limiter.check("auth:" + client_of(call.request))
    # Failed logins lock the account name as given, known or not, from every address alike.
    username = body.get("username")
    account = f"{call.site_name}\0{username}" if isinstance(username, str) else None
    with call.state.logins.attempt(account):
        user = call.local.authenticate(body, now_s=call.state.clock_s())
    secret = call.state.tokens.secret(call.local.name)
    token = call.state.tokens.issue(secret, call.local.name, user)
    return {"status": 200, "token": token, "type": "accessToken"}


def asset_lookup_get(call: Call) -> Any:
    """One query (4.3): ``query``, ``output`` and any option as GET parameters."""
    params = call.params
    query = params.pop("query", None)
    if query is None:
        raise OptionError("query is required: the text to look up")
    output = params.pop("output", "asset")
    return call.local.asset_lookup(query, params, output)


def asset_lookup_post(call: Call) -> Any:
    """Many queries (4.3): ``{options, query: [{code, str}], output}``."""
    body = _body_object(call)
    unknown = sorted(set(body) - set(LOOKUP_FIELDS))
    if unknown:
        raise OptionError(
            f"unknown asset-lookup field(s) {', '.join(unknown)}; known: {', '.join(LOOKUP_FIELDS)}"
        )
    queries = body.get("query")
    if not isinstance(queries, list):
        raise OptionError("query must be an array of {code, str} objects")
    options = body.get("options") or {}
    if not isinstance(options, Mapping):
        raise OptionError("options must be an object")
    # ``output`` in the body, or as a GET parameter as in the single-query form.
    output = body.get("output") or call.params.get("output") or "asset"
    return call.local.asset_lookup(queries, dict(options), str(output))


def import_command(call: Call) -> Any:
    """4.4: ``mode=schedule`` queues a job (it runs in the background); ``mode=status``."""
    body = _body_object(call)
    mode = body.get("mode")
    if mode == "schedule":
        if body.get("importType") == "item":
            call.require_duty(body.get("eventId"))
        return call.local.import_schedule(body)
    if mode == "status":
        unknown = sorted(set(body) - {"mode", "id"})
        if unknown:
            raise OptionError(f"unknown field(s) {', '.join(unknown)} for mode status; known: id")
        job_id = body.get("id")
        if job_id is None:
            return call.local.import_status(None, visibility=call.visibility())
        return call.local.import_status(
            parse_int("id", job_id, minimum=0), visibility=call.visibility()
        )
    raise OptionError(f"mode {mode!r} is not one of: {', '.join(IMPORT_MODES)}")


def report_command(call: Call) -> Any:
    """4.5: ``run`` queues a report instance (it runs in the background), ``status``, ``fetch``.

    Each acts for the user's visibility: runs are refused when their parameters name an
    event off duty and hold only rows of events on duty; instances are the user's own.
    """
    body = _body_object(call)
    mode = body.get("mode")
    site = call.local
    if not hasattr(site, "report_run"):
        raise ApiError(501, "reports are not available in this build of the toolkit")
    if mode == "run":
        _check_unfinished(call)
        return site.report_run(
            {k: v for k, v in body.items() if k != "mode"}, visibility=call.visibility()
        )
    if mode == "status":
        if "id" not in body:
            raise OptionError("id is required: the report instance id")
        return site.report_status(body["id"], visibility=call.visibility())
    if mode == "fetch":
        # $schema points at this server: the configured URL, else the one the client used.
        base = call.state.settings.base_url or str(call.request.base_url)
        site.schema_base_url = base.rstrip("/")
        if "reportInstanceId" not in body:
            raise OptionError("reportInstanceId is required")
        return site.report_fetch(
            body["reportInstanceId"],
            str(body.get("format", "json")),
            visibility=call.visibility(),
        )
    raise OptionError(f"mode {mode!r} is not one of: {', '.join(REPORT_MODES)}")


def _check_unfinished(call: Call) -> None:
    """429 when the user has as many report runs not yet ended as the server allows
    (``--max-unfinished-reports``); counted in the site file, so over every process."""
    cap = call.state.settings.max_unfinished_reports
    if cap is None:
        return
    unfinished = call.local.unfinished_reports()
    if unfinished >= cap:
        raise RateLimited(
            UNFINISHED_RETRY_S,
            f"you have {unfinished} report runs not yet ended, as many as this server allows "
            f"at once ({cap}); retry after {{seconds}} s, or when one has ended",
        )


def _body_object(call: Call) -> dict[str, Any]:
    if not isinstance(call.body, dict):
        raise OptionError("the request body must be a JSON object")
    return call.body


ROUTES = [
    Route("/api/json/ping", endpoint(ping, authenticated=False, site=False), methods=["GET"]),
    Route("/api/json/auth", endpoint(auth, authenticated=False), methods=["POST"]),
    Route("/api/json/asset-lookup", endpoint(asset_lookup_get), methods=["GET"]),
    Route("/api/json/asset-lookup", endpoint(asset_lookup_post), methods=["POST"]),
    Route("/api/json/import", endpoint(import_command), methods=["POST"]),
    Route("/api/json/report", endpoint(report_command), methods=["POST"]),
]
