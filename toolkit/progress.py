"""The progress callback the library reports through; the CLI decides how to show it.

A long job reports each stage under its own label (``read FILE``, ``validate``,
``link``, ``plan``, ``write``, ``lookup``, ``wait``...): how much is done of a total
counted in a ``unit`` (rows, bytes, values, queries, jobs), and a short ``detail``
saying what it is doing now ("by address (fuzzy)", "next status check at 14:02:10").
The total is known before the work starts wherever it can be, so the CLI can show a
rate and the time left; None only where nothing can know it yet.
"""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Called as ``progress(label, done, total, unit=..., detail=...)``."""

    def __call__(
        self, label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
    ) -> None: ...


def no_progress(
    label: str, done: int, total: int | None, *, unit: str = "rows", detail: str = ""
) -> None:
    """The default: report nothing."""
