"""The process of its own that records a large import's links: run (:func:`main`) by
:class:`~toolkit.store.link_recorder.LinkRecorder`, or as
``python -m toolkit.store.link_process``.

It reads pickled messages on its standard input and answers each on its standard output:
first ``(site file, site id)``, answered ``None`` once the file is open (or the exception
that stopped it), then ``(job id, append, links)`` for each part, answered ``None`` once
the part is recorded in its own transaction, or the exception that stopped it. It ends
at the end of its input (its parent closed it, or ended).
"""

from __future__ import annotations

import pickle
import sys
from typing import IO, Any


def answer(out: IO[bytes], value: BaseException | None) -> None:
    """Send ``value`` (an exception as it is when it pickles, else as a ``RuntimeError``
    saying what it was)."""
    try:
        data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        data = pickle.dumps(RuntimeError(f"{type(value).__name__}: {value}"))
    out.write(data)
    out.flush()


def serve(given: IO[bytes], out: IO[bytes]) -> None:
    """Record each part of ``given`` as its message comes, answering on ``out``."""
    # pandas is imported now, while the parent still works on its first pass, not when
    # the first part's links are unpickled.
    import pandas  # noqa: F401

    from toolkit.store.database import Database
    from toolkit.store.jobs import JobStore

    try:
        path, site_id = pickle.load(given)
        # The parent opened (and, if need be, migrated) the file: nothing to recover here.
        db = Database(path, recover=False, create=False)
    except EOFError:
        return
    except Exception as exc:  # the parent records the links itself
        answer(out, exc)
        return
    answer(out, None)  # ready
    with db:
        jobs = JobStore(db, site_id)
        while True:
            try:
                message: tuple[int, bool, Any] = pickle.load(given)
            except EOFError:
                return
            job_id, append, links = message
            try:
                with db.transaction() as conn:
                    jobs.record_links(job_id, links, conn=conn, append=append)
            except Exception as exc:  # the parent raises it
                answer(out, exc)
            else:
                answer(out, None)
            del links, message


def main() -> None:
    """Serve this process's standard input and output."""
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
