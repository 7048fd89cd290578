"""The matching-index cache of one site, kept in the site file.

Building the index of a million assets takes seconds, so the built index is kept as
bytes (see ``AssetIndex.dump``) beside the stamp of the assets it was built from,
and used again while the stamp is unchanged. It is only a cache: a failure to
write it (the file busy with a long import, a full disk) is logged and skipped.
"""

from __future__ import annotations

import logging
from typing import IO

from toolkit.store.blobs import open_parts, parts_of, parts_of_buffers
from toolkit.store.database import Database

log = logging.getLogger(__name__)

# How long a cache write waits for the write lock: a lookup never waits for an import.
WRITE_WAIT_S = 0.5


class IndexCacheStore:
    """The cached matching index of one site."""

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id

    def get(self, stamp: str) -> bytearray | None:
        """The cached index's bytes, when it was built from assets of this ``stamp``
        (in one buffer, read once: see :meth:`BlobFile.read_whole`)."""
        row = self.db.connection.execute(
            "SELECT stamp FROM asset_index_cache WHERE site_id = ?", (self.site_id,)
        ).fetchone()
        if row is None or row[0] != stamp:
            return None
        try:
            stored = open_parts(
                self.db.connection, "asset_index_part", "site_id = ?", (self.site_id,)
            )
            if stored is None:
                return None
            with stored:
                return stored.read_whole()
        except self.db.errors as exc:  # replaced by another process as we read: build anew
            log.warning("cannot read the cached asset index of %s: %s", self.db.path, exc)
            return None

    def put(
        self,
        stamp: str,
        source: IO[bytes] | list[bytes | memoryview],
        *,
        wait_s: float = WRITE_WAIT_S,
    ) -> bool:
        """Keep the bytes of ``source`` (a file, or buffers to store one after the other,
        written from where they lie: see ``AssetIndex.dump_parts``) as the index of assets
        of ``stamp``; False when the file could not take them now.

        Written on a connection of its own, so it never joins a transaction the site's
        connection has open (a dry run's, or another thread's on a server).
        """
        try:
            connection = self.db.connect_again(timeout_s=wait_s)
        except self.db.errors as exc:
            log.warning("cannot cache the asset index in %s: %s", self.db.path, exc)
            return False
        try:
            self.db.begin_write(connection)
            connection.execute("DELETE FROM asset_index_part WHERE site_id = ?", (self.site_id,))
            connection.execute("DELETE FROM asset_index_cache WHERE site_id = ?", (self.site_id,))
            connection.execute(
                "INSERT INTO asset_index_cache (site_id, stamp, date_created) VALUES (?, ?, ?)",
                (self.site_id, stamp, self.db.clock()),
            )
            parts = parts_of_buffers(source) if isinstance(source, list) else parts_of(source)
            for part, data in enumerate(parts):
                connection.execute(
                    "INSERT INTO asset_index_part (site_id, part, data) VALUES (?, ?, ?)",
                    (self.site_id, part, data),
                )
            connection.execute("COMMIT")
            return True
        except self.db.errors as exc:  # busy, read-only, full: the next lookup builds again
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            log.warning("cannot cache the asset index in %s: %s", self.db.path, exc)
            return False
        finally:
            connection.close()
