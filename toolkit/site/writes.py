"""The writing half of the one interface: items by REST, media, scheduled imports.

:class:`SiteWrites` is mixed into ``LocalSite``; every method takes and returns
the spec's JSON shapes so a remote client can offer the same methods. Every
write is audited by the record stores.
"""

from __future__ import annotations

import json
import mimetypes
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolkit.errors import NotFoundError, OptionError
from toolkit.lazy import lazy
from toolkit.model.fieldtypes import convert_value
from toolkit.model.shapes import ITEM_OUTPUT_ONLY_FIELDS, ITEM_OWN_FIELDS
from toolkit.query.filters import format_time, listing, parse_int, shown
from toolkit.scratch import ScratchFolder
from toolkit.store import Actor, Database, SiteStore
from toolkit.store.items import NewItems

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")

if TYPE_CHECKING:
    from toolkit.geocoding import GazetteerCache
    from toolkit.importing.tasks import ImportExecutor
    from toolkit.matching import AssetIndex, Geocoder

# The item's own fields (spec 2.3) as POST/PUT/PATCH accept them; output-only fields are
# accepted and ignored so that a record read with GET can be sent back as it is.
ITEM_OUTPUT_ONLY = ITEM_OUTPUT_ONLY_FIELDS
ITEM_INPUT = tuple(f for f in ITEM_OWN_FIELDS if f not in ITEM_OUTPUT_ONLY)
ASSET_INPUTS = ("asset_lookup", "asset_friendly", "asset_codefield")
# Register fields of type ``media`` carry lists of file ids; every register has ``photos``.
DEFAULT_MEDIA_FIELD = "photos"
SCHEDULE_FIELDS = (
    "mode",
    "importType",
    "importRule",
    "data",
    "dataType",
    "encoding",
    "matchingId",
    "overwriteRule",
    "eventId",
    "regionId",
    "dryRun",
    "rollbackOnError",
    "importTag",
    "message",
    # The toolkit's extension: more rejected rows than this and the job writes nothing.
    "maxRejects",
)
# How asset_friendly is looked up: the service's sounds-like search, words in any order.
FRIENDLY_OPTIONS = {"mode": "soundex", "maxRank": 3, "useExternalLookups": False}
# An audit message of a REST write travels as ``?message=`` in the URL: 1,000 characters
# percent-encoded stay well inside a server's 16 kB request head whatever the script.
MAX_MESSAGE_CHARS = 1000
# A media file is one request of at most 10 MB (spec 8), multipart envelope included: what
# the embedded site accepts, a server accepts too.
MAX_REQUEST_BYTES = 10 * 1024 * 1024
MAX_MEDIA_BYTES = MAX_REQUEST_BYTES - 64 * 1024


def check_media_size(name: str, size: int) -> None:
    """An error when a media file of ``size`` bytes is over what one request may carry."""
    if size > MAX_MEDIA_BYTES:
        raise OptionError(
            f"media file {name!r} is {size:,} bytes; a media file is at most "
            f"{MAX_MEDIA_BYTES:,} bytes (one request of the API's 10 MB limit)"
        )


def checked_message(message: str | None) -> str | None:
    """The audit message of a write (None when empty); an error when it is too long."""
    if message is None:
        return None
    if not isinstance(message, str):
        raise OptionError(f"message {shown(message)} must be text")
    if not message.strip():
        return None
    if len(message) > MAX_MESSAGE_CHARS:
        raise OptionError(
            f"message is {len(message):,} characters; an audit message is at most "
            f"{MAX_MESSAGE_CHARS:,}"
        )
    return message


