"""A site's address gazetteer, kept inside the site file: a header and one byte string.

The gazetteer package (``toolkit.geocoding``) builds the index and writes it as bytes;
this store only keeps them, in parts (``store/blobs.py``: SQLite caps one value at about
1 GB, and a national address file builds more than that), and reads them back.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import IO, Any

from toolkit.store.blobs import open_parts, parts_of
from toolkit.store.database import Database


@dataclass(frozen=True)
class StoredGazetteer:
    """The gazetteer row of a site: its name, header (JSON object) and a stamp that
    changes whenever it is replaced."""

    id: int
    name: str
    header: dict[str, Any]
    date_created: int

    @property
    def stamp(self) -> str:
        return f"{self.id}-{self.date_created}"


class GazetteerStore:
    """The one gazetteer of one site."""

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id

    def replace(self, name: str, header: Mapping[str, Any], source: IO[bytes]) -> int:
        """Keep the bytes of ``source`` as the site's gazetteer ``name``, replacing any
        earlier one in the same transaction (a failure leaves the earlier one as it was).
        Returns its id."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM gazetteer WHERE site_id = ?", (self.site_id,))
            cursor = conn.execute(
                "INSERT INTO gazetteer (site_id, name, header, date_created) VALUES (?, ?, ?, ?)",
                (self.site_id, name, json.dumps(dict(header)), self.db.clock()),
            )
            gazetteer_id = int(cursor.lastrowid or 0)
            for part, data in enumerate(parts_of(source)):
                conn.execute(
                    "INSERT INTO gazetteer_part (gazetteer_id, part, data) VALUES (?, ?, ?)",
                    (gazetteer_id, part, data),
                )
        return gazetteer_id

    def current(self) -> StoredGazetteer | None:
        """The site's gazetteer (without its bytes), or None when none is loaded."""
        row = self.db.connection.execute(
            "SELECT id, name, header, date_created FROM gazetteer WHERE site_id = ?",
            (self.site_id,),
        ).fetchone()
        if row is None:
            return None
        return StoredGazetteer(
            int(row["id"]), row["name"], json.loads(row["header"]), int(row["date_created"])
        )

    def data(self, gazetteer_id: int) -> bytes:
        """The bytes of gazetteer ``gazetteer_id`` (empty when it has none)."""
        stored = open_parts(
            self.db.connection, "gazetteer_part", "gazetteer_id = ?", (gazetteer_id,)
        )
        if stored is None:
            return b""
        with stored:
            return stored.read()

    def size(self, gazetteer_id: int) -> int:
        """How many bytes the gazetteer takes, without reading them."""
        row = self.db.connection.execute(
            "SELECT coalesce(sum(length(data)), 0) FROM gazetteer_part WHERE gazetteer_id = ?",
            (gazetteer_id,),
        ).fetchone()
        return int(row[0])

    def remove(self) -> bool:
        """Drop the site's gazetteer; whether there was one."""
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM gazetteer WHERE site_id = ?", (self.site_id,))
        return cursor.rowcount > 0
