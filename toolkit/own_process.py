"""A toolkit module's ``main`` run in a process of its own (an import's link recorder, its
fuzzy pairing): started with this interpreter, importing this same toolkit, talked to over
its standard input and output, and ended."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from pathlib import Path
from typing import IO

import toolkit

# The program: it imports this same toolkit, from the folder this process found it in (put
# first unless its own path has it: a site-packages folder put first would come before the
# standard library), and calls the module's ``main`` with the arguments given.
_PROGRAM = (
    "import sys; found = sys.argv[1]; sys.path[:0] = [] if found in sys.path else [found]; "
    "from {module} import main; main(*sys.argv[2:])"
)


def start_main(module: str, *args: str, stderr: IO[bytes] | None = None) -> subprocess.Popen[bytes]:
    """``module.main(*args)`` in a new process, its standard input and output piped to this
    one (its errors to ``stderr``, else this process's); raises ``OSError`` if it cannot
    start."""
    found = str(Path(toolkit.__file__).resolve().parent.parent)
    return subprocess.Popen(
        [sys.executable, "-c", _PROGRAM.format(module=module), found, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
    )


def end(process: subprocess.Popen[bytes], *, wait_s: float) -> bool:
    """Close the process's pipes (the end of its input ends it), wait up to ``wait_s``
    seconds for it to end and kill it if it has not (0: at once). True when it ended by
    itself."""
    for stream in (process.stdin, process.stdout):
        if stream is not None:
            with contextlib.suppress(OSError):  # it had ended
                stream.close()
    try:
        if wait_s <= 0:
            raise subprocess.TimeoutExpired(process.args, 0)
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return False
    return True
