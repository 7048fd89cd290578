"""A site's address gazetteer, kept inside the site file: a header and named binary parts.

The gazetteer package (``toolkit.geocoding``) builds the index and says what the parts
are; this store only keeps them. Parts are split into chunks because SQLite caps one
value at 1 GB, and a national address file builds parts larger than that.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from toolkit.store.database import Database

# 256 MiB: well under SQLite's 1 GB cap, few enough rows for a national gazetteer.
CHUNK_BYTES = 256 * 1024 * 1024


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

    def replace(self, name: str, header: Mapping[str, Any], parts: Mapping[str, bytes]) -> int:
        """Keep ``parts`` as the site's gazetteer ``name``, replacing any earlier one in the
        same transaction (a failure leaves the earlier one as it was). Returns its id."""
        with self.db.transaction() as conn:
            conn.execute("DELETE FROM gazetteer WHERE site_id = ?", (self.site_id,))
            cursor = conn.execute(
                "INSERT INTO gazetteer (site_id, name, header, date_created) VALUES (?, ?, ?, ?)",
                (self.site_id, name, json.dumps(dict(header)), self.db.clock()),
            )
            gazetteer_id = int(cursor.lastrowid or 0)
            conn.executemany(
                "INSERT INTO gazetteer_part (gazetteer_id, part, chunk, data) VALUES (?, ?, ?, ?)",
                (
                    (gazetteer_id, part, number, chunk)
                    for part, data in parts.items()
                    for number, chunk in enumerate(_chunks(data))
                ),
            )
        return gazetteer_id

    def current(self) -> StoredGazetteer | None:
        """The site's gazetteer (without its parts), or None when none is loaded."""
        row = self.db.connection.execute(
            "SELECT id, name, header, date_created FROM gazetteer WHERE site_id = ?",
            (self.site_id,),
        ).fetchone()
        if row is None:
            return None
        return StoredGazetteer(
            int(row["id"]), row["name"], json.loads(row["header"]), int(row["date_created"])
        )

    def parts(self, gazetteer_id: int) -> dict[str, bytes]:
        """Every part of gazetteer ``gazetteer_id``, its chunks joined."""
        rows = self.db.connection.execute(
            "SELECT part, data FROM gazetteer_part WHERE gazetteer_id = ? ORDER BY part, chunk",
            (gazetteer_id,),
        )
        pieces: dict[str, list[bytes]] = {}
        for part, data in rows:
            pieces.setdefault(part, []).append(bytes(data))
        return {part: b"".join(chunks) for part, chunks in pieces.items()}

    def part_sizes(self, gazetteer_id: int) -> dict[str, int]:
        """Bytes of each part, without reading them."""
        rows = self.db.connection.execute(
            "SELECT part, sum(length(data)) FROM gazetteer_part WHERE gazetteer_id = ? "
            "GROUP BY part ORDER BY part",
            (gazetteer_id,),
        )
        return {part: int(size) for part, size in rows}

    def remove(self) -> bool:
        """Drop the site's gazetteer; whether there was one."""
        with self.db.transaction() as conn:
            cursor = conn.execute("DELETE FROM gazetteer WHERE site_id = ?", (self.site_id,))
        return cursor.rowcount > 0


def _chunks(data: bytes) -> Iterator[bytes]:
    if not data:
        yield b""
        return
    for start in range(0, len(data), CHUNK_BYTES):
        yield data[start : start + CHUNK_BYTES]
