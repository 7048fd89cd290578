"""Overlapping an import's reading with its writing, on two cores.

An asset import's parts are read (GDAL, PROJ and shapely release the GIL) in a thread
one part ahead of the write, which inserts each part as it comes (SQLite releases the GIL
while it steps): :func:`read_ahead`. The write is still one transaction, opened before the
first part is inserted and ended after the last (:class:`EarlyTransaction`): a failure
anywhere in between rolls every part back, so the import stays all or nothing.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Generator, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")
C = TypeVar("C")

_END = object()

log = logging.getLogger(__name__)


def read_ahead(items: Iterator[T]) -> Generator[T, None, None]:
    """``items`` in order, each made in a thread of its own while the caller works on the
    one before (at most one waits). The thread starts at once, so the first item is made
    while the caller still readies itself. An exception making an item is raised here,
    where the caller asks for it. When the caller stops asking (it is done, failed, or
    refused the import) and closes this generator, or lets it go, the thread ends and
    ``items`` is closed in it (a generator's ``finally`` and ``with`` blocks run: its files
    are closed), and this returns only once that thread has ended: nothing is left
    reading."""
    reading = _read_ahead(items)
    next(reading)  # the thread has started: from here closing the generator stops it
    return cast(Generator[T, None, None], reading)


def _read_ahead(items: Iterator[T]) -> Generator[T | None, None, None]:
    ready: queue.Queue[tuple[object, BaseException | None]] = queue.Queue(maxsize=1)
    stop = threading.Event()

    def put(entry: tuple[object, BaseException | None]) -> bool:
        while not stop.is_set():
            try:
                ready.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def run() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    break  # the caller stopped asking
            else:
                put((_END, None))
                return
        except BaseException as exc:  # handed to the caller, who raises it
            put((_END, exc))
            return
        _close(items)

    thread = threading.Thread(target=run, name="toolkit-read-ahead", daemon=True)
    thread.start()
    try:
        yield None  # (read_ahead's own: the caller's first ``next`` is the first item)
        while True:
            item, error = ready.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item  # type: ignore[misc]  # every other entry is an item of ``items``
    finally:
        stop.set()
        thread.join()


def _close(items: Iterator[object]) -> None:
    """Close a source its reader stopped early (a generator's ``finally`` and ``with``
    blocks run: its files are closed), in the thread that ran it (a generator cannot be
    closed while another thread runs it). Its caller has gone on to its own error or
    refusal, so a failure to close is logged, not raised."""
    close = getattr(items, "close", None)
    if close is None:
        return
    try:
        close()
    except Exception:
        log.warning("closing the parts read ahead failed", exc_info=True)


class EarlyTransaction(Generic[C]):
    """A write transaction begun before its last write is known and ended by
    :meth:`finish` (the usual ``with`` around the final writes) or :meth:`abort`."""

    def __init__(self, begin: Callable[[], AbstractContextManager[C]]) -> None:
        self._begin = begin
        self._stack: ExitStack | None = None
        self._conn: C | None = None

    @property
    def conn(self) -> C:
        """The connection, the transaction begun on first use."""
        if self._conn is None:
            self._stack = ExitStack()
            self._conn = self._stack.enter_context(self._begin())
        return self._conn

    @property
    def begun(self) -> bool:
        return self._conn is not None

    @contextmanager
    def finish(self) -> Iterator[C]:
        """The connection, for the last writes; leaving commits (or, on an exception or
        when the transaction was begun not to commit, rolls back) every write."""
        conn = self.conn
        stack, self._stack, self._conn = self._stack, None, None
        assert stack is not None
        with stack:
            yield conn

    def abort(self, error: BaseException) -> None:
        """Roll back every write made so far (``error`` is why)."""
        stack, self._stack, self._conn = self._stack, None, None
        if stack is not None:
            stack.__exit__(type(error), error, error.__traceback__)


def transaction_of(early: EarlyTransaction[C] | None, begin: Callable[[], Any]) -> Any:
    """The context of an import's write: the early transaction's end, else a new one."""
    return early.finish() if early is not None else begin()
