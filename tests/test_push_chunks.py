"""Cutting a push into chunks under the request limit, and the journal that makes it resumable.

(The push end to end, against a real `toolkit serve`, is in test_remote_push.py.)
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolkit.errors import OptionError
from toolkit.remote.push import ENVELOPE_BYTES, Journal, csv_lines, json_escaped_bytes, plan_chunks


def _frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(3)
    return pd.DataFrame(
        {
            "Reference": [f"DA-{i:06d}" for i in range(rows)],
            "Notes": rng.choice(
                ['roof "gone", walls ok', "Zoë's shed\nflooded", "tab\there", "plain", ""], rows
            ),
            "Occupants": rng.integers(0, 9, rows).astype(str),
        },
        index=pd.RangeIndex(1, rows + 1, name="row"),
        dtype="string",
    )


def test_csv_lines_round_trip_through_a_csv_reader() -> None:
    frame = _frame(50)
    header, lines = csv_lines(frame)
    parsed = list(csv.reader(io.StringIO(header + "\n" + "\n".join(lines) + "\n")))
    assert parsed[0] == ["Reference", "Notes", "Occupants"]
    assert parsed[1:] == frame.fillna("").to_numpy().tolist()


def test_escaped_sizes_are_exactly_what_json_sends() -> None:
    lines = ['a,"b ""c"""', "Zoë\nnew line", "tab\tand\\slash", "\x01 control", ""]
    expected = [len(json.dumps(line + "\n", ensure_ascii=False).encode()) - 2 for line in lines]
    assert json_escaped_bytes(lines).tolist() == expected


def test_chunks_stay_under_the_limit_keep_every_row_once_and_in_order() -> None:
    frame = _frame(3000)
    header, lines = csv_lines(frame)
    limit = ENVELOPE_BYTES + 20_000
    chunks = plan_chunks(header, lines, frame.index.to_numpy(), max_bytes=limit)
    assert len(chunks) > 3
    seen: list[list[str]] = []
    for chunk in chunks:
        body = {"mode": "schedule", "data": chunk.data}
        assert len(json.dumps(body, ensure_ascii=False).encode()) < limit
        rows = list(csv.reader(io.StringIO(chunk.data)))
        assert rows[0] == ["Reference", "Notes", "Occupants"]
        assert len(rows) - 1 == chunk.count
        seen.extend(rows[1:])
    assert seen == frame.fillna("").to_numpy().tolist()
    assert chunks[0].rows[0] == 1
    assert chunks[-1].rows[1] == 3000


def test_a_row_bigger_than_the_limit_is_refused_by_number() -> None:
    frame = pd.DataFrame({"Notes": ["small", "x" * 5000]}, index=[1, 2], dtype="string")
    header, lines = csv_lines(frame)
    with pytest.raises(OptionError, match="row 2 alone is over"):
        plan_chunks(header, lines, frame.index.to_numpy(), max_bytes=ENVELOPE_BYTES + 1000)


def test_the_journal_is_kept_per_file_and_purpose(tmp_path: Path) -> None:
    source = tmp_path / "items.csv"
    source.write_text("Reference\nA\n")
    key = {"sourceSha256": "abc", "params": {"importRule": "r"}}
    journal = Journal.open(source, key)
    journal.chunks["sha1"] = {"index": 0, "jobId": 7, "status": "COMPLETE"}
    journal.save()
    assert (tmp_path / "items.csv.push.json").exists()
    assert Journal.open(source, key).chunks == {
        "sha1": {"index": 0, "jobId": 7, "status": "COMPLETE"}
    }
    # Another rule, server or file content: a fresh journal.
    assert Journal.open(source, {**key, "params": {"importRule": "other"}}).chunks == {}
    (tmp_path / "items.csv.push.json").write_text("{not json")
    with pytest.raises(OptionError, match="push journal is damaged"):
        Journal.open(source, key)


def test_the_offline_report_lists_the_first_problems_and_counts_them_all(tmp_path: Path) -> None:
    from toolkit.importing.pipeline import ImportRequest
    from toolkit.remote.push import Pusher

    rules = Path(__file__).resolve().parent / "fixtures_rules"
    source = tmp_path / "facilities.csv"
    source.write_text("Code,Name,Capacity\n" + "".join(f"F{i},Hall,lots\n" for i in range(30)))
    rows, offline = Pusher(site=None, rule_paths=(rules,)).prepare(
        ImportRequest("asset", "test-facilities", source)
    )
    assert rows.empty
    assert (offline["rejectedRows"], offline["problemCount"]) == (30, 30)
    assert len(offline["rejected"]) == 20
    assert offline["rejected"][0] == {
        "row": 1,
        "column": "Capacity",
        "value": "lots",
        "reason": "is not a whole number",
    }
