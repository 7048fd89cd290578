"""Mode fuzzy's pairing of a large job's texts in a process of its own: :class:`ProcessPairing`.

In a thread (``FuzzyPairing``) the pairing of each part's texts shares the GIL with the
linking of the next part: at a million rows a part's pairing took 1.0-1.3 s beside the
linking for 0.6 s of its own CPU, and the first pass waited 1.5-1.8 s after its last
part for the pairing to end. A process of its own has a GIL of its own. It is sent what
pairing takes of the index once (``PairingState.portable``: 80 MiB at a million assets)
and each part's new texts as a file; it writes the answers (``FuzzyAnswers``) to a file:
the pipes carry only names. Should the process fail, the texts are paired here, as the
thread pairs them, and a warning says why.
"""

from __future__ import annotations

import contextlib
import logging
import pickle
import subprocess
import sys
from pathlib import Path
from typing import IO, TYPE_CHECKING

from toolkit.allocator import heap_kept_for_reuse
from toolkit.matching.modes import FuzzyAnswers, FuzzyPairing, PairingState
from toolkit.own_process import end, start_main

if TYPE_CHECKING:
    import pandas as pd

    from toolkit.matching import AssetIndex
    from toolkit.matching.options import LookupOptions

log = logging.getLogger(__name__)

# From this many rows a job's texts are paired by a process of its own: its start takes
# ~0.5 s of CPU, and sending it what it needs ~0.1 s.
OWN_PROCESS_ROWS = 500_000


class ProcessPairing:
    """``FuzzyPairing``'s ``add`` and ``answers``, the texts paired by a process of its own
    (begun at once) while the caller links; its files, and the pairs, in ``folder``."""

    def __init__(self, index: AssetIndex, options: LookupOptions, folder: Path) -> None:
        state = PairingState.of(index, options)
        # The texts taken (each part's new ones), paired here only if the process fails.
        self._here = FuzzyPairing.of_state(state, beside=False, folder=folder / "here")
        self._folder = folder
        self.peak_mib: float | None = None  # the process's peak memory, once it answered
        folder.mkdir(parents=True, exist_ok=True)
        with (folder / "state.pickle").open("wb") as handle:
            pickle.dump(state.portable(), handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._log = (folder / "process.log").open("wb")
        self._failure: str | None = None
        self._process: subprocess.Popen[bytes] | None = None
        try:
            self._process = _start(folder, self._log)
        except OSError as exc:
            self._failure = f"process could not start: {exc}"

    def __enter__(self) -> ProcessPairing:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop(wait=False)  # the job ended before its answers: none are needed
        self._log.close()

    def add(self, texts: pd.Series) -> None:
        """Send the process the texts among ``texts`` not added before."""
        distinct = self._here.taken(texts)
        if distinct is None or self._failure is not None:
            return
        path = self._folder / f"texts-{len(self._here.taken_texts) - 1:05d}.pickle"
        with path.open("wb") as handle:
            pickle.dump(distinct.to_numpy(), handle, protocol=pickle.HIGHEST_PROTOCOL)
        self._send(("add", str(path)))

    def answers(self) -> FuzzyAnswers:
        """The process's answers to every text added; if it failed, the texts are paired
        and answered here."""
        if self._failure is None:
            self._send(("answers", str(self._folder / "answers.pickle")))
        path = self._reply() if self._failure is None else None
        self._stop(wait=True)
        if path is not None:
            with path.open("rb") as handle:
                answers: FuzzyAnswers = pickle.load(handle)
            return answers
        log.warning("mode fuzzy pairs the texts in this process: its own %s", self._failure)
        here = FuzzyPairing.of_state(self._here.state, beside=False, folder=self._folder / "here")
        for texts in self._here.taken_texts:
            here.add(texts)
        return here.answers()

    def _send(self, message: tuple[str, str]) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        try:
            pickle.dump(message, process.stdin)
            process.stdin.flush()
        except OSError:
            self._failure = self._ended(process)

    def _reply(self) -> Path | None:
        """Where the process wrote the answers, or None (the failure noted)."""
        process = self._process
        assert process is not None and process.stdout is not None
        try:
            kind, said, peak = pickle.load(process.stdout)
        except (OSError, EOFError, pickle.UnpicklingError, ValueError):
            self._failure = self._ended(process)
            return None
        if kind != "answers":
            self._failure = f"process failed: {said}"
            return None
        self.peak_mib = peak
        return Path(said)

    def _ended(self, process: subprocess.Popen[bytes]) -> str:
        """Why the process stopped answering: its exit status and the last line it wrote."""
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)
        status = process.poll()
        self._log.flush()
        lines = (self._folder / "process.log").read_bytes().decode(errors="replace").splitlines()
        return (
            "process ended"
            + ("" if status is None else f" (exit status {status})")
            + (f": {lines[-1]}" if lines else "")
        )

    def _stop(self, *, wait: bool) -> None:
        """End the process: the end of its input ends it once it has answered (``wait``);
        otherwise, or if it does not end, it is stopped."""
        process, self._process = self._process, None
        if process is not None:
            end(process, wait_s=5 if wait else 0)


def _start(folder: Path, errors: IO[bytes]) -> subprocess.Popen[bytes]:
    """The pairing process of the job folder ``folder``, writing its errors to ``errors``."""
    return start_main(__name__, str(folder), stderr=errors)


def main(folder: str) -> None:
    """The pairing process: reads the state from ``folder``, pairs each batch of texts it
    is told of (``("add", path)``), and on ``("answers", path)`` writes the answers there
    and says so, with its peak memory. A failure is told as ``("error", why, None)``."""
    reply, sys.stdout = sys.stdout.buffer, sys.stderr  # the pipe carries replies alone
    try:
        with (Path(folder) / "state.pickle").open("rb") as handle:
            state: PairingState = pickle.load(handle)
        pairing = FuzzyPairing.of_state(state, beside=True, folder=Path(folder) / "pairs")
        # As in the job's own process: without it, each batch's arrays were faulted in
        # afresh page by page (a part's pairing: 0.75-0.8 s of CPU, 0.65 with it).
        with heap_kept_for_reuse():
            _serve(pairing, sys.stdin.buffer, reply)
    except Exception as exc:  # told to the job, which pairs the texts itself
        log.exception("pairing failed")
        with contextlib.suppress(OSError):
            pickle.dump(("error", f"{type(exc).__name__}: {exc}", None), reply)
            reply.flush()
        raise SystemExit(1) from exc


def _serve(pairing: FuzzyPairing, orders: IO[bytes], reply: IO[bytes]) -> None:
    """Pair each batch of texts ``orders`` names, until the answers are asked for."""
    import pandas as pd

    while True:
        try:
            kind, path = pickle.load(orders)
        except EOFError:
            return  # the job ended (or failed) before asking for answers
        if kind == "add":
            with Path(path).open("rb") as handle:
                texts = pickle.load(handle)
            Path(path).unlink()
            pairing.add(pd.Series(texts, dtype=object))
            continue
        answers = pairing.answers()
        with Path(path).open("wb") as handle:
            pickle.dump(answers, handle, protocol=pickle.HIGHEST_PROTOCOL)
        pickle.dump(("answers", path, _peak_mib()), reply)
        reply.flush()
        return


def _peak_mib() -> float | None:
    """This process's peak memory (VmHWM, MiB) where Linux tells it."""
    try:
        status = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    for line in status:
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return None
