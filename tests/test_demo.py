"""The main job on the committed sample data, twice: the second run changes nothing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def test_the_demo_builds_a_site_and_is_safe_to_repeat(tmp_path: Path) -> None:
    args = [
        "--store",
        str(tmp_path / "demo.sqlite"),
        "--json",
        "demo",
        "--sample-dir",
        str(SAMPLE),
        "--out",
        str(tmp_path / "out"),
    ]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.stderr
    result = json.loads(first.stdout)
    jobs = {job["summary"]["source"]: job["summary"] for job in result["jobs"]}
    assert [job["status"] for job in result["jobs"]] == ["COMPLETE"] * 4
    assert jobs["parcels.zip"]["counts"]["inserted"] == 3000
    items = jobs["damage_assessments.csv"]
    assert items["counts"]["inserted"] + items["counts"]["rejected"] == 1000
    # Linked rows are all right (checked against the truth file below) and most rows link.
    assert items["linking"]["unlinked"] < 150
    assert Path(result["outputs"]["damage_assessments.csv rejected rows"]).exists()
    html = Path(result["outputs"]["report damage_assessments (html)"]).read_text(encoding="utf-8")
    assert "DA-000001" in html
    assert Path(result["outputs"]["report matching_quality (xlsx)"]).stat().st_size > 10_000

    second = json.loads(CliRunner().invoke(cli, args).stdout)
    for job in second["jobs"]:
        counts = job["summary"]["counts"]
        assert (counts["inserted"], counts["updated"]) == (0, 0), job["summary"]["source"]


def test_every_link_the_demo_makes_is_the_true_parcel(tmp_path: Path) -> None:
    import pandas as pd

    store = tmp_path / "demo.sqlite"
    CliRunner().invoke(
        cli,
        [
            "--store",
            str(store),
            "--quiet",
            "demo",
            "--sample-dir",
            str(SAMPLE),
            "--out",
            str(tmp_path / "out"),
        ],
    )
    with LocalSite(store, "default") as site:
        job = site.import_status()[-1]["id"]  # type: ignore[index]
        links = site.store.jobs.links(job)
    truth = pd.read_csv(SAMPLE / "damage_assessments_truth.csv", dtype=str)
    merged = links.merge(truth, left_on="reference", right_on="Reference")
    linked = merged[merged["asset_id_x"].notna()]
    wrong = linked[linked["asset_id_x"].astype("int64").astype(str) != linked["asset_id_y"]]
    assert len(linked) > 850
    assert wrong.empty, wrong[["reference", "query", "mode"]].to_string()


# ---------------------------------------------------------------------------------------------
# The sample ships with the package: the demo works from any folder and from a wheel

ROOT = Path(__file__).resolve().parent.parent
PACKAGED = ROOT / "toolkit" / "sample" / "data"
SAMPLE_FILES = (
    "README.md",
    "assets.csv",
    "damage_assessments.csv",
    "damage_assessments_truth.csv",
    "parcels.zip",
    "users.csv",
)


def _toolkit_script() -> str:
    """The venv's own console script, as a user without an activated venv would call it."""
    return str(Path(sys.executable).with_name("toolkit"))


def test_sample_data_is_the_packaged_folder_not_a_copy() -> None:
    # One copy only: the repository's sample_data/ is a link to the package's data.
    assert SAMPLE.resolve() == PACKAGED.resolve()
    assert sorted(p.name for p in PACKAGED.iterdir()) == sorted(SAMPLE_FILES)


