"""``-v`` is ``--verbose`` on every command, before or after its name, and with it an
error shows its traceback on stderr: a library error, and an internal one (a bug)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from toolkit.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"

# A real run of the command line in which reading a file fails the way a bug would: the
# reader raises an error the toolkit does not expect.
FAULTY_READER = """
import sys
import toolkit.sources
import toolkit.sources.chunks

def read_source(*args, **kwargs):
    raise RuntimeError("the reader broke")

# inspect reads a file in parts (read_chunks); other commands read it whole.
toolkit.sources.read_source = read_source
toolkit.sources.chunks.read_chunks = read_source
from toolkit.cli import main
sys.argv[0] = "toolkit"
main(sys.argv[1:])
"""


def _every_command(
    command: click.Command, path: tuple[str, ...] = ("toolkit",)
) -> list[tuple[str, click.Command]]:
    found = [(" ".join(path), command)]
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            found += _every_command(sub, (*path, name))
    return found


def test_every_command_and_group_takes_v_as_verbose() -> None:
    commands = _every_command(cli)
    assert len(commands) > 40
    for name, command in commands:
        flags = [p for p in command.params if "-v" in p.opts]
        assert len(flags) == 1, name
        assert flags[0].name == "verbose" and "--verbose" in flags[0].opts, name


@pytest.mark.parametrize("where", ["before", "after"])
def test_v_shows_the_traceback_of_a_library_error(tmp_path: Path, where: str) -> None:
    missing = tmp_path / "missing.sqlite"
    command = ["asset", "list"]
    args = (
        ["--store", str(missing), "-v", *command]
        if where == "before"
        else ["--store", str(missing), *command, "-v"]
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    assert "Traceback (most recent call last):" in result.stderr
    assert "toolkit.errors.NoSiteError" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith(f"Error: no site at {missing}")
    quiet = CliRunner().invoke(cli, ["--store", str(missing), *command])
    assert quiet.exit_code == 1
    assert "Traceback" not in quiet.stderr
    assert quiet.stderr.startswith(f"Error: no site at {missing}")
    assert not missing.exists()


def _faulty(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", FAULTY_READER, *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


@pytest.mark.parametrize(
    "args",
    [
        ["inspect", str(SAMPLE / "assets.csv"), "-v"],
        ["-v", "inspect", str(SAMPLE / "assets.csv")],
        ["inspect", "-qv", str(SAMPLE / "assets.csv")],
        ["inspect", str(SAMPLE / "assets.csv"), "--verbose"],
    ],
    ids=["after", "before", "combined", "long"],
)
def test_v_shows_the_traceback_of_an_internal_error(args: list[str]) -> None:
    result = _faulty(*args)
    assert result.returncode == 1
    assert result.stdout == ""
    assert "Traceback (most recent call last):" in result.stderr
    assert "RuntimeError: the reader broke" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1] == (
        "Error: an unexpected internal error occurred (RuntimeError: the reader broke); the "
        "traceback is above: please report it"
    )


def test_without_v_an_internal_error_is_one_line() -> None:
    result = _faulty("inspect", str(SAMPLE / "assets.csv"))
    assert result.returncode == 1
    assert result.stderr == (
        "Error: an unexpected internal error occurred; run again with -v (--verbose) for the "
        "traceback and report it.\n"
    )
