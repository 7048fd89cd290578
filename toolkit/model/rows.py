"""``StoredRow``: a stored record's columns by name, as the shapes read them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol


class StoredRow(Protocol):
    """A row of the site file: ``sqlite3.Row`` (which is no ``Mapping``), or a dict.

    Column values are whatever SQLite holds, so they are ``Any`` here, where they enter.
    """

    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Iterable[str]: ...
