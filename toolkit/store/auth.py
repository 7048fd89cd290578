"""What authentication reads and the admin commands write: credentials, duty, API keys.

Only hashes of passwords and API keys are stored (the hashing is the caller's,
see ``toolkit.site.credentials``). Every change to a user is audited, with secrets
noted as ``replaced``, never their value or hash.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping

from toolkit.store.database import Database
from toolkit.store.records import USER_KIND, Actor, RecordTable
from toolkit.store.sql import one_row

# Columns the admin commands may set on a user, besides credentials.
USER_FLAGS = ("approved", "terms_accepted", "status", "admin")


class AuthStore:
    """Users' credentials, duty and API keys of one site."""

    def __init__(self, db: Database, site_id: int) -> None:
        self.db = db
        self.site_id = site_id
        self.users = RecordTable(USER_KIND, site_id)

    @property
    def connection(self) -> sqlite3.Connection:
        return self.db.connection

    # --- users ----------------------------------------------------------------------------

    def add_user(self, columns: Mapping[str, object], actor: Actor) -> int:
        """Insert one user (audited); returns its id."""
        with self.db.transaction() as conn:
            return self.users.insert_many(conn, columns, 1, actor, self.db.clock())[0]

    def update_user(self, user_id: int, columns: Mapping[str, object], actor: Actor) -> None:
        """Set columns of a user; secret columns are audited as ``replaced``."""
        if not columns:
            return
        now = self.db.clock()
        with self.db.transaction() as conn:
            before = conn.execute(
                f"SELECT {', '.join(columns)} FROM user WHERE id = ? AND site_id = ?",
                (user_id, self.site_id),
            ).fetchone()
            sets = ", ".join(f"{c} = ?" for c in columns)
            conn.execute(
                f"UPDATE user SET {sets}, date_modified = ? WHERE id = ? AND site_id = ?",
                [*columns.values(), now, user_id, self.site_id],
            )
            shown = {
                c: ("replaced" if c in ("password_hash", "totp_secret") else v)
                for c, v in columns.items()
            }
            was = {
                c: ("replaced" if c in ("password_hash", "totp_secret") and v else v)
                for c, v in zip(columns, before, strict=True)
            }
            self._audit(conn, "user", user_id, "update", {"before": was, "patch": shown}, actor)

    def _audit(
        self,
        conn: sqlite3.Connection,
        record_type: str,
        record_id: int,
        action: str,
        changes: Mapping[str, object],
        actor: Actor,
        *,
        event_id: int | None = None,
    ) -> None:
        conn.execute(
            "INSERT INTO audit_log (site_id, date_created, user_id, action, record_type, "
            "record_id, event_id, changes, message) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                self.site_id,
                self.db.clock(),
                actor.user_id,
                action,
                record_type,
                record_id,
                event_id,
                json.dumps(changes, ensure_ascii=False),
                actor.message,
            ),
        )

    def use_totp_step(self, user_id: int, step: int) -> bool:
        """Record that a login used TOTP ``step``; False when it (or a later one) was used."""
        with self.db.transaction() as conn:
            # One conditional UPDATE, so two logins racing with the same code cannot both win.
            return bool(
                conn.execute(
                    "UPDATE user SET totp_last_step = ? WHERE id = ? AND site_id = ? "
                    "AND (totp_last_step IS NULL OR totp_last_step < ?)",
                    (step, user_id, self.site_id, step),
                ).rowcount
            )

    # --- duty -----------------------------------------------------------------------------

    def put_on_duty(self, user_id: int, event_id: int, position: str, actor: Actor) -> bool:
        """Put the user on duty in the event; False when already on duty in that position."""
        with self.db.transaction() as conn:
            added = conn.execute(
                "INSERT OR IGNORE INTO duty (user_id, event_id, position, date_created) "
                "VALUES (?, ?, ?, ?)",
                (user_id, event_id, position, self.db.clock()),
            ).rowcount
            if added:
                self._audit(
                    conn,
                    "duty",
                    user_id,
                    "create",
                    {"userId": user_id, "eventId": event_id, "position": position},
                    actor,
                    event_id=event_id,
                )
        return bool(added)

    def take_off_duty(self, user_id: int, event_id: int, actor: Actor) -> int:
        """End every duty of the user in the event; returns how many ended."""
        with self.db.transaction() as conn:
            ended = conn.execute(
                "DELETE FROM duty WHERE user_id = ? AND event_id = ?", (user_id, event_id)
            ).rowcount
            if ended:
                self._audit(
                    conn,
                    "duty",
                    user_id,
                    "retire",
                    {"userId": user_id, "eventId": event_id},
                    actor,
                    event_id=event_id,
                )
        return ended

    def duty_events(self, user_id: int) -> set[int]:
        """The events the user is on duty in (in any position)."""
        rows = self.connection.execute(
            "SELECT DISTINCT d.event_id FROM duty d JOIN user u ON u.id = d.user_id "
            "WHERE d.user_id = ? AND u.site_id = ?",
            (user_id, self.site_id),
        ).fetchall()
        return {int(r[0]) for r in rows}

    def duties(self, user_id: int) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT event_id, position, date_created FROM duty WHERE user_id = ? "
            "ORDER BY event_id, position",
            (user_id,),
        ).fetchall()

    # --- API keys -------------------------------------------------------------------------

    def add_api_key(self, user_id: int, prefix: str, key_hash: str, label: str | None) -> int:
        with self.db.transaction() as conn:
            cursor = conn.execute(
                "INSERT INTO api_key (user_id, prefix, key_hash, label, date_created) "
                "VALUES (?, ?, ?, ?, ?)",
                (user_id, prefix, key_hash, label, self.db.clock()),
            )
            key_id = int(cursor.lastrowid or 0)
            self._audit(
                conn,
                "api_key",
                key_id,
                "create",
                {"userId": user_id, "prefix": prefix, "label": label},
                Actor(),
            )
        return key_id

    def api_key(self, prefix: str) -> sqlite3.Row | None:
        """The key with this public prefix, if it belongs to a user of this site."""
        return one_row(
            self.connection.execute(
                "SELECT k.* FROM api_key k JOIN user u ON u.id = k.user_id "
                "WHERE k.prefix = ? AND u.site_id = ?",
                (prefix, self.site_id),
            )
        )

    def api_key_by_id(self, key_id: int) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                "SELECT k.* FROM api_key k JOIN user u ON u.id = k.user_id "
                "WHERE k.id = ? AND u.site_id = ?",
                (key_id, self.site_id),
            )
        )

    def api_keys(self, user_id: int | None = None) -> list[sqlite3.Row]:
        sql = (
            "SELECT k.id, k.user_id, u.username, k.prefix, k.label, k.revoked, k.date_created, "
            "k.date_revoked FROM api_key k JOIN user u ON u.id = k.user_id WHERE u.site_id = ?"
        )
        params: list[object] = [self.site_id]
        if user_id is not None:
            sql += " AND k.user_id = ?"
            params.append(user_id)
        return self.connection.execute(sql + " ORDER BY k.id", params).fetchall()

    def revoke_api_key(self, key_id: int, actor: Actor) -> bool:
        """Revoke a key; False when it was already revoked."""
        with self.db.transaction() as conn:
            changed = conn.execute(
                "UPDATE api_key SET revoked = 1, date_revoked = ? WHERE id = ? AND revoked = 0",
                (self.db.clock(), key_id),
            ).rowcount
            if changed:
                self._audit(conn, "api_key", key_id, "retire", {"revoked": [0, 1]}, actor)
        return bool(changed)
