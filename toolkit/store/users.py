"""Users of one site: imports of users, and the records authentication reads."""

from __future__ import annotations

import sqlite3
from typing import TYPE_CHECKING

from toolkit.lazy import lazy
from toolkit.model.fieldjson import as_python, fields_json, id_list
from toolkit.store.records import USER_KIND, Actor, RecordTable
from toolkit.store.sql import json_path, one_row

if TYPE_CHECKING:
    import pandas as pd
else:
    pd = lazy("pandas")

if TYPE_CHECKING:  # the plan is the import job's; the store only reads it
    from toolkit.importing.overwrite import OverwritePlan

# Import field name -> user column; any other field of a user rule goes to ``extra``.
USER_COLUMNS = {
    "id": "id",
    "username": "username",
    "firstName": "first_name",
    "lastName": "last_name",
    "email": "email",
    "phone": "phone",
    "organisation": "organisation",
    "positions": "positions",
    "status": "status",
}


def positions_json(column: pd.Series) -> pd.Series:
    """``a;b`` lists as JSON arrays of strings, escaped on the whole column."""
    text = column.astype("string").str.replace("\\", "\\\\", regex=False)
    text = text.str.replace('"', '\\"', regex=False).str.strip(";")
    arrays = '["' + text.str.replace(";", '","', regex=False) + '"]'
    return arrays.where(text.notna() & (text != ""), None)


class UserStore:
    """The users of one site."""

    def __init__(self, connection: sqlite3.Connection, site_id: int) -> None:
        self.connection = connection
        self.site_id = site_id
        self.table = RecordTable(USER_KIND, site_id)

    def active_keys(self, key: str) -> pd.DataFrame:
        params: list[object] = []
        if key in USER_COLUMNS:
            key_sql = f"CAST({USER_COLUMNS[key]} AS TEXT)"
        else:
            key_sql = "CAST(json_extract(extra, ?) AS TEXT)"
            params.append(json_path(key))
        rows = self.connection.execute(
            f"SELECT id, {key_sql} FROM user WHERE site_id = ? AND status > 0 ORDER BY id",
            [*params, self.site_id],
        ).fetchall()
        return pd.DataFrame(
            {"id": [r[0] for r in rows], "key": pd.array([r[1] for r in rows], dtype="string")}
        )

    def write_import(
        self,
        conn: sqlite3.Connection,
        plan: OverwritePlan,
        values: pd.DataFrame,
        cleared: pd.DataFrame,
        actor: Actor,
        now: int,
        *,
        tag: str | None,
    ) -> int:
        """Apply an import plan of users; returns how many updated users really changed."""
        columns = [c for c in values.columns if c in USER_COLUMNS and c != "id"]
        extra = [c for c in values.columns if c not in USER_COLUMNS]
        prepared = values.copy()
        if "positions" in prepared:
            prepared["positions"] = positions_json(prepared["positions"])
        self.table.retire_many(conn, id_list(plan.retirements), actor, now)
        inserts = prepared.iloc[plan.inserts]
        if len(inserts):
            data: dict[str, object] = {}
            for c in columns:
                cells = as_python(inserts[c])
                # A new user without a status is active; without positions, has none.
                if c == "status":
                    cells = [1 if v is None else v for v in cells]
                elif c == "positions":
                    cells = ["[]" if v is None else v for v in cells]
                data[USER_COLUMNS[c]] = cells
            data["extra"] = fields_json(inserts[extra]).tolist()
            data["tags"] = f'["{tag}"]' if tag else "[]"
            self.table.insert_many(conn, data, len(inserts), actor, now)
        changed = 0
        if len(plan.updates):
            updates = prepared.iloc[plan.updates]
            ids = id_list(plan.update_ids)
            changed = self.table.update_many(
                conn,
                ids,
                fields_json(updates[extra], cleared.iloc[plan.updates][extra]).tolist(),
                {USER_COLUMNS[c]: as_python(updates[c]) for c in columns if c != "username"},
                actor,
                now,
            )
            if tag:
                self.table.add_tag(conn, ids, tag)
        return changed

    def get(self, user_id: int) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                "SELECT * FROM user WHERE id = ? AND site_id = ?", (user_id, self.site_id)
            )
        )

    def by_username(self, username: str) -> sqlite3.Row | None:
        return one_row(
            self.connection.execute(
                "SELECT * FROM user WHERE username = ? AND site_id = ?", (username, self.site_id)
            )
        )

    def all(self) -> list[sqlite3.Row]:
        return self.connection.execute(
            "SELECT * FROM user WHERE site_id = ? ORDER BY id", (self.site_id,)
        ).fetchall()
