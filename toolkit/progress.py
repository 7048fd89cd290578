"""The progress callback the library reports through; the CLI decides how to show it."""

from __future__ import annotations

from typing import Protocol


class Progress(Protocol):
    """Called as ``progress(label, done, total)``; ``total`` is None when unknown."""

    def __call__(self, label: str, done: int, total: int | None) -> None: ...


def no_progress(label: str, done: int, total: int | None) -> None:
    """The default: report nothing."""
