"""Progress that says something: per stage, done of a known total, a rate and the time left,
drawn on a terminal only.

The CLI draws when rich finds an interactive terminal; ``TTY_COMPATIBLE=1`` and
``TTY_INTERACTIVE=1`` are rich's own switches to say so, which is how these tests give
the command a terminal while capturing what it draws. One test runs the real entry point
on a pseudo-terminal.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner, Result
from rich.filesize import decimal

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.importing.rules import load_rule
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
ITEMS = SAMPLE / "damage_assessments.csv"
TERMINAL = {"TTY_COMPATIBLE": "1", "TTY_INTERACTIVE": "1", "COLUMNS": "200"}
NOT_A_TERMINAL = {"TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None, "FORCE_COLOR": None}
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def drawn(text: str) -> list[str]:
    """Every line rich drew (each refresh redraws the bars), escape codes removed."""
    plain = _ANSI.sub("", text)
    return [line.strip() for line in re.split(r"[\r\n]", plain) if line.strip()]


def last_bar(lines: list[str], label: str) -> str:
    """The last drawing of the bar of stage ``label``."""
    bars = [line for line in lines if line.startswith(label + " ") and "━" in line]
    assert bars, f"no bar for {label!r} in:\n" + "\n".join(lines)
    return bars[-1]


@pytest.fixture(scope="module")
def site_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site with the sample parcels and an event (id 1)."""
    path = tmp_path_factory.mktemp("progress") / "site.sqlite"
    with LocalSite(path, "default") as site:
        job = site.run_import(ImportRequest("asset", "property-assets", SAMPLE / "parcels.zip"))
        assert job["status"] == "COMPLETE"
        site.create_event({"name": "Flood"})
    return path


def _import(site_file: Path, env: dict[str, str | None], *extra: str) -> Result:
    return CliRunner(env=env).invoke(
        cli,
        [
            *("--store", str(site_file), "--json", "import", str(ITEMS)),
            *("--type", "item", "--rule", "damage-assessments"),
            *("--event-id", "1", "--region-id", "1", "--dry-run", *extra),
        ],
    )


def test_each_stage_of_an_import_shows_its_total_rate_and_time(site_file: Path) -> None:
    result = _import(site_file, TERMINAL)
    assert result.exit_code == 0, result.stderr
    counts = json.loads(result.stdout)["summary"]["counts"]
    kept = counts["read"] - counts["rejected"]
    fields = len(load_rule("damage-assessments").fields)
    lines = drawn(result.stderr)

    size = decimal(ITEMS.stat().st_size)
    assert f"{size}/{size}" in last_bar(lines, "read damage_assessments.csv")
    assert f"{1000 * fields:,}/{1000 * fields:,} values" in last_bar(lines, "validate")
    assert "1,000/1,000 rows" in last_bar(lines, "link")
    assert f"{kept:,}/{kept:,} rows" in last_bar(lines, "plan")
    written = counts["inserted"] + counts["updated"] + counts["retired"]
    written += counts.get("unchanged", 0)
    assert f"{written:,}/{written:,} rows" in last_bar(lines, "write")
    for label in ("validate", "link", "plan", "write"):
        bar = last_bar(lines, label)
        assert re.search(r"[\d,]+ (rows|values)/s", bar), bar  # a rate
        assert re.search(r"\d+:\d\d:\d\d", bar), bar  # the time it took
    bars = [line for line in lines if "━" in line]
    assert not any("?" in bar for bar in bars), "a bar without its total"
    # While linking, the time left and what it is doing: by which way, on how many rows.
    assert any(re.search(r"rows by (soundex|code|geo|fuzzy|id)", bar) for bar in bars)


def test_no_progress_off_a_terminal_or_with_quiet(site_file: Path) -> None:
    plain = _import(site_file, NOT_A_TERMINAL)
    quiet = _import(site_file, TERMINAL, "--quiet")
    for result in (plain, quiet):
        assert result.exit_code == 0, result.stderr
        assert "━" not in result.stderr
        assert "rows/s" not in result.stderr and "validate" not in result.stderr
        assert "\x1b[" not in result.stderr


def test_a_lookup_of_100k_rows_shows_its_queries_done_of_the_total(
    site_file: Path, tmp_path: Path
) -> None:
    sample = pd.read_csv(ITEMS, dtype=str)[["Address"]]
    queries = pd.concat([sample] * 100, ignore_index=True)
    queries.insert(0, "Ref", [f"Q{i}" for i in range(len(queries))])
    source = tmp_path / "queries.csv"
    queries.to_csv(source, index=False)
    out = tmp_path / "matches.csv"
    result = CliRunner(env=TERMINAL).invoke(
        cli,
        [
            *("--store", str(site_file), "lookup", "--file", str(source)),
            *("--column", "Address", "--code-column", "Ref", "-o", str(out)),
        ],
    )
    assert result.exit_code == 3, result.stderr  # some addresses find no asset
    lines = drawn(result.stderr)
    assert "100,000/100,000 queries" in last_bar(lines, "lookup")
    assert re.search(r"[\d,]+ queries/s", last_bar(lines, "lookup"))
    size = decimal(source.stat().st_size)
    assert f"{size}/{size}" in last_bar(lines, "read queries.csv")
    assert "3,000/3,000 rows" in last_bar(lines, "index")
    assert len(pd.read_csv(out)) == 100_000


def test_an_xlsx_report_fetch_shows_its_rows_written(site_file: Path, tmp_path: Path) -> None:
    runner = CliRunner(env=TERMINAL)
    run = runner.invoke(cli, ["--store", str(site_file), "--json", "report", "run", "5", "--wait"])
    assert run.exit_code == 0, run.stderr
    instance = json.loads(run.stdout)
    rows = int(instance["rowCount"])
    assert rows > 0
    book = tmp_path / "audit.xlsx"
    fetched = runner.invoke(
        cli,
        [
            *("--store", str(site_file), "report", "fetch", str(instance["id"])),
            *("--format", "xlsx", "-o", str(book)),
        ],
    )
    assert fetched.exit_code == 0, fetched.stderr
    assert f"{rows:,}/{rows:,} rows" in last_bar(drawn(fetched.stderr), "write xlsx")
    assert book.read_bytes()[:2] == b"PK"


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_the_real_command_on_a_pseudo_terminal_draws_and_a_pipe_does_not(
    site_file: Path, tmp_path: Path
) -> None:
    import fcntl
    import pty
    import struct
    import termios

    env = {k: v for k, v in os.environ.items() if k not in ("TTY_COMPATIBLE", "FORCE_COLOR")}
    env["TERM"] = "xterm"
    args = [sys.executable, "-m", "toolkit", "--store", str(site_file), "inspect", str(ITEMS)]
    controller, terminal = pty.openpty()
    # Wide enough that a slow read's rate ("932.5 kB/s", longer than "9.3 MB/s") does not
    # wrap the bar's line on a busy machine.
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 160, 0, 0))
    process = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=terminal, env=env
    )
    os.close(terminal)
    drawn_bytes = b""
    while True:
        try:
            chunk = os.read(controller, 65536)
        except OSError:  # the command ended and closed its side
            break
        if not chunk:
            break
        drawn_bytes += chunk
    os.close(controller)
    assert process.wait(60) == 0
    size = decimal(ITEMS.stat().st_size)
    assert f"{size}/{size}" in last_bar(drawn(drawn_bytes.decode()), "read damage_assessments.csv")

    piped = subprocess.run(args, capture_output=True, text=True, env=env, check=False)
    assert piped.returncode == 0, piped.stderr
    assert "━" not in piped.stderr and "\x1b[" not in piped.stderr
