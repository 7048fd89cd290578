"""The one exception hierarchy of the toolkit.

Every message names the file, row, column or value at fault and, where there
is one, the allowed set, so the user can act on it without a traceback.
"""

from __future__ import annotations


class ToolkitError(Exception):
    """Base of every error the toolkit raises on purpose; the CLI prints it and exits 1."""

    exit_code: int = 1


class SourceError(ToolkitError):
    """A file cannot be read at all (not a row-level problem)."""


class OptionError(ToolkitError):
    """An option or parameter has a value outside its allowed set."""


class MatchingError(ToolkitError):
    """The asset index or a lookup request cannot be used as given."""


class StoreError(ToolkitError):
    """The site's store cannot be opened, migrated or written."""


class NoSiteError(StoreError):
    """There is no site where one was asked for, and the command may not make one."""


class DiskFullError(StoreError):
    """The disk holding the site is full; the write was rolled back (never names a path)."""


class NotFoundError(ToolkitError):
    """A record does not exist in this site (or belongs to another site)."""


class AuthenticationError(ToolkitError):
    """Credentials or a token are missing or wrong (HTTP 401); never says which part."""


class PermissionDeniedError(ToolkitError):
    """Authenticated, but not allowed to do this (HTTP 403)."""


class RemoteError(ToolkitError):
    """A server answered with an error; carries its HTTP status and message."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status
