"""The README's and every `--help`'s examples work as written, on a demo site.

Each README command line (the ``sh`` blocks that run ``toolkit``) and each command's
``Examples:`` is run in a folder holding a demo site (``toolkit demo``), the sample data as
``sample_data/`` and stand-ins for the reader's own files that examples name
(``legacy.csv``, ``backup.zip``, ...; made from the sample below). The README is run top to
bottom in one folder, as a reader following the tour would; each command's examples in a
fresh copy that also holds what a reader made first (an API key, an uploaded photo). A line
must exit 0 (or a documented status), write the file it names, print something, find
something where it looks something up (never ``0 of 0`` or ``0 matched``) and never print
Python's ``None``. Lines that cannot run in a test (a server that runs until stopped, one at an
address of the reader's, a million-row workload) are listed in ``NOT_RUN`` with the reason;
Click still parses them, so their options and choices are checked.
"""

from __future__ import annotations

import csv
import io
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import click
import geopandas as gpd
import pandas as pd
import pytest
from click.testing import CliRunner
from gazetteer_data import gnaf_points, write_psv

from toolkit.cli import cli

ROOT = Path(__file__).resolve().parent.parent
OPENADDRESSES = ROOT / "tests" / "fixtures_geocoding" / "openaddresses_au_vic.csv"
SAMPLE = ROOT / "toolkit" / "sample" / "data"
BIN = Path(sys.executable).parent

# Lines Click parses but the test does not run, each with why.
NOT_RUN = {
    "toolkit serve": "serves until stopped (toolkit serve is tested over HTTP elsewhere)",
    "toolkit --store staging.sqlite serve": "serves until stopped",
    "toolkit --profile staging ping": "needs the reader's server and profile",
    "toolkit --url http://127.0.0.1:8080": "needs the reader's server at that address",
    "toolkit --url https://staging.example.org": "needs the reader's server",
    "toolkit sample generate --assets 1000000": "a million-row workload takes minutes",
    "toolkit import --engine dask --scheduler": "needs the reader's Dask scheduler",
    "toolkit lookup --engine dask --scheduler": "needs the reader's Dask scheduler",
    "toolkit inspect --engine dask --scheduler": "needs the reader's Dask scheduler",
    "curl -s https://example.org/plan.pdf": "downloads from the reader's web server",
}
# Documented statuses other than 0 an example may end with: lookup says 3 when some
# queries found no asset (never 4, none found: an example must find something).
DOCUMENTED_STATUS = {"toolkit lookup": {0, 3}, "toolkit --json lookup": {0, 3}}


# --- the examples -----------------------------------------------------------------------


def _logical_lines(text: str) -> list[str]:
    """Lines with their ``\\`` continuations joined, blank lines dropped."""
    joined = re.sub(r"\\\n\s*", "", text)
    return [line.strip() for line in joined.splitlines() if line.strip()]


def _runs_toolkit(line: str) -> bool:
    return bool(re.search(r"(^|[|;&(]\s*|^\S+=\S*\s+)toolkit(\s|\)|$)", line))


def readme_examples() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"^```sh\n(.*?)^```", text, re.MULTILINE | re.DOTALL)
    return [line for block in blocks for line in _logical_lines(block) if _runs_toolkit(line)]


def _commands(
    group: click.Group, path: tuple[str, ...] = ()
) -> list[tuple[tuple[str, ...], click.Command]]:
    found: list[tuple[tuple[str, ...], click.Command]] = [(path, group)] if not path else []
    for name, command in group.commands.items():
        if command.hidden:  # internal (the report worker): not shown to readers
            continue
        found.append(((*path, name), command))
        if isinstance(command, click.Group):
            found.extend(_commands(command, (*path, name)))
    return found


