"""Only the commands that make a site make one: `toolkit init`, `demo`, `import`,
`event create`, `user add`. Every other command, run with a mistyped --store or in the
wrong folder, fails with "no site at PATH" instead of answering from a new empty site."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"

# Every command that reads or changes a site, with the arguments it needs to get that far.
READERS = [
    ["ping"],
    ["event", "list"],
    ["event", "get", "1"],
    ["event", "update", "1", "--status", "0"],
    ["register", "list"],
    ["item", "list", "--register", "damage-assessment"],
    ["item", "get", "1"],
    ["asset", "list"],
    ["asset", "get", "1"],
    ["asset", "types"],
    ["audit-log", "list"],
    ["audit-log", "get", "1"],
    ["import-status"],
    ["report", "list"],
    ["report", "run", "3", "--wait"],
    ["report", "status", "1"],
    ["report", "fetch", "1"],
    ["user", "list"],
    ["user", "update", "someone", "--approved"],
    ["user", "totp", "someone"],
    ["api-key", "issue", "someone"],
    ["api-key", "list"],
    ["api-key", "revoke", "1"],
    ["duty", "add", "someone", "--event-id", "1", "--position", "Officer"],
    ["duty", "remove", "someone", "--event-id", "1"],
    ["lookup", "12 SMITH ST BALLARAT"],
    ["serve", "--port", "0"],
]


def _run(store: Path, *args: str, site: str | None = None):  # type: ignore[no-untyped-def]
    head = ["--store", str(store)] + (["--site", site] if site else [])
    return CliRunner().invoke(cli, [*head, *args])


def _sites(store: Path) -> list[str]:
    with sqlite3.connect(store) as conn:
        return [r[0] for r in conn.execute("SELECT name FROM site ORDER BY name")]


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_a_command_that_only_uses_a_site_never_makes_one(
    tmp_path: Path, command: list[str]
) -> None:
    store = tmp_path / "typo.sqlite"
    result = _run(store, *command)
    assert result.exit_code == 1, result.output
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"Error: no site at {store}; make one there with `toolkit init`")
    assert "--store" in first  # and the other way out: the right file
    assert result.stdout == ""
    assert not store.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_init_makes_the_site_once_and_then_reads_work(tmp_path: Path) -> None:
    store = tmp_path / "new" / "site.sqlite"
    store.parent.mkdir()
    made = _run(store, "--json", "init")
    assert made.exit_code == 0, made.output
    assert json.loads(made.stdout) == {
        "store": str(store),
        "site": "default",
        "created": True,
        "sites": ["default"],
    }
    again = _run(store, "init")
    assert again.exit_code == 0
    assert again.stdout.strip() == f"Site 'default' is already in {store}; nothing changed"
    listed = _run(store, "--json", "event", "list")
    assert listed.exit_code == 0
    assert json.loads(listed.stdout) == {"models": {}, "count": 0, "total": "0"}
    pinged = _run(store, "--json", "ping")
    assert pinged.exit_code == 0 and json.loads(pinged.stdout)["status"] == 200


def test_a_mistyped_site_name_lists_the_sites_and_makes_none(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    assert _run(store, "init", site="staging").exit_code == 0
    assert _run(store, "init", site="live").exit_code == 0
    result = _run(store, "event", "list", site="stagign")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        f"Error: site 'stagign' does not exist in {store}; its sites: live, staging "
        "(choose one with --site, or make 'stagign' with `toolkit --site stagign init`)"
    )
    assert _sites(store) == ["live", "staging"]


def test_the_commands_that_make_a_site_still_do(tmp_path: Path) -> None:
    event = _run(tmp_path / "a.sqlite", "--json", "event", "create", "Flood 2026")
    assert event.exit_code == 0, event.output
    assert json.loads(event.stdout)["name"] == "Flood 2026"
    user = _run(tmp_path / "b.sqlite", "user", "add", "officer", "--position", "API User")
    assert user.exit_code == 0, user.output
    imported = _run(
        tmp_path / "c.sqlite",
        "--json",
        "import",
        str(SAMPLE / "assets.csv"),
        "--type",
        "asset",
        "--rule",
        "assets-csv",
    )
    assert imported.exit_code == 0, imported.output
    assert json.loads(imported.stdout)["summary"]["counts"]["inserted"] == 36
    # Each made its site in its own file, and a new site in an existing file too.
    assert [_sites(tmp_path / f"{n}.sqlite") for n in "abc"] == [["default"]] * 3
    assert _run(tmp_path / "a.sqlite", "event", "create", "Storm", site="other").exit_code == 0
    assert _sites(tmp_path / "a.sqlite") == ["default", "other"]


def test_init_is_for_the_embedded_site_only(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--url", "http://127.0.0.1:9", "init"])
    assert result.exit_code == 1
    assert "init makes an embedded site file; the API has no route for it" in result.stderr
