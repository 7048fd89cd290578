"""Import rules: the declarative description of one import, and applying it to a table.

A rule (the spec's ``importRule``) names its import type, its register (items),
how file headings map to fields with types and required flags, how rows link
to assets, and its default matching id and overwrite rule. Built-in rules live
in the ``pipelines`` package, one module each, each defining ``RULE``; users add
their own rule files by path or folder. Rules are loaded by name: ``toolkit``
never imports ``pipelines``.

Applying a rule is vectorised: every column is converted whole, and every bad
cell becomes a rejection naming its row, column, value and reason.
"""

from __future__ import annotations

import importlib
import importlib.util
import pkgutil
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from toolkit.errors import OptionError, SourceError
from toolkit.importing.overwrite import check_overwrite_rule
from toolkit.model.fieldtypes import (
    DEFAULT_MAX_LENGTH,
    IMPORT_FIELD_TYPES,
    FieldType,
    check_field_type,
    convert_column,
)
from toolkit.names import IMPORT_TYPES, ImportType, OverwriteRule
from toolkit.progress import Progress, no_progress
from toolkit.sources.tabular import LAT_NAMES, LON_NAMES, WKT_NAMES

NULL_MARKER = "[NULL]"
BUILTIN_PACKAGE = "pipelines"


FieldRole = Literal["severity", "inspected", "habitable", "occupants"]
# Each role and the field type it needs: ``severity`` is a lookup whose choices run from
# no damage (the first) to the worst (the last); ``inspected`` the date the item records.
FIELD_ROLES: dict[str, str] = {
    "severity": "lookup",
    "inspected": "date",
    "habitable": "boolean",
    "occupants": "integer",
}


def _check_role(name: str, kind: str, choices: tuple[str, ...], role: str) -> None:
    if role not in FIELD_ROLES:
        raise OptionError(f"field {name!r}: role {role!r} is not one of: {', '.join(FIELD_ROLES)}")
    if kind != FIELD_ROLES[role]:
        raise OptionError(f"field {name!r}: role {role} needs a {FIELD_ROLES[role]} field")
    if role == "severity" and len(choices) < 2:
        raise OptionError(
            f"field {name!r}: a severity field needs its choices from none to the worst"
        )


@dataclass(frozen=True)
class FieldRule:
    """One target field and the file heading it comes from."""

    name: str
    column: str
    type: FieldType = "text"
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    max_length: int = DEFAULT_MAX_LENGTH
    pattern: str | None = None
    pattern_reason: str = "is not in the expected form"
    description: str = ""
    # Leading and trailing spaces are trimmed from every cell (" waller" is stored
    # "waller", so CQL surname:waller finds it); trim=False keeps a text field as written.
    trim: bool = True
    # What the field means to reports (see FIELD_ROLES): the damage summary and the
    # impacted-assets report find a register's severity, date, habitable and occupants here.
    role: FieldRole | None = None

    def __post_init__(self) -> None:
        check_field_type(self.name, self.type, allowed=IMPORT_FIELD_TYPES)
        if self.role is not None:
            _check_role(self.name, self.type, self.choices, self.role)
        if self.type == "lookup" and not self.choices:
            raise OptionError(f"field {self.name!r}: a lookup field needs its choices")
        if not self.trim and self.type != "text":
            raise OptionError(
                f"field {self.name!r}: trim=False keeps the spaces of a text field; a "
                f"{self.type} field always reads its value without them"
            )


@dataclass(frozen=True)
class AssetLink:
    """How item rows find their asset; the ways are tried in the order given here.

    ``id_column`` holds asset ids; ``lookup_column`` holds a code matched on
    ``codefield`` (the spec's ``asset_lookup``/``asset_codefield``);
    ``friendly_columns`` are joined into an address (``asset_friendly``);
    ``use_geometry`` links by the asset that contains the row's point.
    ``options`` are asset-lookup options (spec 4.3) for the address search.
    """

    id_column: str | None = None
    lookup_column: str | None = None
    codefield: str | None = None
    friendly_columns: tuple[str, ...] = ()
    use_geometry: bool = True
    options: dict[str, Any] = field(default_factory=dict)
    required: bool = False


