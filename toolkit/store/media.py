"""Media files (photos, videos) of one site: uploaded once, attached to items by id."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Iterable

from toolkit.store.database import Database
from toolkit.store.records import Actor
from toolkit.store.sql import one_row

META_COLUMNS = "id, site_id, name, content_type, size, sha256, user_id, date_created"


class MediaStore:
    """The media files of one site."""

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id

    def add(self, name: str, content_type: str, content: bytes, actor: Actor) -> int:
        """Store one file (audited without its bytes); returns its id."""
        now = self.db.clock()
        digest = hashlib.sha256(content).hexdigest()
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO media (site_id, name, content_type, size, sha256, content, user_id, "
                "date_created) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    self.site_id,
                    name,
                    content_type,
                    len(content),
                    digest,
                    content,
                    actor.user_id,
                    now,
                ),
            )
            media_id = int(cursor.lastrowid or 0)
            conn.execute(
                "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
                "record_id, changes, message) VALUES (?, ?, ?, 'create', 'media', ?, ?, ?)",
                (
                    self.site_id,
                    now,
                    actor.user_id,
                    media_id,
                    json.dumps(
                        {"name": name, "contentType": content_type, "size": len(content)},
                        ensure_ascii=False,
                    ),
                    actor.message,
                ),
            )
        return media_id

    def get(self, media_id: int) -> sqlite3.Row | None:
        """The file's description, without its bytes."""
        return one_row(
            self.db.connection.execute(
                f"SELECT {META_COLUMNS} FROM media WHERE id = ? AND site_id = ?",
                (media_id, self.site_id),
            )
        )

    def content(self, media_id: int) -> bytes | None:
        row = self.db.connection.execute(
            "SELECT content FROM media WHERE id = ? AND site_id = ?", (media_id, self.site_id)
        ).fetchone()
        return None if row is None else bytes(row[0])

    def missing(self, ids: Iterable[int]) -> list[int]:
        """Which of ``ids`` are not files of this site."""
        wanted = sorted(set(ids))
        if not wanted:
            return []
        marks = ", ".join("?" * len(wanted))
        found = {
            int(r[0])
            for r in self.db.connection.execute(
                f"SELECT id FROM media WHERE site_id = ? AND id IN ({marks})",
                (self.site_id, *wanted),
            )
        }
        return [i for i in wanted if i not in found]