def help_examples() -> dict[str, list[str]]:
    """Each command's examples, by the command's name (``""`` for ``toolkit`` itself)."""
    examples = {}
    for path, _command in _commands(cli):
        output = CliRunner().invoke(cli, [*path, "--help"], terminal_width=200).output
        section = re.search(r"Examples?:\n(.*?)(?:\n\n|\Z)", output, re.DOTALL)
        assert section, f"toolkit {' '.join(path)} --help has no examples"
        examples[" ".join(path)] = _logical_lines(section.group(1))
    return examples


def _not_run_reason(line: str) -> str | None:
    return next((why for start, why in NOT_RUN.items() if line.startswith(start)), None)


# --- the folder the examples run in ---------------------------------------------------


def _users_rows() -> list[list[str]]:
    with (SAMPLE / "users.csv").open(encoding="utf-8", newline="") as handle:
        return list(csv.reader(handle))


def _write_csv(path: Path, rows: list[list[str]], encoding: str, delimiter: str) -> None:
    # (A Vietnamese letter has no windows-1252 byte: a legacy system writes "?".)
    with path.open("w", encoding=encoding, errors="replace", newline="") as handle:
        csv.writer(handle, delimiter=delimiter, lineterminator="\n").writerows(rows)


def _zip(path: Path, members: dict[str, bytes]) -> None:
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _shapefile_without_prj(path: Path) -> None:
    """An export as some systems make it: the parcels layer with no .prj (hence --crs)."""
    with zipfile.ZipFile(SAMPLE / "parcels.zip") as parcels:
        members = {
            name: parcels.read(name) for name in parcels.namelist() if not name.endswith(".prj")
        }
    _zip(path, members)


def _points(path: Path) -> None:
    with (SAMPLE / "damage_assessments.csv").open(encoding="utf-8", newline="") as handle:
        rows = [r for r in csv.DictReader(handle) if r["Latitude"] and r["Longitude"]]
    located = [[r["Reference"], r["Latitude"], r["Longitude"]] for r in rows]
    _write_csv(path, [["ref", "lat", "lon"], *located], "utf-8", ",")


TREES_RULE = '''"""Street trees from our tree register (a rule of our own)."""

from toolkit.importing.rules import FieldRule, ImportRule

RULE = ImportRule(
    name="trees",
    import_type="asset",
    description="street trees from the tree register CSV",
    asset_type="Tree",
    fields=(
        FieldRule("code", "Tree Id", required=True),
        FieldRule("name", "Species", required=True),
    ),
    matching_id="code",
    overwrite_rule="updateAndInsert",
)
'''


def _gnaf(path: Path) -> None:
    """A G-NAF Core file: generated address points of the sample's localities, and one
    address the sample's parcels lack (12 AVALON COURT BUNINYONG), away from them all."""
    points = gnaf_points(300, seed=1)
    avalon = points.iloc[[0]].assign(
        ADDRESS_DETAIL_PID="GAVIC499999999",
        FLAT_TYPE="",
        FLAT_NUMBER="",
        NUMBER_FIRST="12",
        STREET_NAME="AVALON",
        STREET_TYPE="COURT",
        LOCALITY_NAME="BUNINYONG",
        POSTCODE="3357",
        GEOCODE_TYPE="PROPERTY CENTROID",
        LONGITUDE=143.5,
        LATITUDE=-37.9,
    )
    write_psv(pd.concat([points, avalon], ignore_index=True), path)


def _points_layer(path: Path) -> None:
    """Address points in a GeoPackage or Parquet file, with columns named their own way."""
    points = gnaf_points(200, seed=2)
    frame = gpd.GeoDataFrame(
        {
            "ID": points["ADDRESS_DETAIL_PID"],
            "HOUSE_NO": points["NUMBER_FIRST"],
            "STREET": points["STREET_NAME"] + " " + points["STREET_TYPE"],
            "SUBURB": points["LOCALITY_NAME"],
            "POSTCODE": points["POSTCODE"],
        },
        geometry=gpd.points_from_xy(points["LONGITUDE"], points["LATITUDE"]),
        crs=4326,
    )
    if path.suffix == ".parquet":
        frame.to_parquet(path)
    else:
        frame.to_file(path, driver="GPKG")


