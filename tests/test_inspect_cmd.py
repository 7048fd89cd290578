"""`toolkit inspect`: the JSON report, the human view, errors and broken pipes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from toolkit.cli import cli

CSV = (
    "\ufeffProperty;Name;Latitude;Longitude\n"
    "0001;Café;-37.8183;144.9671\n"
    "0002;[NULL];-95;144\n"
    "0003;short\n"
    "0004;;-37.8;145.0\n"
)


def items_csv(tmp_path: Path) -> Path:
    path = tmp_path / "items.csv"
    path.write_bytes(CSV.encode("utf-8"))
    return path


def test_json_report_with_head(tmp_path: Path) -> None:
    path = items_csv(tmp_path)
    result = CliRunner().invoke(cli, ["inspect", str(path), "--json", "--head", "2"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["format"] == "csv"
    assert data["rows"] == 3
    assert data["columns"] == ["Property", "Name", "Latitude", "Longitude"]
    assert (data["encoding"], data["encodingSource"], data["delimiter"]) == ("utf-8", "bom", ";")
    assert data["crs"] == "EPSG:4326"
    assert data["geometrySource"] == "latlon:Latitude,Longitude"
    assert data["geometryTypes"] == {"Point": 2}
    assert data["nullGeometries"] == 1
    assert [(p["row"], p["line"], p["column"]) for p in data["problems"]] == [
        (2, 3, "Latitude"),
        (3, 4, None),
    ]
    assert data["head"] == [
        {
            "row": 1,
            "Property": "0001",
            "Name": "Café",
            "Latitude": "-37.8183",
            "Longitude": "144.9671",
            "geometry": "POINT (144.9671 -37.8183)",
        },
        {
            "row": 2,
            "Property": "0002",
            "Name": "[NULL]",
            "Latitude": "-95",
            "Longitude": "144",
            "geometry": None,
        },
    ]


def test_json_option_before_the_command_and_no_head_key_without_head(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["--json", "inspect", str(items_csv(tmp_path))])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert "head" not in data
    assert data["rows"] == 3


def test_human_report_lists_problems_and_head(tmp_path: Path) -> None:
    result = CliRunner().invoke(cli, ["inspect", str(items_csv(tmp_path)), "--head", "1"])
    assert result.exit_code == 0, result.output
    assert "utf-8 (bom)" in result.stdout
    assert "latitude outside -90..90" in result.stdout
    assert "expected 4 values, found 2" in result.stdout
    assert "POINT (144.9671 -37.8183)" in result.stdout
    assert "0002" not in result.stdout.split("POINT (144.9671")[1]


def test_options_reach_the_reader(tmp_path: Path) -> None:
    path = tmp_path / "mga.csv"
    path.write_text("id,e,n\n1,320000,5811000\n", encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        [
            *("inspect", str(path), "--json", "--crs", "EPSG:7855"),
            *("--lat-column", "n", "--lon-column", "e", "--encoding", "latin-1"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["crs"], data["geometrySource"]) == ("EPSG:7855", "latlon:n,e")
    assert (data["encoding"], data["encodingSource"]) == ("iso8859-1", "given")


def run_toolkit(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolkit", *args], capture_output=True, text=True, check=False
    )


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "missing.csv"
    result = run_toolkit("inspect", str(missing))
    assert result.returncode == 1
    assert result.stderr.startswith("Error: ")
    assert str(missing) in result.stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_two_layers_error_lists_them(tmp_path: Path) -> None:
    import geopandas as gpd
    import shapely

    gpkg = tmp_path / "two.gpkg"
    frame = gpd.GeoDataFrame({"a": [1]}, geometry=[shapely.Point(1, 2)], crs="EPSG:4326")
    frame.to_file(gpkg, layer="first", engine="pyogrio")
    frame.to_file(gpkg, layer="second", engine="pyogrio")
    result = run_toolkit("inspect", str(gpkg))
    assert result.returncode == 1
    assert "pass --layer one of: first, second" in result.stderr


def test_broken_pipe_ends_quietly_with_status_0(tmp_path: Path) -> None:
    path = tmp_path / "big.csv"
    lines = ["id,name,code"] + [f"{i},Street {i},{i:06d}" for i in range(2_000)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    # 1,500 rows of table are ~90 KB, more than a pipe buffer holds: the write must fail.
    process = subprocess.Popen(
        [sys.executable, "-m", "toolkit", "inspect", str(path), "--head", "1500"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    first = process.stdout.readline()
    process.stdout.close()  # what `| head -1` does
    stderr = process.stderr.read().decode()
    status = process.wait(timeout=60)
    assert first.strip()
    assert status == 0, stderr
    assert "Traceback" not in stderr
    assert "BrokenPipe" not in stderr
