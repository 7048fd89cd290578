"""Counting the indexes a store sets aside for a bulk insert (``set_aside_indexes``)."""

from __future__ import annotations

from typing import Any


def counted_set_aside(store: type, counts: list[int]) -> Any:
    """``store.set_aside_indexes``, noting in ``counts`` how many it set aside."""
    real = store.set_aside_indexes

    def counted(self: Any, conn: Any, adding: int) -> list[str]:
        statements: list[str] = real(self, conn, adding)
        counts.append(len(statements))
        return statements

    return counted