@dataclass(frozen=True)
class ImportRule:
    """The declarative description of one import."""

    name: str
    import_type: ImportType
    description: str
    fields: tuple[FieldRule, ...]
    register: str | None = None
    register_name: str | None = None
    asset_type: str | None = None
    asset_link: AssetLink | None = None
    matching_id: str = "id"
    overwrite_rule: OverwriteRule = "updateAndInsert"
    keep_other_columns: bool = False
    source: str = "built-in"

    def __post_init__(self) -> None:
        if self.import_type not in IMPORT_TYPES:
            raise OptionError(
                f"rule {self.name!r}: importType {self.import_type!r} is not one of: "
                + ", ".join(IMPORT_TYPES)
            )
        if self.import_type == "item" and not self.register:
            raise OptionError(f"rule {self.name!r}: an item rule needs its register")
        check_overwrite_rule(self.overwrite_rule)
        names = [f.name for f in self.fields]
        if len(set(names)) != len(names):
            raise OptionError(f"rule {self.name!r}: a field is named twice")
        roles = [f.role for f in self.fields if f.role is not None]
        if len(set(roles)) != len(roles):
            raise OptionError(f"rule {self.name!r}: a role is given to two fields")

    @property
    def uses_geometry(self) -> bool:
        """Whether a row's geometry matters: an asset's is stored, an item's may locate its
        asset; a user has none (coordinate columns in a user file are left unused)."""
        if self.import_type == "asset":
            return True
        return self.asset_link is not None and self.asset_link.use_geometry

    def field_named(self, name: str) -> FieldRule | None:
        return next((f for f in self.fields if f.name == name), None)

    def matching_field(self, name: str) -> str | None:
        """The field a matchingId names: a field's name (or ``id``), else the file's
        heading for a field (its column or an alias, matched as headings are: any case,
        spaces or underscores), so ``Reference`` names ``reference``; None if neither."""
        if name == "id" or self.field_named(name) is not None:
            return name
        key = _heading_key(name)
        return next(
            (
                f.name
                for f in self.fields
                if any(_heading_key(c) == key for c in (f.column, *f.aliases))
            ),
            None,
        )

    def defaults(self) -> dict[str, Any]:
        """Values for fields left empty, applied to inserted rows only."""
        return {f.name: f.default for f in self.fields if f.default is not None}

    def describe(self) -> dict[str, Any]:
        """What the rule expects, for ``toolkit rules show``."""
        link = self.asset_link
        return {
            "name": self.name,
            "importType": self.import_type,
            "description": self.description,
            "register": self.register,
            "assetType": self.asset_type,
            "matchingId": self.matching_id,
            "overwriteRule": self.overwrite_rule,
            "keepOtherColumns": self.keep_other_columns,
            "source": self.source,
            "fields": [
                {
                    "name": f.name,
                    "column": f.column,
                    "aliases": list(f.aliases),
                    "type": f.type,
                    "required": f.required,
                    "default": f.default,
                    "choices": list(f.choices),
                    "trim": f.trim,
                    "role": f.role,
                    "description": f.description,
                }
                for f in self.fields
            ],
            "geometry": _geometry_description(self),
            "assetLink": None
            if link is None
            else {
                "idColumn": link.id_column,
                "lookupColumn": link.lookup_column,
                "codefield": link.codefield,
                "friendlyColumns": list(link.friendly_columns),
                "useGeometry": link.use_geometry,
                "options": link.options,
                "required": link.required,
            },
        }


def _geometry_description(rule: ImportRule) -> dict[str, Any]:
    """Where a row's geometry comes from, and what the rule does with it."""
    use = None
    if rule.import_type == "asset":
        use = "stored as the asset's geometry"
    elif rule.uses_geometry:
        use = "links the row to the asset that contains it"
    return {
        "used": rule.uses_geometry,
        "use": use,
        # A spatial file's own geometry, else these headings of a table (any case).
        "wktColumns": list(WKT_NAMES),
        "latitudeColumns": list(LAT_NAMES),
        "longitudeColumns": list(LON_NAMES),
    }


@dataclass
class Prepared:
    """A table after its rule: typed values, cleared cells, and rejected rows.

    ``values`` has one column per field, indexed by source row number; a
    missing value means "leave alone" and ``cleared`` marks ``[NULL]`` cells,
    which clear the field on update. ``rejections`` has one line per problem:
    ``row``, ``column``, ``value``, ``reason``.
    """

    values: pd.DataFrame
    cleared: pd.DataFrame
    rejections: pd.DataFrame
    ignored_columns: list[str]
    column_of: dict[str, str]

    @property
    def rejected_rows(self) -> pd.Index:
        rows: pd.Index = pd.Index(self.rejections["row"].unique())
        return rows


