"""How an import's rows were linked (``import_link``): kept as the link stage gave them,
on both stores, missing values as SQL NULL whatever the column's dtype."""

from __future__ import annotations

import json
import logging
import math
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pandas as pd
import pytest

from toolkit.errors import StoreError
from toolkit.store import SiteStore, link_recorder
from toolkit.store.link_recorder import LinkRecorder

NAN = math.nan


def _part_with_fuzzy() -> pd.DataFrame:
    """Links as ``link_rows`` gives them: the asset id float for its missing value, text
    of each kind of pandas column, probability and evidence only where fuzzy scored."""
    return pd.DataFrame(
        {
            "row": [1, 2, 3],
            "reference": pd.array(["A", "B", None], dtype="str"),
            "query": pd.array(["12 SMITH ST", None, "3 HIGH ST"], dtype="string"),
            "asset_id": [100001.0, NAN, 100003.0],
            "mode": pd.array(["soundex", None, "fuzzy"], dtype=object),
            "accuracy": [90.0, NAN, 75.5],
            "candidates": [1, 0, 2],
            "err": pd.array([None, "soundex: no match", None], dtype="str"),
            "probability": [NAN, NAN, 0.93],
            "evidence": pd.array([None, None, '{"number":5.919,"street":7.281}'], dtype="string"),
        }
    )


def _part_without_fuzzy() -> pd.DataFrame:
    """A later part: every row linked (no reason), no fuzzy columns at all, an Int64 id."""
    return pd.DataFrame(
        {
            "row": [4, 5],
            "reference": ["D", "E"],
            "query": ["", ""],
            "asset_id": pd.array([100004, 100005], dtype="Int64"),
            "mode": ["geo", "geo"],
            "accuracy": [100.0, 100.0],
            "candidates": [1, 1],
            "err": pd.array([None, None], dtype="string"),
        }
    )


def test_links_come_back_as_recorded_with_missing_values_null(any_site: SiteStore) -> None:
    store = any_site
    job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    store.jobs.record_links(job, _part_with_fuzzy())
    store.jobs.record_links(job, _part_without_fuzzy(), append=True)
    kept = store.jobs.links(job)

    assert kept["row"].tolist() == [1, 2, 3, 4, 5]
    assert kept["reference"].tolist()[:2] == ["A", "B"] and pd.isna(kept["reference"][2])
    assert kept["asset_id"].astype("Int64").tolist() == [100001, pd.NA, 100003, 100004, 100005]
    assert kept["candidates"].tolist() == [1, 0, 2, 1, 1]
    assert kept["accuracy"].fillna(-1).tolist() == [90.0, -1, 75.5, 100.0, 100.0]
    assert kept["probability"].fillna(-1).tolist() == [-1, -1, 0.93, -1, -1]
    text = kept[["query", "mode", "err"]].astype(object)
    assert text.where(text.notna(), None).values.tolist() == [
        ["12 SMITH ST", "soundex", None],
        [None, None, "soundex: no match"],
        ["3 HIGH ST", "fuzzy", None],
        ["", "geo", None],
        ["", "geo", None],
    ]
    # PostgreSQL keeps the evidence as jsonb, so its text is spaced its own way.
    evidence = [None if pd.isna(e) else json.loads(e) for e in kept["evidence"]]
    assert evidence == [None, None, {"number": 5.919, "street": 7.281}, None, None]
    # Missing is NULL in the table itself (never a NaN, nor the text "nan"), ids whole.
    nulls = store.db.connection.execute(
        "SELECT row, reference IS NULL, query IS NULL, asset_id IS NULL, mode IS NULL, "
        "accuracy IS NULL, err IS NULL, probability IS NULL, evidence IS NULL, "
        "asset_id = CAST(asset_id AS INTEGER) FROM import_link WHERE job_id = ? ORDER BY row",
        (job,),
    ).fetchall()
    assert [tuple(bool(v) if i else v for i, v in enumerate(r)) for r in nulls] == [
        (1, False, False, False, False, False, True, True, True, True),
        (2, False, True, True, True, True, False, True, True, False),
        (3, True, False, False, False, False, True, False, False, True),
        (4, False, False, False, False, False, True, True, True, True),
        (5, False, False, False, False, False, True, True, True, True),
    ]


def test_recording_again_replaces_a_jobs_links(any_site: SiteStore) -> None:
    store = any_site
    job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    store.jobs.record_links(job, _part_with_fuzzy())
    store.jobs.record_links(job, _part_without_fuzzy())
    assert store.jobs.links(job)["row"].tolist() == [4, 5]
    assert store.jobs.links(job)["evidence"].isna().all()


def test_nullable_integers_with_missing_values_are_whole_or_null(any_site: SiteStore) -> None:
    """An ``Int64`` id or count with a missing value (pandas turns such a column into
    floats with NaN on the way to numpy) is kept as whole numbers and NULL."""
    store = any_site
    job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    part = _part_without_fuzzy()
    part["asset_id"] = pd.array([100004, None], dtype="Int64")
    part["candidates"] = pd.array([None, 3], dtype="Int64")
    store.jobs.record_links(job, part)
    kept = store.db.connection.execute(
        "SELECT row, asset_id, candidates FROM import_link WHERE job_id = ? ORDER BY row",
        (job,),
    ).fetchall()
    assert [tuple(r) for r in kept] == [(4, 100004, None), (5, None, 3)]
    assert all(type(v) is int for r in kept for v in r if v is not None)


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("toolkit-links")]


