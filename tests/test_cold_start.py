"""Cold start (issue 17): what a command imports, asserted on modules, not on seconds.

``toolkit --help`` must not load the table, geometry or matching libraries (a second or
more cold on a busy machine), and a command on the embedded site must not load the HTTP
client. Each runs in a fresh interpreter, the way the user meets it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "geopandas", "pyarrow", "shapely", "rapidfuzz", "numpy", "pyogrio")

PROBE = """
import json, sys
from toolkit.cli import main
sys.argv = ["toolkit", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    code = exit.code
print(json.dumps({"code": code, "modules": sorted(sys.modules)}), file=sys.stderr)
"""


def loaded(*arguments: str, cwd: Path) -> tuple[int, set[str], str]:
    """Run ``toolkit arguments`` in a new interpreter: exit status, top-level modules, out."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *arguments],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=120,
    )
    report = json.loads(done.stderr.strip().splitlines()[-1])
    return int(report["code"] or 0), {m.split(".")[0] for m in report["modules"]}, done.stdout


@pytest.mark.parametrize("arguments", [["--help"], ["ping", "--help"], ["import", "--help"]])
def test_help_loads_no_heavy_library(arguments: list[str], tmp_path: Path) -> None:
    code, modules, out = loaded(*arguments, cwd=tmp_path)
    assert code == 0
    assert "Usage: toolkit" in out
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert "httpx" not in modules
    assert "rich" not in modules


def test_ping_on_the_embedded_site_loads_no_table_geometry_or_http_library(
    tmp_path: Path,
) -> None:
    # ping opens the site file and asks its clock: the import pipeline, matching, reports
    # and geocoding (pandas, numpy, geopandas, pyogrio under them) stay unloaded.
    subprocess.run(
        [sys.executable, "-m", "toolkit", "init"], cwd=tmp_path, check=True, capture_output=True
    )
    code, modules, out = loaded("ping", cwd=tmp_path)
    assert code == 0
    assert "toolkit.sqlite: status 200" in out
    assert not modules & set(HEAVY), sorted(modules & set(HEAVY))
    assert "httpx" not in modules


def test_the_dummy_hash_is_made_by_a_server_not_at_import(tmp_path: Path) -> None:
    # An argon2 hash costs a few hundred milliseconds: not at import (every command paid
    # it), but before a server's first login, so an unknown username is never answered
    # faster or slower than a wrong password.
    subprocess.run(
        [sys.executable, "-m", "toolkit", "init"], cwd=tmp_path, check=True, capture_output=True
    )
    probe = (
        "import toolkit.server.app as app, toolkit.site.credentials as c\n"
        "before = c.dummy_hash.cache_info().currsize\n"
        "app.create_app('toolkit.sqlite')\n"
        "print(before, c.dummy_hash.cache_info().currsize, c.dummy_hash().startswith('$argon2'))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    assert done.stdout.split() == ["0", "1", "True"]


def test_a_lazy_module_is_imported_at_its_first_use() -> None:
    probe = (
        "import sys\n"
        "from toolkit.lazy import lazy\n"
        "fractions = lazy('fractions')\n"
        "before = 'fractions' in sys.modules\n"
        "half = fractions.Fraction(1, 2)\n"
        "print(before, 'fractions' in sys.modules, half, fractions.Fraction is type(half))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.split() == ["False", "True", "1/2", "True"]
