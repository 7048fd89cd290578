"""What one caller may see of a site's register data (spec 5, rule 5), as one value.

The embedded site and the command line act for the operator, who sees everything
(:data:`EVERYTHING`); ``toolkit serve`` makes a :class:`Visibility` per call from the
API user's duty and hands it to the methods that read register data in bulk
(report runs and their contents, import-job status), which filter or refuse by it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass

from toolkit.errors import PermissionDeniedError
from toolkit.model.rows import StoredRow


@dataclass(frozen=True)
class Visibility:
    """``events``: the events whose register data the caller may see, None for every
    event. ``owner``: the user whose report instances the caller may see, None for
    anyone's."""

    events: frozenset[int] | None = None
    owner: str | None = None

    @classmethod
    def of_user(cls, username: str, duty: Iterable[int]) -> Visibility:
        """An API user: the events on duty in, and only the user's own report instances."""
        return cls(frozenset(int(e) for e in duty), username)

    @property
    def everything(self) -> bool:
        return self.events is None

    def sees(self, event_id: int | None) -> bool:
        """Whether the register data of ``event_id`` is visible; None (an event not
        known) is visible only to a caller who sees every event."""
        if self.events is None:
            return True
        return event_id is not None and int(event_id) in self.events

    def covers(self, events: Iterable[int | None]) -> bool:
        """Whether every event of ``events`` is visible."""
        return all(self.sees(e) for e in events)

    def require(self, events: Iterable[int | None], what: str, advice: str = "") -> None:
        """Refuse (403) unless every event of ``events`` is visible; ``what`` names the read."""
        hidden = sorted({e for e in events if not self.sees(e)}, key=lambda e: (e is None, e))
        if hidden:
            named = ", ".join("unknown" if e is None else str(e) for e in hidden)
            events_named, that = ("event", "that event") if len(hidden) == 1 else ("events", "each")
            raise PermissionDeniedError(
                f"{what} is register data of {events_named} {named}; it needs duty in {that}"
                + advice
            )

    def owns(self, user_id: str | None) -> bool:
        """Whether a record made by ``user_id`` (a report instance) is the caller's to see."""
        return self.owner is None or user_id == self.owner


EVERYTHING = Visibility()


def job_events(row: StoredRow) -> set[int | None]:
    """The events whose register data an import job's record holds (its summary has the
    first rejected rows with their values): an item job's event (None when it was given
    none), nothing for asset and user jobs."""
    if row["import_type"] != "item":
        return set()
    event = json.loads(row["params"] or "{}").get("eventId")
    return {int(event) if isinstance(event, int) else None}