# Stand-ins for the reader's own files the examples name, made from the sample.
STAND_INS: dict[str, Callable[[Path], object]] = {
    "VIC_ADDRESS_DETAIL_GNAF_CORE.psv": _gnaf,
    "vic.csv": lambda p: shutil.copy(OPENADDRESSES, p),
    "nsw.csv": lambda p: shutil.copy(OPENADDRESSES, p),
    "points.gpkg": _points_layer,
    "points.parquet": _points_layer,
    "parcels.zip": lambda p: shutil.copy(SAMPLE / "parcels.zip", p),
    "items.csv": lambda p: shutil.copy(SAMPLE / "damage_assessments.csv", p),
    "damage.csv": lambda p: shutil.copy(SAMPLE / "damage_assessments.csv", p),
    "fixed.csv": lambda p: shutil.copy(SAMPLE / "damage_assessments.csv", p),
    "legacy.csv": lambda p: _write_csv(p, _users_rows(), "windows-1252", ","),
    "legacy.dat": lambda p: _write_csv(p, _users_rows(), "windows-1252", ";"),
    "odd.txt": lambda p: p.write_text(
        'code\tname\nA1\tthe "old" bridge\nA2\t6" culvert\n', encoding="utf-8"
    ),
    "export.dat": lambda p: p.write_text(
        'code\tname\nA1\tthe "old" bridge\nA2\t6" culvert\n', encoding="utf-8"
    ),
    "export.zip": _shapefile_without_prj,
    "export.shp.zip": _shapefile_without_prj,
    "backup.zip": lambda p: _zip(
        p,
        {
            "parcels.zip": (SAMPLE / "parcels.zip").read_bytes(),
            "items.csv": (SAMPLE / "damage_assessments.csv").read_bytes(),
        },
    ),
    "points.csv": _points,
    "secret.txt": lambda p: p.write_text("correct horse battery staple\n", encoding="utf-8"),
    "my_rules/trees.py": lambda p: p.write_text(TREES_RULE, encoding="utf-8"),
    "our-rules/trees.py": lambda p: p.write_text(TREES_RULE, encoding="utf-8"),
    # A photo taken in the field (a tiny JPEG: its markers and nothing else).
    "roof.jpg": lambda p: p.write_bytes(
        b"\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01\x01\x00" + b"\x00" * 6 + b"\xff\xd9"
    ),
    "new-item.json": lambda p: p.write_text(
        '{"registerId": "damage-assessment", "damageLevel": "Minor", "address": "11 SMITH ST"}',
        encoding="utf-8",
    ),
}


