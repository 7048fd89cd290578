"""``Site``: the one interface, as a protocol both faces implement with one signature each.

:class:`~toolkit.site.LocalSite` implements it over a site file,
:class:`~toolkit.remote.RemoteSite` over HTTP. The operations are those of the spec
(sections 4 and 5) plus the administration of users; an operation the API has no route
for raises one clear :class:`~toolkit.errors.ToolkitError` on the remote face, saying so.
A face may add keyword-only parameters with defaults (the embedded site's ``visibility``,
used by ``toolkit serve``); callers that hold a ``Site`` never pass them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, BinaryIO, Protocol, Self

from toolkit.progress import Progress, no_progress

if TYPE_CHECKING:
    from toolkit.importing.request import ImportRequest
    from toolkit.matching.index import AssetIndex


@dataclass(frozen=True)
class Delivery:
    """How a file travels to a server (``toolkit import --url``): the embedded site reads
    it in place and needs none of this."""

    # Assets to link items to offline before sending (None: link on the server).
    asset_index: Callable[[], AssetIndex | None] | None = None
    force: bool = False  # push again what the journal says was pushed
    poll_interval_s: float | None = None  # between status checks; None: the spec's minimum
    server_dry_run: bool = False  # the server only plans each chunk; nothing is written


DEFAULT_DELIVERY = Delivery()


class ImportOutcome(Protocol):
    """What :meth:`Site.import_file` did: one job, or a push's chunks and offline checks."""

    @property
    def ok(self) -> bool: ...

    def to_dict(self) -> dict[str, Any]: ...

    def warnings(self) -> list[str]: ...

    def failure(self) -> str | None: ...


class Site(Protocol):
    """The spec's operations on one site, in the spec's JSON shapes."""

    @property
    def name(self) -> str: ...

    def close(self) -> None: ...

    def __enter__(self) -> Self: ...

    def __exit__(self, *_exc: object) -> None: ...

    # --- ping, lookup, imports ----------------------------------------------------------

    def ping(self) -> dict[str, Any]: ...

    def asset_lookup(
        self,
        queries: str | list[dict[str, Any]],
        options: dict[str, Any] | None = None,
        output: str = "asset",
        *,
        progress: Progress = no_progress,
    ) -> dict[str, Any]:
        """The spec's asset lookup (4.3); ``progress`` counts the queries answered."""
        ...

    def import_schedule(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def import_file(
        self,
        request: ImportRequest,
        *,
        progress: Progress = no_progress,
        delivery: Delivery = DEFAULT_DELIVERY,
    ) -> ImportOutcome:
        """Import a file of this machine: in place (one job), or checked and linked
        offline, then pushed to the server in chunks."""
        ...

    def import_status(self, job_id: int | None = None) -> dict[str, Any] | list[dict[str, Any]]: ...

    # --- events, registers --------------------------------------------------------------

    def create_event(
        self, values: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]: ...

    def get_event(self, event_id: int) -> dict[str, Any]: ...

    def list_events(self, params: Mapping[str, str]) -> dict[str, Any]: ...

    def update_event(
        self,
        event_id: int,
        changes: Mapping[str, Any],
        *,
        replace: bool = False,
        message: str | None = None,
    ) -> dict[str, Any]: ...

    def list_registers(self) -> list[dict[str, Any]]: ...

    # --- items --------------------------------------------------------------------------

    def list_items(self, params: Mapping[str, str]) -> dict[str, Any]: ...

    def get_item(self, item_id: int) -> dict[str, Any]: ...

    def create_item(
        self, values: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]: ...

    def replace_item(
        self, item_id: int, values: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]: ...

    def patch_item(
        self, item_id: int, changes: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]: ...

    # --- assets, audit log, media -------------------------------------------------------

    def list_assets(self, params: Mapping[str, str]) -> dict[str, Any]: ...

    def get_asset(self, asset_id: int | str) -> dict[str, Any]: ...

    def asset_types(self) -> list[dict[str, Any]]: ...

    def list_audit_logs(self, params: Mapping[str, str]) -> dict[str, Any]: ...

    def get_audit_log(self, audit_id: int) -> dict[str, Any]: ...

    def upload_media(
        self, name: str, content: bytes, content_type: str | None = None
    ) -> dict[str, Any]: ...

    def download_media(self, media_id: int) -> tuple[bytes, str]: ...

    # --- reports ------------------------------------------------------------------------

    def report_list(self) -> list[dict[str, Any]]: ...

    def report_run(self, body: Mapping[str, Any]) -> dict[str, Any]: ...

    def report_status(self, instance_id: int | str) -> dict[str, Any]: ...

    def report_fetch(self, instance_id: int | str, format: str = "json") -> dict[str, Any]: ...

    def report_write(
        self,
        instance_id: int | str,
        format: str,
        out: BinaryIO,
        *,
        progress: Progress = no_progress,
    ) -> dict[str, Any]: ...

    # --- administration of users (embedded site only: the API has no route) ------------

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
    ) -> dict[str, Any]: ...

    def get_user(self, user: int | str) -> dict[str, Any]: ...

    def list_users(self) -> list[dict[str, Any]]: ...

    def update_user(
        self,
        user: int | str,
        *,
        positions: Iterable[str] | None = None,
        approved: bool | None = None,
        terms_accepted: bool | None = None,
        status: int | None = None,
        admin: bool | None = None,
    ) -> dict[str, Any]: ...

    def set_password(self, user: int | str, password: str) -> dict[str, Any]: ...

    def register_totp(self, user: int | str) -> dict[str, str]: ...

    def remove_totp(self, user: int | str) -> dict[str, Any]: ...

    def issue_api_key(self, user: int | str, label: str | None = None) -> dict[str, Any]: ...

    def revoke_api_key(self, key: int | str) -> dict[str, Any]: ...

    def list_api_keys(self, user: int | str | None = None) -> list[dict[str, Any]]: ...

    def put_on_duty(self, user: int | str, event_id: int, position: str) -> dict[str, Any]: ...

    def take_off_duty(self, user: int | str, event_id: int) -> dict[str, Any]: ...


def operations() -> list[str]:
    """The protocol's operation names, for the contract suite to check each has a test."""
    return sorted(name for name in vars(Site) if not name.startswith("_"))
