"""The command-line frame: version, help, exit codes, shared options, broken pipes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from toolkit import __version__
from toolkit.cli import cli

ROOT = Path(__file__).resolve().parent.parent


def _all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found: list[tuple[str, ...]] = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        found.append(path)
        if isinstance(command, click.Group):
            found.extend(_all_commands(command, path))
    return found


def run_toolkit(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run the real console entry point in a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args],
        capture_output=True,
        text=True,
        check=False,
        **kwargs,  # type: ignore[arg-type]
    )


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output.strip() == f"toolkit, version {__version__}"


@pytest.mark.parametrize("command", [(), *_all_commands(cli)], ids=lambda c: " ".join(c) or "root")
def test_every_command_has_help_with_an_example(command: tuple[str, ...]) -> None:
    result = CliRunner().invoke(cli, [*command, "--help"])
    assert result.exit_code == 0, result.output
    assert re.search(r"Examples?:", result.output), f"no example in help of {command}"
    assert "toolkit" in result.output.split("Example", 1)[1]


def test_unknown_command_is_a_usage_error_with_status_2() -> None:
    result = run_toolkit("no-such-command")
    assert result.returncode == 2
    assert "No such command" in result.stderr


def test_readme_test_command_is_what_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    ci_lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    command = ci_lines[-1].strip()
    assert command in readme, "README's test command and .ci/run have drifted apart"


def test_a_closed_pipe_ends_quietly_with_status_0(tmp_path: Path) -> None:
    # Far more output than a pipe buffer holds, so the write really hits the closed pipe.
    sample = ROOT / "sample_data" / "damage_assessments.csv"
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "--json", "inspect", str(sample), "--head", "1000"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
    )
    assert process.stdout is not None
    process.stdout.readline()
    process.stdout.close()  # as `| head -1` does
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert b"Traceback" not in err


def test_listing_rules_creates_no_site_file(tmp_path: Path) -> None:
    result = run_toolkit("rules", "list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "damage-assessments" in result.stdout
    assert list(tmp_path.iterdir()) == []


def _toolkit_entry_point() -> str:
    """The installed `toolkit` script beside this Python (shells complete that name)."""
    script = Path(sys.executable).parent / "toolkit"
    assert script.exists(), f"no toolkit entry point at {script}; pip install -e ."
    return str(script)


@pytest.mark.parametrize(
    ("shell", "marker"),
    [
        ("bash", "complete -o nosort -F _toolkit_completion toolkit"),
        ("zsh", "#compdef toolkit"),
        ("fish", "complete --no-files --command toolkit"),
    ],
)
def test_shell_completion_scripts_are_printed(shell: str, marker: str) -> None:
    result = subprocess.run(
        [_toolkit_entry_point()],
        env={**os.environ, "_TOOLKIT_COMPLETE": f"{shell}_source"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert marker in result.stdout
    assert "_TOOLKIT_COMPLETE" in result.stdout


def test_completion_offers_commands_options_and_rule_names() -> None:
    def complete(words: str) -> list[str]:
        result = subprocess.run(
            [_toolkit_entry_point()],
            env={
                **os.environ,
                "_TOOLKIT_COMPLETE": "bash_complete",
                "COMP_WORDS": words,
                "COMP_CWORD": str(len(words.split()) - (0 if words.endswith(" ") else 1)),
            },
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        return [line.split(",", 1)[1] for line in result.stdout.splitlines()]

    assert complete("toolkit import-") == ["import-status"]
    assert complete("toolkit import data.csv --rule dam") == ["damage-assessments"]
    assert complete("toolkit rules show ") == [
        "assets-csv", "damage-assessments", "property-assets", "users",
    ]  # fmt: skip
    assert complete("toolkit import data.csv --format g") == ["geojson", "gpkg"]
    assert "--store" in complete("toolkit import-status --st")