def _export_script(folder: Path) -> None:
    """``./export.sh``: another system's export, printing assets as CSV with ';'."""
    script = folder / "export.sh"
    with (SAMPLE / "assets.csv").open(encoding="utf-8", newline="") as handle:
        rows = list(csv.reader(handle))
    out = io.StringIO()
    csv.writer(out, delimiter=";", lineterminator="\n").writerows(rows)
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{out.getvalue()}EOF\n", encoding="utf-8")
    script.chmod(0o755)


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A demo site as ``toolkit demo`` leaves it, the sample, and the stand-in files."""
    folder = tmp_path_factory.mktemp("examples") / "work"
    folder.mkdir()
    (folder / "sample_data").symlink_to(SAMPLE, target_is_directory=True)
    for name, make in STAND_INS.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        make(folder / name)
    _export_script(folder)
    (folder / "home" / ".config" / "fish" / "completions").mkdir(parents=True)
    result = subprocess.run(
        [str(BIN / "toolkit"), "--quiet", "demo"],
        cwd=folder,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return folder


@pytest.fixture(scope="module")
def prepared_folder(demo_folder: Path) -> Path:
    """The demo folder with what a reader made before the help examples that use it (the
    README makes its own as it goes): an API key to revoke, a photo uploaded (file 1)."""
    folder = demo_folder.with_name("prepared")
    shutil.copytree(demo_folder, folder, symlinks=True)
    store = str(folder / "toolkit.sqlite")
    for made in (["api-key", "issue", "apiuser"], ["media", "upload", str(folder / "roof.jpg")]):
        done = CliRunner().invoke(cli, ["--store", store, *made])
        assert done.exit_code == 0, done.output
    return folder


# --- running a line -----------------------------------------------------------------------

SHELL = re.compile(r"[|<>;&`$]|^\S+=|^\./|^eval\b")
# What an empty answer looks like: a lookup that found nothing, a list of nothing.
EMPTY = re.compile(r"\b0 of 0\b|queries: 0 matched|\"count\": 0\b|\"total\": \"0\"")
PYTHON_NONE = re.compile(r"\bNone\b")


@dataclass
class Outcome:
    line: str
    status: int
    stdout: str
    stderr: str
    files: list[Path] = field(default_factory=list)

    def problems(self) -> list[str]:
        allowed = next(
            (codes for start, codes in DOCUMENTED_STATUS.items() if _stage(self.line, start)),
            {0},
        )
        if self.status not in allowed:
            return [f"exit {self.status}: {self.stderr.strip()[-800:]}"]
        found = []
        for path in self.files:
            if not path.exists() or (path.is_file() and path.stat().st_size == 0):
                found.append(f"wrote nothing to {path}")
            elif path.is_dir() and not any(path.iterdir()):
                found.append(f"wrote nothing into {path}")
        said = (self.stdout + self.stderr).strip()  # a done action is said on stderr
        if not self.files and not said and not self.line.startswith("eval "):
            found.append("printed nothing")
        empty = EMPTY.search(self.stdout + self.stderr)
        if empty:
            found.append(f"found nothing: {empty.group(0)!r}")
        found.extend(f"printed Python's None: {line.strip()[:160]}" for line in _none_lines(self))
        return found


def _stage(line: str, start: str) -> bool:
    """Whether a stage of the pipeline ``line`` starts with ``start``."""
    return any(stage.strip().startswith(start) for stage in line.split("|"))


def _none_lines(outcome: Outcome) -> list[str]:
    """Lines of text output showing ``None``. JSON has ``null`` for that, and the sample's
    one ``None`` is a damage level: on an item's row (its ``DA-`` reference), as an item's
    ``damageLevel``, or in the list of the damage levels (beside ``Minor``)."""
    if re.search(r"--json|--nl\b", outcome.line):
        return []
    return [
        line
        for line in (outcome.stdout + outcome.stderr).splitlines()
        if PYTHON_NONE.search(line) and not re.search(r"DA-|Minor|damageLevel", line)
    ]


def _written(words: list[str], folder: Path) -> list[Path]:
    """The files and folders a line says it writes: ``-o FILE``, ``> FILE`` (``-`` is
    stdout, ``~`` the home folder), ``--out FOLDER``."""
    targets = [words[i + 1] for i, w in enumerate(words[:-1]) if w in ("-o", ">", "--out")]
    home = folder / "home"
    return [home / t[2:] if t.startswith("~/") else folder / t for t in targets if t != "-"]


def parse_only(words: list[str]) -> None:
    """Parse a command line the way Click would run it, without running it."""
    command: click.Command = cli
    args = words[1:]
    name: str | None = "toolkit"
    parent = None
    while True:
        context = command.make_context(name, args, parent=parent)
        if not isinstance(command, click.Group):
            return
        rest = [*getattr(context, "_protected_args", []), *context.args]
        name, found, args = command.resolve_command(context, rest)
        assert found is not None and name is not None
        command, parent = found, context


def run_line(line: str, folder: Path) -> Outcome:
    words = shlex.split(line, comments=True)
    files = _written(words, folder)
    if SHELL.search(line) and not _plain_redirect(words):
        env = {
            **os.environ,
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
            "HOME": str(folder / "home"),
        }
        done = subprocess.run(
            ["bash", "-c", line],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        return Outcome(line, done.returncode, done.stdout, done.stderr, files)
    assert words[0] == "toolkit", line
    # A plain `> FILE` or `< FILE` is done here, as the shell would (no process to start).
    args, stdin, stdout_file = _redirections(words[1:], folder)
    result = CliRunner().invoke(cli, args, input=stdin)
    if stdout_file is not None:
        stdout_file.write_bytes(result.stdout_bytes)
    stderr = result.stderr
    if result.exception and not isinstance(result.exception, SystemExit):
        stderr += f"\n{type(result.exception).__name__}: {result.exception}"
    return Outcome(line, result.exit_code, result.stdout, stderr, files)


def _plain_redirect(words: list[str]) -> bool:
    """A toolkit command whose only shell syntax is ``> FILE`` and/or ``< FILE``."""
    shell = [w for w in words if SHELL.search(w)]
    return words[0] == "toolkit" and all(w in (">", "<") for w in shell)


def _redirections(words: list[str], folder: Path) -> tuple[list[str], bytes | None, Path | None]:
    args: list[str] = []
    stdin = stdout = None
    rest = iter(words)
    for word in rest:
        if word == "<":
            stdin = (folder / next(rest)).read_bytes()
        elif word == ">":
            stdout = folder / next(rest)
        else:
            args.append(word)
    return args, stdin, stdout


def run_script(lines: list[str], folder: Path) -> list[str]:
    """Run ``lines`` in order in ``folder``; every problem found, by line."""
    failures: list[str] = []
    for line in lines:
        if _not_run_reason(line):
            words = shlex.split(line, comments=True)
            start = words.index("toolkit")  # the toolkit stage of a pipeline
            end = next(
                (i for i, w in enumerate(words) if i > start and w in ("|", ">", "<")), len(words)
            )
            parse_only(words[start:end])
            continue
        outcome = run_line(line, folder)
        failures.extend(f"{line}\n    {problem}" for problem in outcome.problems())
    return failures


def _work(source: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh copy of ``source``, as the current folder, with no TOOLKIT_ settings."""
    folder = tmp_path / "work"
    shutil.copytree(source, folder, symlinks=True)
    for name in list(os.environ):
        if name.startswith("TOOLKIT_"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(folder)
    return folder


# --- the tests ----------------------------------------------------------------------------


def test_not_run_lines_are_examples_that_still_exist() -> None:
    lines = readme_examples() + [line for ls in help_examples().values() for line in ls]
    for start in NOT_RUN:
        assert any(line.startswith(start) for line in lines), f"no example starts {start!r}"


@pytest.mark.slow
def test_the_readme_examples_work_in_order_on_a_demo_site(
    demo_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _work(demo_folder, tmp_path, monkeypatch)
    failures = run_script(readme_examples(), work)
    assert not failures, "\n".join(failures)


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(help_examples()), ids=lambda c: c or "toolkit")
def test_each_commands_help_examples_work_on_a_demo_site(
    command: str, prepared_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    work = _work(prepared_folder, tmp_path, monkeypatch)
    failures = run_script(help_examples()[command], work)
    assert not failures, "\n".join(failures)


def test_records_print_missing_values_blank_never_python_none(tmp_path: Path) -> None:
    store = str(tmp_path / "site.sqlite")
    created = CliRunner().invoke(cli, ["--store", store, "event", "create", "Flood 2026"])
    assert created.exit_code == 0, created.output
    fields = [[*line.split(None, 1), ""][:2] for line in created.stdout.splitlines()]
    lines = {key: value for key, value in fields if key}
    assert lines["name"] == "Flood 2026"
    assert lines["description"] == lines["startDate"] == lines["regionId"] == ""
    assert lines["tags"] == "[]"
    listed = CliRunner().invoke(cli, ["--store", store, "event", "list"])
    for output in (created.stdout, created.stderr, listed.stdout):
        assert not PYTHON_NONE.search(output), output
