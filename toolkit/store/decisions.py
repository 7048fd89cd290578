"""Reviewers' decisions on fuzzy matches, remembered per site (see matching.review)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from toolkit.lazy import lazy
from toolkit.store.database import Database
from toolkit.store.sql import read_frame

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")


class DecisionStore:
    """The match decisions of one site: normalised query text -> asset id or none."""

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id

    def remember(self, decisions: pd.DataFrame) -> int:
        """Keep ``decisions`` (columns ``query``, ``asset_id``; None = no asset); a later
        decision on the same text replaces the earlier one. Returns how many were kept."""
        now = int(time.time())
        rows = [
            (self.site_id, str(q), None if pd.isna(a) else str(a), now)
            for q, a in zip(decisions["query"], decisions["asset_id"], strict=True)
        ]
        with self.db.transaction() as conn:
            conn.executemany(
                "INSERT INTO match_decision (site_id, query, asset_id, date_created) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (site_id, query) DO UPDATE SET "
                "asset_id = excluded.asset_id, date_created = excluded.date_created",
                rows,
            )
        return len(rows)

    def all(self) -> pd.DataFrame:
        """Every decision of the site (columns ``query``, ``asset_id``)."""
        return read_frame(
            self.db.connection,
            "SELECT query, asset_id FROM match_decision WHERE site_id = ? ORDER BY query",
            (self.site_id,),
        )
