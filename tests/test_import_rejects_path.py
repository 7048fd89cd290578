"""A rejects file that cannot be written is refused before the import runs; one that fails
as it is written (a full disk) fails the job with nothing kept: it is written inside the
import's transaction, before the commit, whole or not at all."""

from __future__ import annotations

import errno
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.errors import OptionError
from toolkit.importing.pipeline import ImportRequest, ImportRunner
from toolkit.store import SiteStore

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def _import(tmp_path: Path, rejects: Path) -> tuple[int, str]:
    source = tmp_path / "facilities.csv"
    source.write_text("Code,Name,Capacity\nF1,Hall,200\nF2,Pool,lots\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        [
            *("--store", str(tmp_path / "site.sqlite"), "--rules", str(RULES), "import"),
            *(str(source), "--type", "asset", "--rule", "test-facilities"),
            *("--rejects", str(rejects)),
        ],
    )
    return result.exit_code, result.stderr


def test_a_rejects_file_under_a_file_is_refused_before_anything_is(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("x", encoding="utf-8")
    rejects = tmp_path / "notes.txt" / "rejects.csv"
    code, err = _import(tmp_path, rejects)
    assert code != 0
    assert (
        f"Error: rejects file {rejects} cannot be written: {tmp_path / 'notes.txt'} is not a "
        "folder you may write in"
    ) in err
    with sqlite3.connect(tmp_path / "site.sqlite") as conn:
        # Refused before a job is recorded: no job, no asset.
        assert conn.execute("SELECT count(*) FROM import_job").fetchone() == (0,)
        assert conn.execute("SELECT count(*) FROM asset").fetchone() == (0,)


def test_a_rejects_folder_is_refused_by_the_runner_too(site: SiteStore, tmp_path: Path) -> None:
    """The runner is called by more than the command (a local site, the job queue), which
    check no path themselves."""
    source = tmp_path / "facilities.csv"
    source.write_text("Code,Name,Capacity\nF1,Hall,200\nF2,Pool,lots\n", encoding="utf-8")
    runner = ImportRunner(site, rule_paths=[RULES])
    request = ImportRequest("asset", "test-facilities", source, rejects_path=tmp_path)
    with pytest.raises(OptionError, match=r"rejects file .* is a folder; name a file"):
        runner.run(request)
    assert site.db.connection.execute("SELECT count(*) FROM import_job").fetchone()[0] == 0
    assert site.db.connection.execute("SELECT count(*) FROM asset").fetchone()[0] == 0


def test_a_rejects_file_in_a_new_folder_is_written(tmp_path: Path) -> None:
    rejects = tmp_path / "new" / "deeper" / "rejects.csv"
    code, err = _import(tmp_path, rejects)
    assert code == 0, err
    assert rejects.read_text(encoding="utf-8").splitlines()[1].startswith("2,F2,Pool,lots,")


def test_a_rejects_file_that_fails_as_it_is_written_keeps_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rejects = tmp_path / "rejects.csv"
    rejects.write_text("an older rejects file\n", encoding="utf-8")
    real_to_csv = pd.DataFrame.to_csv

    def disk_full(frame: pd.DataFrame, path: object, **kwargs: object) -> None:
        real_to_csv(frame, path, **kwargs)  # type: ignore[call-overload]  # pandas' own keywords
        if str(path).endswith(".partial"):  # the rejects file, half written, then the disk fills
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pd.DataFrame, "to_csv", disk_full)
    code, err = _import(tmp_path, rejects)
    assert code == 1
    assert f"rejects file {rejects} could not be written (No space left on device)" in err
    with sqlite3.connect(tmp_path / "site.sqlite") as conn:
        assert conn.execute("SELECT status FROM import_job").fetchall() == [("FAILED",)]
        assert conn.execute("SELECT count(*) FROM asset").fetchone() == (0,)
    # The older file is as it was, and no half file is left beside it.
    assert rejects.read_text(encoding="utf-8") == "an older rejects file\n"
    assert [p.name for p in tmp_path.iterdir() if "rejects" in p.name] == ["rejects.csv"]
