"""RemoteSite: the one interface over HTTP, against any server of the service's API.

The methods and their JSON are those of :class:`toolkit.site.LocalSite`; requests
follow the spec's paths and, where it is silent, the choices in the README's API
notes. Operations the API does not offer (creating events, listing registers) say
so plainly.
"""

from __future__ import annotations

import mimetypes
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

from toolkit.errors import NotFoundError, OptionError, RemoteError
from toolkit.progress import Progress, no_progress
from toolkit.remote.client import ApiClient, Profile
from toolkit.site.protocol import DEFAULT_DELIVERY, Delivery
from toolkit.site.writes import check_media_size, checked_message

if TYPE_CHECKING:
    from toolkit.importing.request import ImportRequest
    from toolkit.remote.push import PushResult

LOOKUP_BATCH = 1000  # queries per request: well under the server's 10 MB body limit


def _message_params(message: str | None) -> dict[str, str] | None:
    message = checked_message(message)
    return None if message is None else {"message": message}


def _quoted(value: object) -> str:
    from urllib.parse import quote

    return quote(str(value), safe="")


class RemoteSite:
    """The spec's operations on one site of a server."""

    def __init__(
        self,
        profile: Profile,
        *,
        client: ApiClient | None = None,
        rule_paths: Iterable[str | Path] = (),
    ) -> None:
        self.profile = profile
        self.client = client or ApiClient(profile)
        # The rules a push checks its file against offline (the server checks it again).
        self.rule_paths = tuple(Path(p) for p in rule_paths)

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RemoteSite:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    @property
    def name(self) -> str:
        return self.profile.site

    def _get_one(self, path: str, what: str) -> dict[str, Any]:
        try:
            return self.client.request_object("GET", path)
        except RemoteError as exc:
            if exc.status == 404:
                raise NotFoundError(f"{what} does not exist on {self.profile.base_url}") from exc
            raise

    @staticmethod
    def _unsupported(what: str) -> OptionError:
        return OptionError(f"the service's API has no way to {what}; do it on the server")

    # --- ping, lookup -------------------------------------------------------------------

    def ping(self) -> dict[str, Any]:
        body = self.client.request_json("GET", "/api/json/ping", authenticated=False)
        # The spec allows a bare timestamp; give callers one shape.
        return body if isinstance(body, dict) else {"status": 200, "timestamp": body, "auth": None}

    def asset_lookup(
        self,
        queries: str | list[dict[str, Any]],
        options: dict[str, Any] | None = None,
        output: str = "asset",
        *,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """The spec's asset lookup (4.3): a list goes in requests of ``LOOKUP_BATCH``
        queries, and ``progress`` counts the queries answered after each."""
        options = dict(options or {})
        if isinstance(queries, str):
            params = {
                "query": queries,
                "output": output,
                **{
                    k: (str(v).lower() if isinstance(v, bool) else v)
                    for k, v in options.items()
                    if not isinstance(v, dict)
                },
            }
            return self.client.request_object("GET", "/api/json/asset-lookup", params=params)
        if len(queries) > LOOKUP_BATCH:
            # The server numbers queries without a code from 1 in each request; number them
            # across the whole list so the batches' answers do not overwrite each other.
            queries = [
                q if q.get("code") is not None else {**q, "code": number}
                for number, q in enumerate(queries, start=1)
            ]
        result: dict[str, Any] = {}
        progress("lookup", 0, len(queries), unit="queries")
        for start in range(0, max(len(queries), 1), LOOKUP_BATCH):
            batch = queries[start : start + LOOKUP_BATCH]
            body = {"options": options, "query": batch}
            result.update(
                self.client.request_object(
                    "POST", "/api/json/asset-lookup", json=body, params={"output": output}
                )
            )
            progress("lookup", start + len(batch), len(queries), unit="queries")
        return result

    # --- imports ------------------------------------------------------------------------

    def import_schedule(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Schedule an import job (``mode=schedule``); never blindly repeated."""
        return self.client.request_object(
            "POST", "/api/json/import", json={**body, "mode": "schedule"}, repeatable=False
        )

    def import_file(
        self,
        request: ImportRequest,
        *,
        progress: Progress = no_progress,
        delivery: Delivery = DEFAULT_DELIVERY,
    ) -> PushResult:
        """Check and link the file offline, then push it in chunks (spec 4.4's import)."""
        from toolkit.remote.push import MIN_POLL_INTERVAL_S, Pusher

        pusher = Pusher(
            self,
            rule_paths=self.rule_paths,
            asset_index=delivery.asset_index,
            poll_interval_s=(
                MIN_POLL_INTERVAL_S
                if delivery.poll_interval_s is None
                else delivery.poll_interval_s
            ),
            progress=progress,
        )
        return pusher.push(request, force=delivery.force, server_dry_run=delivery.server_dry_run)

    def import_status(self, job_id: int | None = None) -> dict[str, Any] | list[dict[str, Any]]:
        body: dict[str, Any] = {"mode": "status"}
        if job_id is not None:
            body["id"] = job_id
        answer = self.client.post_json("/api/json/import", body)
        if not isinstance(answer, dict | list):
            raise RemoteError(
                f"POST /api/json/import: the server answered {type(answer).__name__} where "
                "the API has an object or an array"
            )
        return answer

    # --- events -------------------------------------------------------------------------

    def create_event(self, values: Mapping[str, Any], message: str | None = None) -> dict[str, Any]:
        raise self._unsupported("create events")

    def get_event(self, event_id: int) -> dict[str, Any]:
        return self._get_one(f"/api/json/event/id/{_quoted(event_id)}", f"event {event_id}")

    def list_events(self, params: Mapping[str, str]) -> dict[str, Any]:
        return self.client.request_object("GET", "/api/json/event", params=params)

    def update_event(
        self,
        event_id: int,
        changes: Mapping[str, Any],
        *,
        replace: bool = False,
        message: str | None = None,
    ) -> dict[str, Any]:
        method = "PUT" if replace else "PATCH"
        return self.client.request_object(
            method,
            f"/api/json/event/id/{_quoted(event_id)}",
            json=dict(changes),
            params=_message_params(message),
        )

    def list_registers(self) -> list[dict[str, Any]]:
        """``GET /api/json/register``: offered by toolkit serve, not named by the spec."""
        try:
            return self.client.request_list("GET", "/api/json/register")
        except RemoteError as exc:
            if exc.status in (404, 405):
                raise self._unsupported("list registers") from exc
            raise

    # --- items --------------------------------------------------------------------------

    def list_items(self, params: Mapping[str, str]) -> dict[str, Any]:
        return self.client.request_object("GET", "/api/json/item", params=params)

    def get_item(self, item_id: int) -> dict[str, Any]:
        return self._get_one(f"/api/json/item/id/{_quoted(item_id)}", f"item {item_id}")

    # The audit message of a write goes as ``?message=`` (toolkit serve records it; see
    # the README's API notes), checked here as the embedded site checks it.
    def create_item(self, values: Mapping[str, Any], message: str | None = None) -> dict[str, Any]:
        return self.client.request_object(
            "POST",
            "/api/json/item",
            json=dict(values),
            params=_message_params(message),
            repeatable=False,
        )

    def replace_item(
        self, item_id: int, values: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]:
        return self.client.request_object(
            "PUT",
            f"/api/json/item/id/{_quoted(item_id)}",
            json=dict(values),
            params=_message_params(message),
        )

    def patch_item(
        self, item_id: int, changes: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]:
        return self.client.request_object(
            "PATCH",
            f"/api/json/item/id/{_quoted(item_id)}",
            json=dict(changes),
            params=_message_params(message),
        )

    # --- assets -------------------------------------------------------------------------

    def list_assets(self, params: Mapping[str, str]) -> dict[str, Any]:
        return self.client.request_object("GET", "/api/json/asset", params=params)

    def get_asset(self, asset_id: int | str) -> dict[str, Any]:
        return self._get_one(f"/api/json/asset/id/{_quoted(asset_id)}", f"asset {asset_id}")

    def asset_types(self) -> list[dict[str, Any]]:
        return self.client.request_list("GET", "/api/json/asset-type")

    # --- audit log, media ---------------------------------------------------------------

    def list_audit_logs(self, params: Mapping[str, str]) -> dict[str, Any]:
        return self.client.request_object("GET", "/api/json/audit-log", params=params)

    def get_audit_log(self, audit_id: int) -> dict[str, Any]:
        return self._get_one(f"/api/json/audit-log/id/{_quoted(audit_id)}", f"audit log {audit_id}")

    def upload_media(
        self, name: str, content: bytes, content_type: str | None = None
    ) -> dict[str, Any]:
        # As the embedded site does: the type the name suggests when none is given.
        content_type = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        check_media_size(name, len(content))
        return self.client.request_object(
            "POST",
            "/api/binary/file",
            data={"name": name},
            files={"file": (name, content, content_type)},
            repeatable=False,
        )

    def download_media(self, media_id: int) -> tuple[bytes, str]:
        try:
            response = self.client.request("GET", f"/api/binary/file/id/{_quoted(media_id)}")
        except RemoteError as exc:
            if exc.status == 404:
                raise NotFoundError(
                    f"media file {media_id} does not exist on {self.profile.base_url}"
                ) from exc
            raise
        return response.content, response.headers.get("Content-Type", "")

    # --- reports ------------------------------------------------------------------------

    def report_run(self, body: Mapping[str, Any]) -> dict[str, Any]:
        return self.client.request_object(
            "POST", "/api/json/report", json={**body, "mode": "run"}, repeatable=False
        )

    def report_status(self, instance_id: int | str) -> dict[str, Any]:
        return self.client.request_object(
            "POST", "/api/json/report", json={"mode": "status", "id": int(instance_id)}
        )

    def report_list(self) -> list[dict[str, Any]]:
        raise OptionError(
            "the service's API has no way to list its reports; run a report by its id, or "
            "use `toolkit report list` without --url for the toolkit's own catalogue"
        )

    def report_write(
        self,
        instance_id: int | str,
        format: str,
        out: BinaryIO,
        *,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """The contents as the file itself, written to ``out`` (the spec sends them whole,
        so progress can only say that the server is making them)."""
        import base64
        import json

        progress("fetch", 0, None, unit="bytes", detail="the server is making the file")
        fetched = self.report_fetch(instance_id, format)
        if "contents" not in fetched:
            raise RemoteError(f"the fetch of report instance {instance_id} has no contents")
        contents = fetched.pop("contents")
        if format == "json":
            data = json.dumps(contents, ensure_ascii=False).encode("utf-8")
        else:
            try:
                data = base64.b64decode(str(contents), validate=True)
            except ValueError as exc:  # binascii.Error is a ValueError
                raise RemoteError(
                    f"the {format} contents of report instance {instance_id} are not Base64, "
                    "as the API sends a file"
                ) from exc
        out.write(data)
        progress("fetch", len(data), len(data), unit="bytes")
        return fetched

    def report_fetch(self, instance_id: int | str, format: str = "json") -> dict[str, Any]:
        return self.client.request_object(
            "POST",
            "/api/json/report",
            json={"mode": "fetch", "reportInstanceId": int(instance_id), "format": format},
        )

    # --- administration of users: the API has no route for any of it --------------------

    @staticmethod
    def _embedded_only(operation: str) -> OptionError:
        return OptionError(
            f"{operation} is an operation of the embedded site; the API has no route for it "
            "(run it on the server's site file)"
        )

    def add_user(
        self,
        username: str,
        *,
        positions: Iterable[str] = (),
        approved: bool = False,
        terms_accepted: bool = False,
        admin: bool = False,
        first_name: str | None = None,
        last_name: str | None = None,
        email: str | None = None,
    ) -> dict[str, Any]:
        raise self._embedded_only("user add")

    def get_user(self, user: int | str) -> dict[str, Any]:
        raise self._embedded_only("user get")

    def list_users(self) -> list[dict[str, Any]]:
        raise self._embedded_only("user list")

    def update_user(
        self,
        user: int | str,
        *,
        positions: Iterable[str] | None = None,
        approved: bool | None = None,
        terms_accepted: bool | None = None,
        status: int | None = None,
        admin: bool | None = None,
    ) -> dict[str, Any]:
        raise self._embedded_only("user update")

    def set_password(self, user: int | str, password: str) -> dict[str, Any]:
        raise self._embedded_only("user password")

    def register_totp(self, user: int | str) -> dict[str, str]:
        raise self._embedded_only("user totp")

    def remove_totp(self, user: int | str) -> dict[str, Any]:
        raise self._embedded_only("user totp removal")

    def issue_api_key(self, user: int | str, label: str | None = None) -> dict[str, Any]:
        raise self._embedded_only("api-key issue")

    def revoke_api_key(self, key: int | str) -> dict[str, Any]:
        raise self._embedded_only("api-key revoke")

    def list_api_keys(self, user: int | str | None = None) -> list[dict[str, Any]]:
        raise self._embedded_only("api-key list")

    def put_on_duty(self, user: int | str, event_id: int, position: str) -> dict[str, Any]:
        raise self._embedded_only("duty add")

    def take_off_duty(self, user: int | str, event_id: int) -> dict[str, Any]:
        raise self._embedded_only("duty remove")


if TYPE_CHECKING:
    from toolkit.site import Site

    # mypy checks the remote site against the protocol here.
    def _conforms(site: RemoteSite) -> Site:
        return site
