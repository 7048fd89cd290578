"""Pipes and formats, as csvkit, sqlite-utils and ogr2ogr users expect: ``-`` is stdin or
stdout, ``--format`` wins over a file's name, and the CSV dialect can be given."""

from __future__ import annotations

import base64
import csv
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from toolkit.cli import cli
from toolkit.importing.pipeline import ImportRequest
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
ITEMS = SAMPLE / "damage_assessments.csv"
PARCELS = SAMPLE / "parcels.zip"


def run(*args: str, stdin: bytes | None = None, env: dict[str, str] | None = None) -> Result:
    return CliRunner(env=env).invoke(cli, list(args), input=stdin)


@pytest.fixture(scope="module")
def site_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sample parcels, an event (id 1), and a finished audit-log report (instance 1)."""
    path = tmp_path_factory.mktemp("pipes") / "site.sqlite"
    with LocalSite(path, "default") as site:
        assert site.run_import(ImportRequest("asset", "property-assets", PARCELS))["status"] == (
            "COMPLETE"
        )
        site.create_event({"name": "Flood"})
    report = run("--store", str(path), "report", "run", "5", "--wait", "--json")
    assert report.exit_code == 0, report.output
    assert json.loads(report.stdout)["id"] == "1"
    return path


def _item_import(site_file: Path, *source: str, stdin: bytes | None = None) -> dict:  # type: ignore[type-arg]
    result = run(
        *("--store", str(site_file), "--json", "import", *source),
        *("--type", "item", "--rule", "damage-assessments"),
        *("--event-id", "1", "--region-id", "1", "--dry-run"),
        stdin=stdin,
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)  # type: ignore[no-any-return]


# --- `-` as stdin ---------------------------------------------------------------------------


def test_import_reads_stdin_as_csv_and_counts_as_the_file_does(site_file: Path) -> None:
    piped = _item_import(site_file, "-", "--format", "csv", stdin=ITEMS.read_bytes())
    from_file = _item_import(site_file, str(ITEMS))
    assert piped["summary"]["source"] == "stdin"
    assert piped["summary"]["counts"] == from_file["summary"]["counts"]
    assert piped["summary"]["counts"]["read"] == 1000
    # Without --format, stdin is CSV.
    plain = _item_import(site_file, "-", stdin=ITEMS.read_bytes())
    assert plain["summary"]["counts"] == from_file["summary"]["counts"]


def test_import_reads_a_zipped_shapefile_from_stdin(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    result = run(
        *("--store", str(store), "--json", "import", "-", "--format", "zip"),
        *("--type", "asset", "--rule", "property-assets"),
        stdin=PARCELS.read_bytes(),
    )
    assert result.exit_code == 0, result.output
    job = json.loads(result.stdout)
    assert (job["status"], job["summary"]["counts"]["inserted"]) == ("COMPLETE", 3000)
    assert job["summary"]["source"] == "stdin"


def test_a_real_pipe_into_the_entry_point(site_file: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "toolkit", "--store", str(site_file), "--json", "inspect", "-"],
        input=ITEMS.read_bytes(),
        capture_output=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert (report["path"], report["rows"], report["delimiter"]) == ("stdin", 1000, ",")


def test_lookup_reads_stdin_and_writes_stdout(site_file: Path, tmp_path: Path) -> None:
    args = ["--store", str(site_file), "lookup", "--column", "Address"]
    args += ["--code-column", "Reference"]
    to_file = tmp_path / "matches.csv"
    written = run(*args, "--file", str(ITEMS), "-o", str(to_file))
    assert written.exit_code == 3, written.output  # 3: some addresses found no asset
    piped = run(*args, "--file", "-", "-o", "-", stdin=ITEMS.read_bytes())
    assert piped.exit_code == 3, piped.output
    assert piped.stdout == to_file.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(piped.stdout)))
    assert len(rows) == 1000 and rows[0]["reference"] == "DA-000001"
    assert not (Path.cwd() / "-").exists()
    assert "1000 queries:" in piped.stderr and "Wrote 1000 rows to stdout" in piped.stderr
    both = run(*args, "--file", "-", "-o", "-", "--json", stdin=ITEMS.read_bytes())
    assert both.exit_code == 2 and "-o - and --json both write to stdout" in both.output


# --- `-` as stdout, and report fetch writing the file itself ---------------------------------


def test_report_fetch_writes_the_file_itself_to_stdout(site_file: Path, tmp_path: Path) -> None:
    base = ["--store", str(site_file), "report", "fetch", "1"]
    to_file = tmp_path / "audit.csv"
    assert run(*base, "--format", "csv", "-o", str(to_file)).exit_code == 0
    dashed = run(*base, "--format", "csv", "-o", "-")
    redirected = run(*base, "--format", "csv")  # `> audit.csv`
    for result in (dashed, redirected):
        assert result.exit_code == 0, result.output
        assert result.stdout_bytes == to_file.read_bytes()
        assert result.stdout.startswith('"Entry id","When (UTC)",')  # CSV, not JSON with Base64
    rows = list(csv.DictReader(io.StringIO(dashed.stdout)))
    assert sum(r["Record type"] == "asset" for r in rows) == 3000
    assert not (Path.cwd() / "-").exists()

    book = run(*base, "--format", "xlsx")
    assert book.exit_code == 0 and book.stdout_bytes[:2] == b"PK"
    fetched = json.loads(run(*base, "--format", "csv", "--json").stdout)
    assert base64.b64decode(fetched["contents"]) == to_file.read_bytes()
    contents = json.loads(run(*base, "-o", "-").stdout)
    assert contents["$schema"].endswith("report-contents.v1.json")


# --- --format wins over the name ------------------------------------------------------------


def test_format_overrides_the_extension(tmp_path: Path) -> None:
    dat = tmp_path / "export.dat"
    shutil.copyfile(ITEMS, dat)
    refused = run("inspect", str(dat))
    assert refused.exit_code == 1
    assert "unknown file type '.dat'" in refused.output and "--format" in refused.output
    read = run("--json", "inspect", str(dat), "--format", "csv")
    assert read.exit_code == 0, read.output
    assert (json.loads(read.stdout)["rows"], json.loads(read.stdout)["path"]) == (1000, str(dat))

    shapes = tmp_path / "parcels.bin"
    shutil.copyfile(PARCELS, shapes)
    as_zip = json.loads(run("--json", "inspect", str(shapes), "--format", "zip").stdout)
    assert (as_zip["format"], as_zip["rows"]) == ("shapefile", 3000)

    book = tmp_path / "sheet.txt"  # an XLSX whose name says text
    import openpyxl

    workbook = openpyxl.Workbook()
    workbook.active.append(["Reference", "Code"])
    workbook.active.append(["R1", "007"])
    workbook.save(book)
    as_xlsx = json.loads(
        run("--json", "inspect", str(book), "--format", "xlsx", "--head", "1").stdout
    )
    assert (as_xlsx["format"], as_xlsx["head"][0]["Code"]) == ("xlsx", "007")


# --- the CSV dialect ------------------------------------------------------------------------


def _columns(path: Path, *options: str) -> tuple[list[str], list[dict]]:  # type: ignore[type-arg]
    result = run("--json", "inspect", str(path), "--head", "5", *options)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    return report["columns"], report["head"]


def test_delimiter_and_quotechar_replace_detection(tmp_path: Path) -> None:
    ambiguous = tmp_path / "a.csv"  # a comma and a semicolon on every line
    ambiguous.write_text("a,b;c\n1,2;3\n4,5;6\n", encoding="utf-8")
    columns, head = _columns(ambiguous, "--delimiter", ";")
    assert columns == ["a,b", "c"] and head[0]["a,b"] == "1,2"
    assert _columns(ambiguous, "--delimiter", "comma")[0] == ["a", "b;c"]

    tabbed = tmp_path / "t.txt"
    tabbed.write_text('name\tnote\nSmith, J\t6" pipe\n', encoding="utf-8")
    columns, head = _columns(tabbed, "--delimiter", "tab", "--quotechar", "none")
    assert columns == ["name", "note"] and head[0]["note"] == '6" pipe'

    single = tmp_path / "q.csv"
    single.write_text("name,note\n'Smith, J',x\n", encoding="utf-8")
    columns, head = _columns(single, "--quotechar", "'")
    assert head[0]["name"] == "Smith, J" and head[0]["note"] == "x"


def test_import_takes_the_dialect_too(site_file: Path, tmp_path: Path) -> None:
    semi = tmp_path / "items.dat"
    text = ITEMS.read_text(encoding="utf-8")
    rows = list(csv.reader(io.StringIO(text)))
    out = io.StringIO()
    csv.writer(out, delimiter="|", quotechar="'", lineterminator="\n").writerows(rows)
    semi.write_text(out.getvalue(), encoding="utf-8")
    job = _item_import(
        site_file, str(semi), "--format", "csv", "--delimiter", "pipe", "--quotechar", "'"
    )
    assert job["summary"]["counts"] == _item_import(site_file, str(ITEMS))["summary"]["counts"]


@pytest.mark.parametrize(
    ("options", "status", "message"),
    [
        (("--delimiter", "ab"), 2, "Invalid value for '--delimiter': 'ab' is not a delimiter"),
        (("--delimiter", ""), 2, "Invalid value for '--delimiter': '' is not a delimiter"),
        (("--quotechar", "''"), 2, "Invalid value for '--quotechar': \"''\" is not a quote"),
        (("--delimiter", ";", "--quotechar", ";"), 1, "--delimiter and --quotechar are both"),
        (("--encoding", "no-such-codec"), 1, "no-such-codec"),
        (("--format", "xlsx", "--delimiter", ";"), 1, "--delimiter and --quotechar are for CSV"),
        (("--format", "dbf"), 2, "Invalid value for '--format'"),
    ],
)
def test_a_bad_dialect_value_is_a_clear_error(
    options: tuple[str, ...], status: int, message: str
) -> None:
    result = run("inspect", str(ITEMS), *options)
    assert result.exit_code == status, result.output
    assert message in result.output
    assert "Traceback" not in result.output
