"""Global options mean the same before or after a command's name, on every command."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.cli.context import GLOBAL_OPTIONS

RULES = Path(__file__).resolve().parent / "fixtures_rules"


def _every_command(
    group: click.Group, prefix: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = []
    for name, command in group.commands.items():
        path = (*prefix, name)
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(_every_command(command, path))
    return found


COMMANDS = _every_command(cli)
GLOBAL_NAMES = [option.attribute for option in GLOBAL_OPTIONS]


def _globals_of(command: click.Command) -> dict[str, click.Option]:
    return {
        p.name: p for p in command.params if isinstance(p, click.Option) and p.name in GLOBAL_NAMES
    }


def test_the_commands_are_all_found() -> None:
    names = {" ".join(path) for path, _ in COMMANDS}
    # A sample of each kind: a top-level command, a group, a subcommand, a hidden one.
    assert {"import-status", "item", "item list", "report work", "serve"} <= names
    assert len(COMMANDS) > 40


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_takes_every_global_option_after_its_name(
    path: tuple[str, ...], tmp_path: Path
) -> None:
    after = [
        *("--store", str(tmp_path / "x.sqlite"), "--site", "elsewhere"),
        *("--url", "http://127.0.0.1:9", "--profile", "nightly", "--rules", str(RULES)),
        *("--json", "-q", "--quiet", "-v", "--verbose"),
    ]
    # An unknown option last: the parser names the first option it does not know, so the
    # error names it only if every global option before it was understood.
    result = CliRunner().invoke(cli, [*path, *after, "--no-such-option"])
    assert result.exit_code == 2
    assert "No such option '--no-such-option'" in result.output, result.output


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=" ".join)
def test_every_command_declares_the_global_options_as_the_top_level_does(
    path: tuple[str, ...],
) -> None:
    command = dict(COMMANDS)[path]
    top, here = _globals_of(cli), _globals_of(command)
    assert set(here) == set(GLOBAL_NAMES)
    declared = [opt for p in command.params for opt in (*p.opts, *p.secondary_opts)]
    assert len(declared) == len(set(declared)), f"an option is declared twice on {path}"
    for name, option in top.items():
        mine = here[name]
        assert mine.opts == option.opts and mine.secondary_opts == option.secondary_opts
        assert type(mine.type) is type(option.type)
        assert (mine.multiple, mine.is_flag, mine.help) == (
            option.multiple,
            option.is_flag,
            option.help,
        )


def _site_with_an_event(tmp_path: Path, name: str = "a.sqlite") -> Path:
    store = tmp_path / name
    result = CliRunner().invoke(cli, ["--store", str(store), "event", "create", "Flood"])
    assert result.exit_code == 0, result.output
    return store


def test_store_after_the_command_is_the_store_used(tmp_path: Path) -> None:
    store = _site_with_an_event(tmp_path)
    runner = CliRunner()
    before = runner.invoke(cli, ["--store", str(store), "--json", "event", "list"])
    after = runner.invoke(cli, ["event", "list", "--store", str(store), "--json"])
    assert before.exit_code == after.exit_code == 0, after.output
    assert json.loads(after.output)["models"]["1"]["name"] == "Flood"
    assert after.output == before.output
    status = runner.invoke(cli, ["import-status", "--store", str(store), "--json"])
    assert status.exit_code == 0, status.output
    assert json.loads(status.output) == []


def test_an_option_after_the_command_overrides_the_environment(tmp_path: Path) -> None:
    store = _site_with_an_event(tmp_path)
    result = CliRunner().invoke(
        cli,
        ["event", "get", "1", "--store", str(store), "--json"],
        env={"TOOLKIT_STORE": str(tmp_path / "other.sqlite")},
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["name"] == "Flood"


def test_site_after_the_command_chooses_the_tenancy(tmp_path: Path) -> None:
    store = tmp_path / "a.sqlite"
    runner = CliRunner()
    made = runner.invoke(cli, ["event", "create", "North", "--store", str(store), "--site", "n"])
    assert made.exit_code == 0, made.output
    north = runner.invoke(cli, ["event", "list", "--store", str(store), "--site", "n", "--json"])
    assert [e["name"] for e in json.loads(north.output)["models"].values()] == ["North"]
    other = runner.invoke(cli, ["--store", str(store), "--site", "s", "event", "create", "South"])
    assert other.exit_code == 0, other.output
    south = runner.invoke(cli, ["--store", str(store), "event", "list", "--site", "s", "--json"])
    assert [e["name"] for e in json.loads(south.output)["models"].values()] == ["South"]


def test_rules_given_before_and_after_add_up() -> None:
    runner = CliRunner()
    after = runner.invoke(cli, ["rules", "list", "--rules", str(RULES / "people.py"), "--json"])
    assert after.exit_code == 0, after.output
    assert "test-users" in {r["name"] for r in json.loads(after.output)}
    both = runner.invoke(
        cli,
        [
            *("--rules", str(RULES / "people.py"), "rules", "list"),
            *("--rules", str(RULES / "facilities.py"), "--json"),
        ],
    )
    names = {r["name"] for r in json.loads(both.output)}
    assert {"test-users", "test-facilities"} <= names


def test_one_option_given_twice_with_two_values_is_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        cli, ["--store", "a.sqlite", "import-status", "--store", "b.sqlite"]
    )
    assert result.exit_code == 2
    assert "--store is given twice, a.sqlite before the command and b.sqlite after it" in (
        result.output
    )
    same = CliRunner().invoke(
        cli,
        [
            *("--store", str(_site_with_an_event(tmp_path)), "event", "list"),
            *("--store", str(tmp_path / "a.sqlite"), "--json"),
        ],
    )
    assert same.exit_code == 0, same.output


def test_url_after_the_command_sends_the_command_to_a_server(tmp_path: Path) -> None:
    # Port 9 (discard) has no server: the command must try it, not the embedded site.
    result = CliRunner().invoke(
        cli,
        ["event", "list", "--url", "http://127.0.0.1:9", "--store", str(tmp_path / "a.sqlite")],
        env={"TOOLKIT_API_KEY": "tk_x_y"},
    )
    assert result.exit_code == 1
    assert "127.0.0.1:9" in result.output
    assert not (tmp_path / "a.sqlite").exists()
