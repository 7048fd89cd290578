"""Clerical review: the review file is written, marked, fed back, remembered and used."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from toolkit.cli import cli
from toolkit.errors import MatchingError
from toolkit.matching import normalise
from toolkit.matching.review import decisions_from_review
from toolkit.site import LocalSite

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
ITEMS = SAMPLE / "damage_assessments.csv"


def _run(store: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["--store", str(store), *args])
    return result.exit_code, result.stdout, result.stderr


def _lookup(store: Path, *extra: str) -> pd.DataFrame:
    out = store.parent / "matches.csv"
    code, _, err = _run(
        store, "lookup", "--file", str(ITEMS), "--column", "Address", "--code-column",
        "Reference", "--max-rank", "3", "--fallback-mode", "fuzzy", "-o", str(out), *extra,
    )  # fmt: skip
    assert code in (0, 3), err  # 3: some queries found no asset
    return pd.read_csv(out, dtype=str, keep_default_na=False)


def test_review_round_trip_is_remembered_and_used_by_lookup_and_import(tmp_path: Path) -> None:
    store = tmp_path / "site.sqlite"
    code, _, err = _run(
        store, "import", str(SAMPLE / "parcels.zip"), "--type", "asset", "--rule",
        "property-assets",
    )  # fmt: skip
    assert code == 0, err
    review = tmp_path / "review.csv"
    before = _lookup(store, "--review", str(review))
    rows = list(csv.DictReader(review.open(encoding="utf-8")))
    assert rows and set(rows[0]) >= {"reference", "query", "candidate_1_id", "chosen"}
    truth = pd.read_csv(SAMPLE / "damage_assessments_truth.csv", dtype=str).set_index("Reference")[
        "asset_id"
    ]
    # The reviewer marks the true parcel by its number where it is listed, else "none".
    marked = 0
    chosen_refs = set()
    # A text that names different parcels in different rows cannot be decided: left blank.
    texts = normalise(pd.Series([row["query"] for row in rows], dtype="str"))
    repeated = set(texts[texts.duplicated()])  # the same text twice in the file
    for row, text in zip(rows, texts, strict=True):
        if text in repeated:
            continue
        right = truth.get(row["reference"])
        numbers = [i for i in (1, 2, 3) if row[f"candidate_{i}_id"] == right]
        row["chosen"] = str(numbers[0]) if numbers else "none"
        marked += bool(numbers)
        if numbers:
            chosen_refs.add(row["reference"])
    assert marked >= 5
    with review.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)

    after = _lookup(store, "--links", str(review))
    reviewed = after[after["mode"] == "reviewed"]
    assert len(reviewed) >= marked
    # The reviewed rows are right; other rows of the same text follow the same decision.
    mine = reviewed[reviewed["reference"].isin(chosen_refs)]
    assert len(mine) == marked
    wrong = mine[mine["asset_id"] != mine["reference"].map(truth)]
    assert wrong.empty, wrong.assign(truth=wrong["reference"].map(truth)).to_string()
    rejected = after["err"].str.contains("a reviewer decided that no asset matches")
    decided = sum(1 for row in rows if row["chosen"])
    assert rejected.sum() >= decided - marked
    assert (after["asset_id"] != "").sum() > (before["asset_id"] != "").sum()

    # Remembered by the site: the next lookup, without the file, links the same way.
    again = _lookup(store)
    assert (again["mode"] == "reviewed").sum() == len(reviewed)
    with LocalSite(store, "default") as site:
        assert len(site.store.decisions.all()) == decided

    # And an import of the same rows uses the decisions.
    code, out, err = _run(
        store, "event", "create", "Flood",
    )  # fmt: skip
    code, out, err = _run(
        store, "--json", "import", str(ITEMS), "--type", "item", "--rule",
        "damage-assessments", "--event-id", "1", "--region-id", "1",
    )  # fmt: skip
    assert code == 0, err
    job = json.loads(out)
    with LocalSite(store, "default") as site:
        links = site.store.jobs.links(job["id"])
    assert (links["mode"] == "reviewed").sum() >= 1


def test_a_chosen_value_that_is_no_candidate_number_is_refused() -> None:
    frame = pd.DataFrame(
        {
            "query": ["12 SMITH ST", "14 HIGH ST"],
            "candidate_1_id": ["A1", "A2"],
            "chosen": ["1", "7"],
        }
    )
    with pytest.raises(MatchingError, match=r"review\.csv: row 3, column chosen: '7'; allowed"):
        decisions_from_review(frame, "review.csv")
    frame["chosen"] = ["1", "none"]
    decisions = decisions_from_review(frame, "review.csv")
    assert decisions["query"].tolist() == ["12 SMITH STREET", "14 HIGH STREET"]
    assert decisions["asset_id"].iloc[0] == "A1" and pd.isna(decisions["asset_id"].iloc[1])
