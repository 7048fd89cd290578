"""What reports need to know of a register: its fields as columns, and which fields say
how bad the damage is, when the item was observed, whether the place is habitable and
how many people live there.

A rule declares these with ``FieldRule(role=...)``; registers made before roles existed
are read by the damage-assessment names (``damageLevel``, ``inspectionDate``,
``habitable``, ``occupants``) so older sites keep their summaries.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from toolkit.errors import NotFoundError
from toolkit.reports.catalogue import Field, FieldType

if TYPE_CHECKING:
    from toolkit.store import SiteStore

# Register field types of import rules, as report field types.
REGISTER_FIELD_TYPES: dict[str, FieldType] = {
    "integer": "integer",
    "decimal": "number",
    "boolean": "boolean",
    "date": "date",
}
# The field each role falls back to when no field of the register declares it.
ROLE_NAMES = {
    "severity": ("damageLevel", "lookup"),
    "inspected": ("inspectionDate", "date"),
    "habitable": ("habitable", "boolean"),
    "occupants": ("occupants", "integer"),
}


@dataclass(frozen=True)
class Register:
    """A register as reports see it."""

    id: str
    name: str
    fields: tuple[dict[str, Any], ...]

    def role(self, role: str) -> dict[str, Any] | None:
        """The field with ``role``, declared or (older registers) by its usual name."""
        declared = [f for f in self.fields if f.get("role") == role]
        if declared:
            return declared[0]
        name, kind = ROLE_NAMES[role]
        found = [f for f in self.fields if f["name"] == name and f.get("type") == kind]
        return found[0] if found else None

    @property
    def severity(self) -> dict[str, Any] | None:
        field = self.role("severity")
        return field if field is not None and len(field.get("choices") or ()) >= 2 else None

    @property
    def levels(self) -> tuple[str, ...]:
        """The severity's choices from none to the worst (empty without a severity)."""
        field = self.severity
        return () if field is None else tuple(str(c) for c in field["choices"])

    def columns(self, taken: Sequence[str]) -> tuple[Field, ...]:
        """The register's fields as report fields, leaving out keys already ``taken``."""
        return tuple(
            Field(
                f["name"],
                f.get("label") or f["name"],
                REGISTER_FIELD_TYPES.get(f.get("type", "text"), "text"),
            )
            for f in self.fields
            if f["name"] not in taken
        )


def _register(row: Any) -> Register:  # a sqlite3.Row
    return Register(str(row["id"]), str(row["name"]), tuple(json.loads(row["fields"])))


def known_registers(store: SiteStore) -> str:
    return ", ".join(str(r["id"]) for r in store.registers.all()) or "none yet"


def get_register(store: SiteStore, register_id: str, param: str = "registerId") -> Register:
    """The register, or NotFoundError naming the parameter and listing the registers."""
    row = store.registers.get(register_id)
    if row is None:
        raise NotFoundError(
            f"parameter {param} {register_id!r}: no such register; registers: "
            f"{known_registers(store)}"
        )
    return _register(row)


def all_registers(store: SiteStore) -> list[Register]:
    return [_register(row) for row in store.registers.all()]


def severity_register(store: SiteStore, register_id: str | None, *, report: str) -> Register:
    """The register whose damage a report counts: the one asked for, which must have a
    severity field, else the site's only register with one."""
    if register_id is not None:
        register = get_register(store, register_id)
        if register.severity is None:
            raise NotFoundError(
                f"parameter registerId {register_id!r}: register {register_id} has no "
                "severity field (a lookup field with role severity, or damageLevel), so "
                f"{report} cannot say how bad the damage is"
            )
        return register
    candidates = [r for r in all_registers(store) if r.severity is not None]
    if not candidates:
        raise NotFoundError(
            f"{report} needs a register with a severity field (a rule field with "
            f"role='severity', or damageLevel); registers: {known_registers(store)}"
        )
    if len(candidates) > 1:
        raise NotFoundError(
            f"{report}: several registers have a severity field; choose one with "
            f"registerId: {', '.join(r.id for r in candidates)}"
        )
    return candidates[0]
