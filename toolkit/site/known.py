"""Names and ids a request refers to must exist: an unknown one is an error listing the
known ones, never an empty answer (a mistyped ``--register`` must not read "0 of 0").

Each check raises :class:`~toolkit.errors.OptionError` (HTTP 400: a filter's value is
bad input) naming the parameter, the value and what the site holds.
"""

from __future__ import annotations

import json

from toolkit.errors import OptionError
from toolkit.query.cql import Node, fields_of
from toolkit.query.filters import Page, listing
from toolkit.store import SiteStore
from toolkit.store.items import ITEM_COLUMNS

# Events listed in an error: enough to spot the right one, never a flood.
_SHOWN = 12


def register_fields(store: SiteStore, register_id: str) -> list[str]:
    """The field names of register ``register_id``; an error naming the registers if none."""
    row = store.registers.get(register_id)
    if row is None:
        known = [str(r["id"]) for r in store.registers.all()]
        raise OptionError(
            f"registerId {register_id!r} is not a register of this site; registers: "
            + listing(known, none="none yet (an item import makes its register)")
        )
    return [str(f["name"]) for f in json.loads(row["fields"])]


def cql_fields(store: SiteStore, register_id: str, fields: list[str], cql: Node) -> None:
    """Every field a query names is an item column or a field of the register (declared,
    or held by one of its items: a rule may keep columns it does not declare)."""
    known = set(ITEM_COLUMNS) | set(fields)
    unknown = sorted(
        name for name in fields_of(cql) - known if not store.items.has_field(register_id, name)
    )
    if unknown:
        raise OptionError(
            f"cql: {', '.join(map(repr, unknown))} is not a field of register {register_id!r}; "
            f"its fields: {listing([*fields, *ITEM_COLUMNS], limit=40)} (to search for text "
            'holding ":", quote it: "a:b")'
        )


def event(store: SiteStore, event_id: object, name: str = "eventId") -> None:
    """Event ``event_id`` is one of the site's; else an error naming some of its events."""
    if isinstance(event_id, int) and store.events.get(event_id) is not None:
        return
    rows, total = store.events.query(page=Page(limit=_SHOWN))
    known = [f"{r['id']} ({r['name']})" for r in rows]
    more = f" and {total - len(rows)} more" if total > len(rows) else ""
    raise OptionError(
        f"{name} {event_id} is not an event of this site; events: "
        + (", ".join(known) + more if known else "none yet (toolkit event create)")
    )


def record(kind: str, name: str, value: object, exists: bool) -> None:
    """A record a filter names (an item, asset or import job) must exist; far too many
    to list, so the error says where to look."""
    if not exists:
        raise OptionError(f"{name} {value} is not {kind} of this site")


def asset_type(store: SiteStore, name: object) -> None:
    """``name`` is an asset class of the site; else an error listing them."""
    known = [str(r["name"]) for r in store.assets.types()]
    if name in known:
        return
    raise OptionError(
        f"type {name!r} is not an asset class of this site; classes: "
        + listing(known, limit=40, none="none yet (an asset import makes them)")
    )