def _heading_key(heading: str) -> str:
    return re.sub(r"[\s_]+", " ", str(heading)).strip().casefold()


def _resolve_headings(rule: ImportRule, columns: Sequence[str], path: str) -> dict[str, str]:
    """Map each field to the file's heading for it; a missing required heading is fatal."""
    by_key = {_heading_key(c): c for c in columns}
    found: dict[str, str] = {}
    missing: list[str] = []
    for spec in rule.fields:
        for candidate in (spec.column, *spec.aliases):
            heading = by_key.get(_heading_key(candidate))
            if heading is not None:
                found[spec.name] = heading
                break
        else:
            if spec.required and spec.default is None:
                missing.append(spec.column)
    if missing:
        raise SourceError(
            f"{path}: rule {rule.name!r} needs the column(s) {', '.join(map(repr, missing))}, "
            f"which the file does not have; its columns are: {', '.join(map(repr, columns))}"
        )
    return found


def _reject(
    frame_index: pd.Index, mask: np.ndarray, column: str, values: pd.Series, reason: str
) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row": frame_index[mask],
            "column": column,
            "value": values[mask].astype("string").to_numpy(),
            "reason": reason,
        }
    )


def _convert(spec: FieldRule, text: pd.Series) -> tuple[pd.Series, np.ndarray, str]:
    """Convert one column; returns the values, a mask of bad cells and the reason for them."""
    return convert_column(spec.type, text, choices=spec.choices, max_length=spec.max_length)


def numbers_for_text(
    rule: ImportRule,
    column_of: Mapping[str, str],
    number_columns: Mapping[str, Mapping[str, Any]],
    *,
    path: str,
    sheet: str | None,
) -> list[str]:
    """A warning per column a text field of ``rule`` reads whose workbook cells are
    numbers (``number_columns``, from the XLSX reader): a code typed as 007 in a number
    cell is the number 7, and would overwrite a stored '007'."""
    warnings = []
    for spec in rule.fields:
        heading = column_of.get(spec.name)
        found = number_columns.get(heading) if heading is not None else None
        if spec.type != "text" or not found:
            continue
        warnings.append(
            f"{path}: sheet {sheet!r}, column {heading!r}: {found['count']} cell(s) are "
            f"numbers in the workbook, e.g. {found['example']!r}, but field {spec.name!r} "
            "is text: any leading zeros were lost in Excel (007 is stored as 7); format "
            "the column as Text and retype them, or check them before they overwrite "
            "stored values"
        )
    return warnings


def apply_rule(
    rule: ImportRule,
    frame: pd.DataFrame,
    *,
    path: str = "<data>",
    geometry_columns: Sequence[str] = (),
    progress: Progress = no_progress,
) -> Prepared:
    """Apply ``rule`` to ``frame`` (text columns, index = source row numbers). Progress
    counts the values checked, a field (every row) at a time.

    ``geometry_columns`` are the headings the reader made the geometry from: a rule that
    uses geometry has used them (they are neither reported unused nor kept as text).
    """
    column_of = _resolve_headings(rule, list(frame.columns), path)
    used = set(column_of.values())
    if rule.uses_geometry:
        used |= set(geometry_columns)
    ignored = [c for c in frame.columns if c not in used and c != "geometry"]
    values: dict[str, pd.Series] = {}
    cleared: dict[str, np.ndarray] = {}
    problems: list[pd.DataFrame] = []
    total = len(frame) * len(rule.fields)
    for done, spec in enumerate(rule.fields):
        progress("validate", done * len(frame), total, unit="values", detail=spec.name)
        heading = column_of.get(spec.name)
        if heading is None:
            raw = pd.Series(pd.NA, index=frame.index, dtype="string")
        else:
            raw = frame[heading].astype("string")
        stripped = raw.str.strip()
        is_null_marker = (stripped == NULL_MARKER).fillna(False).to_numpy()
        blank = (stripped == "").fillna(False).to_numpy()
        # Trimmed at the rule stage, whole column at once; a problem still shows the cell
        # as read (``raw``).
        text = (stripped if spec.trim else raw).mask(is_null_marker | blank)
        converted, bad, reason = _convert(spec, text)
        if bad.any():
            problems.append(_reject(frame.index, bad, heading or spec.column, raw, reason))
        if spec.pattern is not None:
            # (A trimmed field's text has no spaces around it to strip.)
            trimmed = text if spec.trim else text.str.strip()
            unlike = (text.notna() & ~trimmed.str.fullmatch(spec.pattern)).fillna(False)
            unlike = unlike.to_numpy(dtype=bool) & ~bad
            if unlike.any():
                problems.append(
                    _reject(frame.index, unlike, heading or spec.column, raw, spec.pattern_reason)
                )
                bad = bad | unlike
        # A default stands in for an empty required cell, but only on insert (imports.py).
        if spec.required and spec.default is None:
            missing = (text.isna().to_numpy()) & ~bad
            if missing.any():
                problems.append(
                    _reject(
                        frame.index,
                        missing,
                        heading or spec.column,
                        raw,
                        "is required but empty" if heading else "is required",
                    )
                )
        values[spec.name] = converted.mask(bad) if bad.any() else converted
        # A required field cannot be cleared: its [NULL] was rejected above as empty.
        cleared[spec.name] = is_null_marker & (not spec.required)
    progress("validate", total, total, unit="values")
    if rule.keep_other_columns:
        # Unmapped columns travel as text fields under their heading (extraInfo for assets).
        for heading in ignored:
            if heading in values:  # a heading that equals a field name is that field's
                continue
            # Trimmed like a declared text field (a rule keeps a column's spaces by
            # declaring it with trim=False).
            text = frame[heading].astype("string").str.strip()
            is_null_marker = (text == NULL_MARKER).fillna(False).to_numpy()
            values[heading] = text.mask(is_null_marker | (text == "").fillna(False))
            cleared[heading] = is_null_marker
        ignored = []
    rejections = (
        pd.concat(problems, ignore_index=True)
        if problems
        else pd.DataFrame({"row": [], "column": [], "value": [], "reason": []})
    )
    return Prepared(
        values=pd.DataFrame(values, index=frame.index),
        cleared=pd.DataFrame(cleared, index=frame.index),
        rejections=rejections.astype({"row": "int64"}),
        ignored_columns=ignored,
        column_of=column_of,
    )


