"""Sites made before schema 5 kept parts of themselves in folders beside the site file.

``FILE.reports/`` held each completed report run's Parquet snapshot and
``FILE.index/`` the matching-index cache. A site is one file now, so the first
open of such a site by this toolkit reads the snapshots into the file, in one
transaction, and then removes both folders: the snapshots live in the file, and the
index cache is rebuilt into the file on the next lookup. Anything in the folders
the toolkit did not make is left where it is, with a warning.
"""

from __future__ import annotations

import logging
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.errors import StoreError
from toolkit.store.blobs import parts_of

if TYPE_CHECKING:
    from toolkit.store.database import Database

log = logging.getLogger(__name__)

_SNAPSHOT = re.compile(r"^([0-9]+)\.parquet(\.partial)?$")
_INDEX_SITE = re.compile(r"^site-[0-9]+$")


def reports_folder(path: Path) -> Path:
    return path.with_name(path.name + ".reports")


def index_folder(path: Path) -> Path:
    return path.with_name(path.name + ".index")


def absorb_side_folders(db: Database) -> None:
    """Move what the folders beside ``db``'s file hold into it; nothing when they are gone."""
    if not isinstance(db.path, Path):  # a PostgreSQL store never had side folders
        return
    reports = reports_folder(db.path)
    if reports.is_dir():
        _absorb_reports(db, reports)
    index = index_folder(db.path)
    if index.is_dir():
        _remove_if_ours(index, lambda entry: entry.is_dir() and bool(_INDEX_SITE.match(entry.name)))


def _absorb_reports(db: Database, folder: Path) -> None:
    moved = 0
    # Under the write lock: another process opening the file at the same time waits,
    # then finds the snapshots moved.
    with db.transaction() as conn:
        waiting = {
            int(row[0])
            for row in conn.execute(
                "SELECT id FROM report_instance WHERE status = 'COMPLETED' "
                "AND id NOT IN (SELECT instance_id FROM report_snapshot)"
            )
        }
        for instance_id, path in _snapshot_files(folder):
            if instance_id not in waiting:
                continue
            try:
                with path.open("rb") as handle:
                    for part, data in enumerate(parts_of(handle)):
                        conn.execute(
                            "INSERT INTO report_snapshot (instance_id, part, data) "
                            "VALUES (?, ?, ?)",
                            (instance_id, part, data),
                        )
            except OSError as exc:
                raise StoreError(
                    f"{path}: cannot read this report snapshot into the site file: {exc}"
                ) from exc
            moved += 1
    if moved:
        log.warning("moved %d report snapshots from %s into %s", moved, folder, db.path)
    # Snapshots of runs the file does not know, and half-written ones, go too.
    _remove_if_ours(folder, lambda entry: entry.is_file() and bool(_SNAPSHOT.match(entry.name)))


def _snapshot_files(folder: Path) -> list[tuple[int, Path]]:
    """The whole snapshots in ``folder`` by instance id (none when it has just gone)."""
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    found = []
    for entry in entries:
        match = _SNAPSHOT.match(entry.name)
        if match and not match.group(2):
            found.append((int(match.group(1)), entry))
    return sorted(found)


def _remove_if_ours(folder: Path, ours: Callable[[Path], bool]) -> None:
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:  # another process removed it first
        return
    for entry in entries:
        if not ours(entry):
            continue
        try:
            if entry.is_dir():
                shutil.rmtree(entry, ignore_errors=False)
            else:
                entry.unlink(missing_ok=True)
        except FileNotFoundError:
            pass
        except OSError as exc:  # left behind: harmless, the file no longer reads it
            log.warning("could not remove %s: %s", entry, exc)
    try:
        folder.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        log.warning("left %s beside the site file: it holds files the toolkit did not make", folder)