def test_demo_runs_from_any_folder(tmp_path: Path) -> None:
    result = subprocess.run(
        [_toolkit_script(), "--quiet", "demo"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "toolkit.sqlite").is_file()
    assert (tmp_path / "toolkit-output" / "damage_assessments.html").is_file()
    assert "Sample flood 2026" in result.stdout
    with LocalSite(tmp_path / "toolkit.sqlite", "default") as site:
        assert site.list_assets({"type": "Property"})["total"] == "3000"

    # Its Next: lines run as printed in a shell whose PATH does not hold the venv.
    nexts = _next_lines(result.stdout)
    assert [line.split()[0] for line in nexts] == [_toolkit_script()] * 2
    bare = {**os.environ, "PATH": "/usr/bin:/bin"}
    for line in nexts:
        ran = subprocess.run(
            ["bash", "-c", line], cwd=tmp_path, env=bare, capture_output=True, text=True
        )
        assert ran.returncode == 0, f"{line}: {ran.stderr}"
        assert "DA-" in ran.stdout or "Property" in ran.stdout, line


def _next_lines(stdout: str) -> list[str]:
    """The commands the demo suggests after ``Next:``."""
    after = stdout.split("Next:", 1)[1]
    return [line.strip() for line in after.strip().splitlines()]


def test_the_next_lines_name_python_m_toolkit_when_run_as_a_module(tmp_path: Path) -> None:
    # In process (as under `python -m toolkit`) no console script runs: the lines say
    # this interpreter's full path and -m toolkit.
    store = tmp_path / "demo.sqlite"
    result = CliRunner().invoke(
        cli, ["--store", str(store), "--quiet", "demo", "--out", str(tmp_path / "out")]
    )
    assert result.exit_code == 0, result.stderr
    nexts = _next_lines(result.stdout)
    assert len(nexts) == 2
    for line in nexts:
        assert line.startswith(f"{sys.executable} -m toolkit --store {store} ")
    ran = subprocess.run(
        ["bash", "-c", nexts[1]],
        env={**os.environ, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert ran.returncode == 0, ran.stderr
    assert "Assets: 5 of" in ran.stdout


def test_a_demo_given_no_sample_makes_no_site_file(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    result = CliRunner().invoke(
        cli,
        ["--store", str(tmp_path / "demo.sqlite"), "demo", "--sample-dir", str(tmp_path / "empty")],
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ")
    assert "missing parcels.zip, assets.csv, users.csv, damage_assessments.csv" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]


def test_a_demo_failing_after_making_the_site_file_removes_it(tmp_path: Path) -> None:
    # --out is under a file, so the demo fails after it opened (and made) the site file.
    (tmp_path / "taken").write_text("a file, not a folder", encoding="utf-8")
    out = str(tmp_path / "taken" / "out")
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "demo.sqlite"), "demo", "--out", out]
    )
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: ") and "taken" in result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_a_demo_whose_job_fails_keeps_the_site_with_the_failed_job(tmp_path: Path) -> None:
    # A FAILED job is a record of what went wrong (import-status shows it), not an empty
    # site: the file stays, the reason is on stderr and the status is 1.
    bad = tmp_path / "bad"
    shutil.copytree(PACKAGED, bad)
    (bad / "parcels.zip").write_text("not a zip", encoding="utf-8")
    store = tmp_path / "demo.sqlite"
    args = ["--store", str(store), "--quiet", "demo", "--sample-dir", str(bad)]
    result = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "out")])
    assert result.exit_code == 1
    assert "FAILED" in result.stderr and "parcels.zip" in result.stderr
    with LocalSite(store, "default") as site:
        jobs = site.import_status()
    assert isinstance(jobs, list) and jobs[0]["status"] == "FAILED"


@pytest.mark.slow
def test_a_built_wheel_carries_the_sample_and_its_demo_runs(tmp_path: Path) -> None:
    # Build from a copy of the sources (a build writes build/ and egg-info in its tree),
    # without build isolation, so the test needs no network.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("toolkit", "pipelines"):
        shutil.copytree(ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
    built = subprocess.run(
        [*pip, "wheel", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(source)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("toolkit-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name in SAMPLE_FILES:
            member = f"toolkit/sample/data/{name}"
            assert member in names, member
            assert archive.read(member) == (PACKAGED / name).read_bytes(), member

    # A plain (not editable) install of that wheel, first on the path, run from elsewhere.
    target = tmp_path / "installed"
    installed = subprocess.run(
        [*pip, "install", "--no-deps", "--target", str(target), str(wheel)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert installed.returncode == 0, installed.stderr
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    where = subprocess.run(
        [sys.executable, "-c", "import toolkit.sample.demo as d; print(d.packaged_sample_dir())"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert Path(where.stdout.strip()) == target / "toolkit" / "sample" / "data"
    demo = subprocess.run(
        [sys.executable, "-m", "toolkit", "--quiet", "--json", "demo"],
        cwd=elsewhere,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert demo.returncode == 0, demo.stderr
    jobs = json.loads(demo.stdout)["jobs"]
    assert [job["summary"]["counts"]["read"] for job in jobs] == [3000, 36, 24, 1000]
    assert (elsewhere / "toolkit.sqlite").is_file()