def _processes(recorder: LinkRecorder) -> list[subprocess.Popen[bytes]]:
    """The recorder's recording process, if it has one now."""
    process = recorder._process
    return [] if process is None else [process]


@pytest.mark.parametrize("own_process", [False, True])
def test_a_recorder_keeps_the_parts_as_recording_them_at_once_would(
    any_site: SiteStore, own_process: bool
) -> None:
    """Recorded in a thread and on a connection of its own (``own_process``: by a
    process of its own, on a SQLite site) while the caller goes on: the same rows as
    ``record_links`` part by part, in order, and nothing left running."""
    store = any_site
    at_once = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    store.jobs.record_links(at_once, _part_with_fuzzy())
    store.jobs.record_links(at_once, _part_without_fuzzy(), append=True)
    behind = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    recorder = LinkRecorder(store, own_process=own_process)
    recorder.start()
    processes = _processes(recorder)
    assert len(processes) == (own_process and store.db.dialect == "sqlite")
    recorder.record(behind, _part_with_fuzzy(), append=False)
    recorder.record(behind, _part_without_fuzzy(), append=True)
    recorder.finish()
    kept = store.jobs.links(behind)
    assert kept["row"].tolist() == [1, 2, 3, 4, 5]
    pd.testing.assert_frame_equal(kept, store.jobs.links(at_once))
    assert _writers() == []
    assert [p.returncode for p in processes] == [0] * len(processes)


@pytest.mark.parametrize("own_process", [False, True])
def test_a_part_the_recorder_cannot_write_is_raised_and_the_parts_before_stay(
    any_site: SiteStore, caplog: pytest.LogCaptureFixture, own_process: bool
) -> None:
    """The second part repeats a row (the table's key refuses it): ``finish`` raises the
    store's error (from the recording process too), the first part's links stay (each
    part is its own transaction, as recorded at once), and the writer has ended."""
    store = any_site
    job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    recorder = LinkRecorder(store, own_process=own_process)
    recorder.record(job, _part_with_fuzzy(), append=False)
    recorder.record(job, _part_with_fuzzy().iloc[:1], append=True)
    with pytest.raises(store.db.errors):
        recorder.finish()
    assert store.jobs.links(job)["row"].tolist() == [1, 2, 3]
    assert _writers() == []
    # Let go on the caller's own failure instead, the writer's is logged, not raised.
    recorder = LinkRecorder(store, own_process=own_process)
    recorder.record(job, _part_with_fuzzy().iloc[:1], append=True)
    with caplog.at_level(logging.WARNING, logger="toolkit.store.link_recorder"):
        recorder.close()
    assert "recording an import's links failed" in caplog.text
    assert store.jobs.links(job)["row"].tolist() == [1, 2, 3]
    assert _writers() == []


def test_a_recording_process_that_ends_early_fails_the_recording_clearly(
    sqlite_site: SiteStore,
) -> None:
    """The recording process killed between parts: the next part's recording raises a
    store error saying that process ended (and how), not a pipe's; the parts it recorded
    stay, and nothing is left running."""
    store = sqlite_site
    job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    recorder = LinkRecorder(store, own_process=True)
    recorder.record(job, _part_with_fuzzy(), append=False)
    recorder._wait()
    (process,) = _processes(recorder)
    process.kill()
    process.wait()
    recorder.record(job, _part_without_fuzzy(), append=True)
    with pytest.raises(StoreError, match=r"the process recording the import's links ended "
                       r"\(exit status -9\)"):  # fmt: skip
        recorder.finish()
    assert store.jobs.links(job)["row"].tolist() == [1, 2, 3]
    assert _writers() == [] and _processes(recorder) == []


@pytest.mark.parametrize("why", ["cannot start", "cannot open"])
def test_links_are_recorded_here_when_their_process_cannot_record_them(
    sqlite_site: SiteStore,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    tmp_path: Path,
    why: str,
) -> None:
    """An interpreter that cannot run the toolkit as a program (embedded, frozen; here one
    that exits at once), or a process that cannot open the site file: the links are
    recorded in this process instead, every part as it would have been, with a warning
    saying why, and nothing is left running."""
    store = sqlite_site
    if why == "cannot start":
        monkeypatch.setattr(sys, "executable", shutil.which("false"))
    else:
        start = link_recorder._start
        monkeypatch.setattr(
            link_recorder, "_start", lambda path, site: start(tmp_path / "gone.sqlite", site)
        )
    at_once = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    store.jobs.record_links(at_once, _part_with_fuzzy())
    store.jobs.record_links(at_once, _part_without_fuzzy(), append=True)
    job = store.jobs.create(import_type="item", import_rule="r", user_id=None, params={})
    recorder = LinkRecorder(store, own_process=True)
    with caplog.at_level(logging.WARNING, logger="toolkit.store.link_recorder"):
        recorder.record(job, _part_with_fuzzy(), append=False)
        recorder.record(job, _part_without_fuzzy(), append=True)
        recorder.finish()
    pd.testing.assert_frame_equal(store.jobs.links(job), store.jobs.links(at_once))
    expected = {
        "cannot start": "its own process could not start (exit status 1)",
        "cannot open": "its own process could not open the site file",
    }[why]
    assert f"an import's links are recorded in this process: {expected}" in caplog.text
    assert _writers() == [] and _processes(recorder) == []
