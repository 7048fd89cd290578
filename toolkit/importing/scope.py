"""What an import matches and holds: its matching field, its scope's lock name, and the
keys of the records already in that scope."""

from __future__ import annotations

import pandas as pd

from toolkit.errors import OptionError
from toolkit.importing.request import ImportRequest
from toolkit.importing.rules import ImportRule
from toolkit.query.filters import Page
from toolkit.store import SiteStore


def scope_has_records(store: SiteStore, rule: ImportRule, request: ImportRequest) -> bool:
    """Whether the import's scope holds any record: a count, not the keys themselves
    (those are read once, under the write lock, to plan)."""
    one = Page(limit=1)
    if rule.import_type == "item":
        assert rule.register is not None
        _, total = store.items.query(page=one, register_id=rule.register, event_id=request.event_id)
    elif rule.import_type == "asset":
        _, total = store.assets.query(page=one, active=True)
    else:
        return bool(store.users.all())
    return total > 0


def existing_keys(
    store: SiteStore, rule: ImportRule, request: ImportRequest, matching_id: str
) -> pd.DataFrame:
    """The active records' keys in the import's scope, read under the write lock by a
    transaction that has changed no record yet (so they may be read apart from it)."""
    if rule.import_type == "item":
        assert rule.register is not None
        return store.items.active_keys(rule.register, request.event_id, matching_id, locked=True)
    if rule.import_type == "asset":
        return store.assets.active_keys(matching_id, locked=True)
    return store.users.active_keys(matching_id)


def import_scope(store: SiteStore, rule: ImportRule, request: ImportRequest) -> str:
    """What an import's transaction holds (``Database.lock_scope``)."""
    return f"import/{store.site_id}/{rule.import_type}/{rule.register}/{request.event_id}"


def matching_field(rule: ImportRule, matching_id: str | None) -> str:
    """The field a request matches records on: the rule's, or the one ``matching_id``
    names by its field name or by the file's heading for it (``Reference`` for
    ``reference``); any other is an :class:`OptionError` listing both."""
    if matching_id is None:
        return rule.matching_id
    field = rule.matching_field(matching_id)
    if field is None:
        fields = ", ".join(sorted({f.name for f in rule.fields} | {"id"}))
        headings = ", ".join(f.column for f in rule.fields)
        raise OptionError(
            f"matchingId {matching_id!r} is neither a field of rule {rule.name!r} ({fields}) "
            f"nor a heading of one ({headings})"
        )
    return field