# --- finding rules -----------------------------------------------------------------------


def _rule_of_module(module: Any, origin: str) -> ImportRule:
    rule = getattr(module, "RULE", None)
    if not isinstance(rule, ImportRule):
        raise OptionError(f"{origin}: defines no RULE = ImportRule(...)")
    return rule


def _load_file(path: Path) -> ImportRule:
    spec = importlib.util.spec_from_file_location(f"toolkit_user_rule_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise OptionError(f"{path}: is not a Python rule file")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a user's file: say which file broke and how
        raise OptionError(f"{path}: cannot load the rule: {exc}") from exc
    rule = _rule_of_module(module, str(path))
    return ImportRule(**{**rule.__dict__, "source": str(path)})


def available_rules(extra_paths: Iterable[str | Path] = ()) -> dict[str, ImportRule]:
    """Every rule by name: the built-in ones, then user files and folders (which win)."""
    rules: dict[str, ImportRule] = {}
    package = importlib.import_module(BUILTIN_PACKAGE)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{BUILTIN_PACKAGE}.{info.name}")
        rule = _rule_of_module(module, f"{BUILTIN_PACKAGE}.{info.name}")
        rules[rule.name] = rule
    for entry in extra_paths:
        path = Path(entry)
        if path.is_dir():
            files = sorted(p for p in path.glob("*.py") if not p.name.startswith("_"))
        elif path.is_file():
            files = [path]
        else:
            raise OptionError(f"{path}: no such rule file or folder")
        for file in files:
            rule = _load_file(file)
            rules[rule.name] = rule
    return rules


def load_rule(
    name_or_path: str, extra_paths: Iterable[str | Path] = (), *, names_only: bool = False
) -> ImportRule:
    """The rule called ``name_or_path``, or the rule in that ``.py`` file.

    With ``names_only`` (a server's requests) only the name of a rule of the
    catalogue is accepted, never a path: a client must not make the server run
    a file of its choosing, nor learn which paths exist. The embedded site's
    CLI passes paths on purpose (the user runs their own code on their machine).
    """
    if name_or_path.endswith(".py") and not names_only:
        return _load_file(Path(name_or_path))
    try:
        rules = available_rules(extra_paths)
    except OptionError:
        if not names_only:
            raise
        # The operator's rule files changed under a running server: their paths and
        # errors are the operator's business (the server checked them when it started).
        raise OptionError("the server's import rules cannot be read; tell its operator") from None
    try:
        return rules[name_or_path]
    except KeyError:
        raise OptionError(
            f"importRule {name_or_path!r} is not one of: {', '.join(sorted(rules))}"
        ) from None
