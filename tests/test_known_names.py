"""A name that names nothing is an error listing what there is, never an empty answer.

The same checks on a server are in tests/test_contract.py (both faces, 400).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from toolkit.cli import cli

RULES = Path(__file__).resolve().parent / "fixtures_rules"
SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site with the sample's other assets, an event and two observations."""
    root = tmp_path_factory.mktemp("names")
    path = root / "site.sqlite"
    observations = root / "obs.csv"
    observations.write_text("Reference,Level,Notes\nR1,Low,ok\nR2,High,bad\n", encoding="utf-8")
    for args in (
        ["import", str(SAMPLE / "assets.csv"), "--type", "asset", "--rule", "assets-csv"],
        ["event", "create", "Flood 2026"],
        ["event", "create", "Storm 2026"],
        [
            *("import", str(observations), "--type", "item", "--rule", "test-observations"),
            *("--event-id", "1", "--region-id", "1"),
        ],
    ):
        result = _run(path, *args)
        assert result.exit_code == 0, result.output
    return path


def _run(store: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(cli, ["--store", str(store), "--rules", str(RULES), *args])


@pytest.mark.parametrize(
    ("command", "message"),
    [
        (
            ["item", "list", "--register", "observations"],
            "--register 'observations' is not a register of this site; registers: observation",
        ),
        (
            ["item", "list", "--register", "observation", "--event-id", "7"],
            "--event-id 7 is not an event of this site; events: 1 (Flood 2026), 2 (Storm 2026)",
        ),
        (
            ["item", "list", "--register", "observation", "--cql", "levle:High"],
            "cql: 'levle' is not a field of register 'observation'; its fields: reference, "
            "level, count, notes, id, registerId,",
        ),
        (
            ["asset", "list", "--type", "school"],
            "type 'school' is not an asset class of this site; classes: Bridge, Culvert, "
            "Evacuation Centre, Fire Station, Park, Reserve, School",
        ),
        (
            ["lookup", "BALLARAT HIGH SCHOOL", "--asset-class", "Schools"],
            "--asset-class 'Schools' is not a class of the assets; classes: Bridge, Culvert, "
            "Evacuation Centre, Fire Station, Park, Reserve, School",
        ),
        (["audit-log", "list", "--event-id", "3"], "--event-id 3 is not an event of this site"),
        (["audit-log", "list", "--item-id", "99"], "--item-id 99 is not an item of this site"),
        (
            ["audit-log", "list", "--import-job-id", "9"],
            "--import-job-id 9 is not an import job of this site",
        ),
        (["report", "run", "9"], "report 9 does not exist; reports: 1 (Register items"),
        (
            ["report", "run", "1", "--param", "eventId=1", "--param", "status=open"],
            "parameter status 'open' is not one of: active, inactive, all",
        ),
        (["rules", "show", "damage-assesments"], "importRule 'damage-assesments' is not one of"),
    ],
    ids=lambda v: " ".join(v[:2]) if isinstance(v, list) else None,
)
def test_an_unknown_name_is_an_error_listing_the_known_ones(
    store: Path, command: list[str], message: str
) -> None:
    result = _run(store, *command)
    assert result.exit_code == 1, result.output
    assert result.stdout == ""
    assert result.stderr.startswith("Error: ")
    assert message in result.stderr


def test_known_names_still_answer(store: Path) -> None:
    found = _run(store, "--json", "item", "list", "--register", "observation", "--cql", "level:Hi*")
    assert found.exit_code == 0, found.output
    assert '"total": "1"' in found.stdout
    # An empty answer is still an answer when every name is known.
    empty = _run(store, "item", "list", "--register", "observation", "--event-id", "2")
    assert empty.exit_code == 0 and "Items: 0 of 0" in empty.stdout
