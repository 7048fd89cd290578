"""A rejects file that cannot be written is refused before the import runs: it is written
after the import's transaction commits, so finding out then left a job recorded FAILED
("nothing was written") whose rows were stored."""

from __future__ import annotations

import sqlite3
from pathlib import Path

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