class SiteWrites:
    """Item writes, media and scheduled imports of ``LocalSite``."""

    db: Database
    store: SiteStore
    user_id: str | None
    rule_paths: tuple[str | Path, ...]
    rule_names_only: bool
    import_executor: ImportExecutor
    lock: threading.RLock
    geocoding_service: Geocoder | None
    gazetteer_cache: GazetteerCache | None

    if TYPE_CHECKING:  # provided by LocalSite

        def get_item(self, item_id: int) -> dict[str, Any]: ...
        def asset_index(self) -> AssetIndex: ...
        def require_account_admin(self, what: str) -> None: ...  # SiteAdmin's
        def import_status(
            self, job_id: int | None = None
        ) -> dict[str, Any] | list[dict[str, Any]]: ...

    # --- register items ---------------------------------------------------------------------

    def create_item(self, values: Mapping[str, Any], message: str | None = None) -> dict[str, Any]:
        """POST an item (4.6): the saved record with its final values."""
        values = _object("item", values)
        message = checked_message(message)
        register_id = _register_of(values)
        if register_id is None:
            raise OptionError("an item needs registerId (alias type)")
        fields = self._register_field_types(register_id)
        event_id = self._event_of(values, required=True)
        own = self._own_columns(values, fields, replace=True)
        patch = self._fields_patch(values, fields, stored={}, replace=False)
        asset_id = self._asset_of(values)
        with self.lock, self.db.transaction() as conn:
            item_id = self.store.items.insert_many(
                conn,
                NewItems(
                    register_id=register_id,
                    event_id=event_id,
                    region_id=own["region_id"],
                    asset_id=[asset_id],
                    status=[own["status"] if own["status"] is not None else 1],
                    is_template=[own["is_template"]],
                    tags=own["tags"],
                    fields=[_drop_nulls(patch)],
                ),
                Actor(self.user_id, message),
                self.db.clock(),
            )[0]
        return self.get_item(item_id)

    def replace_item(
        self, item_id: int, values: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]:
        """PUT an item: a full record; every field not given becomes null."""
        return self._update_item(item_id, _object("item", values), replace=True, message=message)

    def patch_item(
        self, item_id: int, changes: Mapping[str, Any], message: str | None = None
    ) -> dict[str, Any]:
        """PATCH an item: only the fields given change (null clears a field)."""
        return self._update_item(item_id, _object("item", changes), replace=False, message=message)

    def _update_item(
        self, item_id: int, values: Mapping[str, Any], *, replace: bool, message: str | None
    ) -> dict[str, Any]:
        message = checked_message(message)
        row = self.store.items.get(item_id)
        if row is None:
            raise NotFoundError(f"item {item_id} does not exist")
        if "id" in values and str(values["id"]) != str(item_id):
            raise OptionError(
                f"the body's id {values['id']!r} is not the item {item_id} of the path"
            )
        register_id = _register_of(values)
        if register_id is not None and register_id != row["register_id"]:
            raise OptionError(
                f"an item cannot move between registers (it is in {row['register_id']!r})"
            )
        fields = self._register_field_types(row["register_id"])
        if replace:
            missing = [n for n in ("eventId", "status") if values.get(n) in (None, "")]
            if missing:
                raise OptionError(
                    f"a full update (PUT) of an item needs {' and '.join(missing)}; "
                    "to change some fields only, use PATCH"
                )
        columns = self._own_columns(values, fields, replace=replace)
        if replace or "eventId" in values:
            columns["event_id"] = self._event_of(values, required=True)
        if replace and columns["status"] is None:
            raise OptionError("status cannot be null")
        if replace or any(n in values for n in ("assetId", *ASSET_INPUTS)):
            columns["asset_id"] = self._asset_of(values)
        stored = json.loads(row["fields"])
        patch = self._fields_patch(values, fields, stored=stored, replace=replace)
        if not replace:
            # A change-set changes only what it names.
            own_names = {"region_id": "regionId", "status": "status", "is_template": "isTemplate"}
            own_names["tags"] = "tags"
            columns = {
                c: v
                for c, v in columns.items()
                if c in ("event_id", "asset_id") or own_names.get(c) in values
            }
            if "status" in columns and columns["status"] is None:
                raise OptionError("status cannot be null; retire an item with status 0")
        with self.lock, self.db.transaction() as conn:
            self.store.items.update_one(
                conn,
                item_id,
                json.dumps(patch, ensure_ascii=False),
                columns,
                Actor(self.user_id, message),
                self.db.clock(),
            )
        return self.get_item(item_id)

    def _register_field_types(self, register_id: str) -> dict[str, dict[str, Any]]:
        row = self.store.registers.get(register_id)
        if row is None:
            known = [str(r["id"]) for r in self.store.registers.all()]
            raise NotFoundError(
                f"registerId {register_id!r} is not a register of this site; registers: "
                + listing(known, none="none yet (an item import makes its register)")
            )
        fields = {f["name"]: f for f in json.loads(row["fields"])}
        fields.setdefault(DEFAULT_MEDIA_FIELD, {"name": DEFAULT_MEDIA_FIELD, "type": "media"})
        return fields

    def _event_of(self, values: Mapping[str, Any], *, required: bool) -> int | None:
        value = values.get("eventId")
        if value in (None, ""):
            if required:
                raise OptionError("an item needs eventId: items are stored within events")
            return None
        event_id = parse_int("eventId", value)
        if self.store.events.get(event_id) is None:
            raise NotFoundError(f"eventId {event_id} is not an event of this site")
        return event_id

    def _own_columns(
        self, values: Mapping[str, Any], fields: Mapping[str, Any], *, replace: bool
    ) -> dict[str, Any]:
        unknown = sorted(
            set(values) - set(ITEM_INPUT) - set(ITEM_OUTPUT_ONLY) - set(ASSET_INPUTS) - set(fields)
        )
        if unknown:
            raise OptionError(
                f"unknown item field(s) {', '.join(unknown)}; this register's fields: "
                f"{', '.join(fields)}; the item's own: {', '.join(ITEM_INPUT)}"
            )
        status = values.get("status")
        region = values.get("regionId")
        tags = values.get("tags")
        if tags is not None and (
            not isinstance(tags, list) or not all(isinstance(t, str) for t in tags)
        ):
            raise OptionError(f"tags {tags!r} must be a list of strings")
        template = values.get("isTemplate")
        if template is not None and not isinstance(template, bool):
            raise OptionError(f"isTemplate {template!r} must be true or false")
        return {
            "region_id": None if region in (None, "") else parse_int("regionId", region),
            "status": None if status in (None, "") else parse_int("status", status),
            "is_template": int(bool(template)),
            "tags": json.dumps(tags or [], ensure_ascii=False),
        }

    def _fields_patch(
        self,
        values: Mapping[str, Any],
        fields: Mapping[str, Mapping[str, Any]],
        *,
        stored: Mapping[str, Any],
        replace: bool,
    ) -> dict[str, Any]:
        """The JSON merge patch of the register fields (a PUT nulls what it does not give)."""
        names = list(fields) + [n for n in stored if n not in fields] if replace else []
        patch: dict[str, Any] = dict.fromkeys(names)
        problems: list[str] = []
        media: list[int] = []
        for name, definition in fields.items():
            if name not in values:
                continue
            try:
                value = convert_value(name, definition, values[name])
            except OptionError as exc:
                problems.append(str(exc))
                continue
            if definition.get("type") == "media" and value:
                media.extend(value)
            patch[name] = value
        missing = self.store.media.missing(media)
        if missing:
            problems.append(
                f"media file id(s) {', '.join(map(str, missing))} do not exist in this site; "
                "upload with POST /api/binary/file first"
            )
        if problems:
            raise OptionError("; ".join(problems))
        return patch

    def _asset_of(self, values: Mapping[str, Any]) -> int | None:
        """The asset to link: ``assetId``, else ``asset_lookup``, else ``asset_friendly``."""
        asset_id = values.get("assetId")
        if asset_id not in (None, ""):
            number = parse_int("assetId", asset_id)
            if self.store.assets.get(number) is None:
                raise NotFoundError(f"assetId {asset_id} is not an asset of this site")
            return number
        lookup, friendly = values.get("asset_lookup"), values.get("asset_friendly")
        codefield = values.get("asset_codefield")
        if lookup not in (None, ""):
            options: dict[str, Any] = {"mode": "code", "useExternalLookups": False}
            if codefield:
                options["codeField"] = str(codefield)
            return self._lookup_asset("asset_lookup", str(lookup), options)
        if codefield not in (None, ""):
            raise OptionError("asset_codefield needs asset_lookup")
        if friendly not in (None, ""):
            return self._lookup_asset("asset_friendly", str(friendly), FRIENDLY_OPTIONS)
        return None

    def _lookup_asset(self, name: str, query: str, options: Mapping[str, Any]) -> int:
        from toolkit.matching import resolve

        index = self.asset_index()
        resolved = resolve(index, pd.DataFrame({"query": pd.array([query], dtype="str")}), options)
        position = int(resolved["asset_position"].iloc[0])
        if position < 0:
            reason = resolved["err"].iloc[0]
            raise OptionError(f"{name} {query!r} matches no asset: {reason}")
        return int(index.output_column("id")[position])

    # --- media ------------------------------------------------------------------------------

    def upload_media(
        self, name: str, content: bytes, content_type: str | None = None
    ) -> dict[str, Any]:
        """Store a file (4.10); returns ``{id, name, contentType, size, sha256, ...}``."""
        name = (name or "").strip()
        if not name:
            raise OptionError("a media file needs a name (the multipart part 'name')")
        if len(name) > 255:
            raise OptionError("a media file name is at most 255 characters")
        check_media_size(name, len(content))
        kind = content_type or mimetypes.guess_type(name)[0] or "application/octet-stream"
        media_id = self.store.media.add(name, kind, content, Actor(self.user_id))
        return self.get_media(media_id)

    def get_media(self, media_id: int) -> dict[str, Any]:
        row = self.store.media.get(media_id)
        if row is None:
            raise NotFoundError(f"media file {media_id} does not exist")
        return {
            "id": row["id"],
            "name": row["name"],
            "contentType": row["content_type"],
            "size": row["size"],
            "sha256": row["sha256"],
            "userId": row["user_id"],
            "dateCreated": format_time(row["date_created"]),
        }

    def media_content(self, media_id: int) -> bytes:
        content = self.store.media.content(media_id)
        if content is None:
            raise NotFoundError(f"media file {media_id} does not exist")
        return content

    def download_media(self, media_id: int) -> tuple[bytes, str]:
        """The file's bytes and content type (as ``RemoteSite.download_media``)."""
        return self.media_content(media_id), self.get_media(media_id)["contentType"]

    # --- scheduled imports ------------------------------------------------------------------

    def import_schedule(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """``mode=schedule`` (4.4): record the job and hand it to the executor; the job."""
        body = _object("import", body)
        unknown = sorted(set(body) - set(SCHEDULE_FIELDS))
        if unknown:
            raise OptionError(
                f"unknown import field(s) {', '.join(unknown)}; known: {', '.join(SCHEDULE_FIELDS)}"
            )
        # The pipeline is imported here: it brings pandas, geopandas and pyogrio, which
        # commands that do not import should not wait for (issue 17).
        from toolkit.importing.pipeline import ImportRunner, materialise_data, request_from_spec
        from toolkit.importing.tasks import ImportTask

        scratch = ScratchFolder("toolkit-import-")
        try:
            source, source_name = materialise_data(body, scratch.path)
            request = request_from_spec(body, source, source_name)
            runner = ImportRunner(
                self.store,
                rule_paths=self.rule_paths,
                user_id=self.user_id,
                rule_names_only=self.rule_names_only,
            )
            rule = runner.check(request)
            if rule.import_type == "user":
                self.require_account_admin("an import of type user")
            job_id = runner.record(request, rule)
        except BaseException:
            scratch.remove()
            raise
        self.import_executor(
            ImportTask(
                self.db.path,
                self.store.name,
                job_id,
                request,
                self.user_id,
                self.rule_paths,
                self.rule_names_only,
                scratch,
                geocoding_service=self.geocoding_service,
                gazetteers=self.gazetteer_cache,
            )
        )
        job = self.import_status(job_id)
        assert isinstance(job, dict)  # one id, one job
        return job


def _object(what: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise OptionError(f"the {what} must be a JSON object, not {type(value).__name__}")
    return value


def _register_of(values: Mapping[str, Any]) -> str | None:
    register, alias = values.get("registerId"), values.get("type")
    if register and alias and register != alias:
        raise OptionError(f"registerId {register!r} and its alias type {alias!r} differ")
    value = register or alias
    return None if value in (None, "") else str(value)


def _drop_nulls(patch: Mapping[str, Any]) -> str:
    return json.dumps({k: v for k, v in patch.items() if v is not None}, ensure_ascii=False)
