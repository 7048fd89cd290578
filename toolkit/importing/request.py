"""An import as asked for: the spec's schedule fields (4.4), and inline data made a file."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from toolkit.errors import OptionError
from toolkit.importing.reject_limit import RejectLimit
from toolkit.names import DATA_ENCODINGS as DATA_ENCODINGS  # the API's encoding values
from toolkit.names import DATA_TYPES as DATA_TYPES  # the API's dataType values
from toolkit.query.filters import parse_int


@dataclass(frozen=True)
class ImportRequest:
    """One import, by the spec's field names (snake case here), plus how to read the file."""

    import_type: str
    import_rule: str
    source: Path
    source_name: str | None = None
    matching_id: str | None = None
    overwrite_rule: str | None = None
    event_id: int | None = None
    region_id: int | None = None
    dry_run: bool = False
    rollback_on_error: bool = False
    # More rejected rows than this and the job fails, writing nothing (None: no limit).
    max_rejects: RejectLimit | None = None
    import_tag: str | None = None
    message: str | None = None
    layer: str | None = None
    encoding: str | None = None
    crs: str | None = None
    rejects_path: Path | None = None
    # How the file is read when its name or detection is not to be trusted (read_source).
    file_format: str | None = None
    delimiter: str | None = None
    quotechar: str | None = None

    def read_options(self) -> dict[str, Any]:
        """The keyword arguments of ``read_source`` this request asks for."""
        return {
            "layer": self.layer,
            "encoding": self.encoding,
            "crs": self.crs,
            "format": self.file_format,
            "delimiter": self.delimiter,
            "quotechar": self.quotechar,
        }

    def reject_limit(self) -> RejectLimit | None:
        """The limit on rejected rows the job keeps: rollbackOnError is the limit 0."""
        return RejectLimit(count=0) if self.rollback_on_error else self.max_rejects

    @property
    def name(self) -> str:
        return self.source_name or self.source.name

    def spec_params(self) -> dict[str, Any]:
        """The request as the spec's schedule fields, for the job record."""
        return {
            "importType": self.import_type,
            "importRule": self.import_rule,
            "source": self.name,
            "matchingId": self.matching_id,
            "overwriteRule": self.overwrite_rule,
            "eventId": self.event_id,
            "regionId": self.region_id,
            "dryRun": int(self.dry_run),
            "rollbackOnError": int(self.rollback_on_error),
            "maxRejects": None if self.max_rejects is None else str(self.max_rejects),
            "importTag": self.import_tag,
            "message": self.message,
        }


def materialise_data(body: Mapping[str, Any], folder: Path) -> tuple[Path, str]:
    """Write the spec's inline ``data`` (plain CSV or base64 file) to a file in ``folder``."""
    data = body.get("data")
    if not isinstance(data, str) or data == "":
        raise OptionError("data is required: the import data as plain text or base64")
    encoding = body.get("encoding") or "plain"
    if encoding not in DATA_ENCODINGS:
        raise OptionError(f"encoding {encoding!r} is not one of: {', '.join(DATA_ENCODINGS)}")
    data_type = body.get("dataType")
    if data_type is not None and data_type not in DATA_TYPES:
        raise OptionError(f"dataType {data_type!r} is not one of: {', '.join(DATA_TYPES)}")
    if encoding == "base64":
        try:
            raw = base64.b64decode(data, validate=True)
        except (binascii.Error, ValueError):
            raise OptionError("data is not valid base64 (encoding is base64)") from None
        data_type = data_type or ("zip" if raw[:2] == b"PK" else "csv")
    else:
        raw = data.encode("utf-8")
        data_type = data_type or "csv"
    path = folder / f"import-data.{data_type}"
    path.write_bytes(raw)
    return path, f"import data ({data_type})"


def request_from_spec(body: Mapping[str, Any], source: Path, source_name: str) -> ImportRequest:
    """An :class:`ImportRequest` from a ``mode=schedule`` body (spec 4.4), checked."""
    for required in ("importType", "importRule"):
        if not body.get(required):
            raise OptionError(f"{required} is required")

    def optional_int(name: str) -> int | None:
        value = body.get(name)
        return None if value in (None, "") else parse_int(name, value)

    def flag(name: str) -> bool:
        value = body.get(name, 0)
        if value in (0, 1, "0", "1", True, False):
            return bool(int(value))
        raise OptionError(f"{name} {value!r} is not one of: 0, 1")

    return ImportRequest(
        import_type=str(body["importType"]),
        import_rule=str(body["importRule"]),
        source=source,
        source_name=source_name,
        matching_id=body.get("matchingId") or None,
        overwrite_rule=body.get("overwriteRule") or None,
        event_id=optional_int("eventId"),
        region_id=optional_int("regionId"),
        dry_run=flag("dryRun"),
        rollback_on_error=flag("rollbackOnError"),
        # The toolkit's extension of the spec's fields (its server honours it).
        max_rejects=None
        if body.get("maxRejects") in (None, "")
        else RejectLimit.parse(body["maxRejects"]),
        import_tag=body.get("importTag") or None,
        message=body.get("message") or None,
    )
