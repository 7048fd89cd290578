"""Synthetic council data at any scale: property parcels, damage-assessment items, their truth.

:func:`generate` lays out a town of localities, streets and lots around Ballarat (in
GDA2020 / MGA zone 55), writes the lots as a zipped Shapefile of parcels, and writes register
items that refer to those parcels through the kinds of faulty addresses, property numbers,
coordinates and WKT that real field data has, with the true parcel of every item row beside
them in a truth file. Everything is built on whole arrays (numpy, shapely 2, pyarrow compute);
the only loops are over localities, kinds and output files. Output is byte-identical for a seed.

This module runs the steps and moves the files into place; the town is built in ``parcels``,
the item rows in ``items``, the extras in ``extras``, and CSV is written by ``columns``.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import numpy as np
import pyarrow.compute as pc

from toolkit.errors import OptionError, ToolkitError
from toolkit.progress import Progress, no_progress
from toolkit.sample.columns import write_csv
from toolkit.sample.extras import ASSET_COLUMNS, USER_COLUMNS, assets_table, users_table
from toolkit.sample.items import (
    ITEM_COLUMNS,
    KIND_SHARES,
    KINDS,
    NO_PARCEL_KINDS,
    TRUTH_COLUMNS,
    Kind,
    build_items,
)
from toolkit.sample.parcels import ITEM_CRS, PARCEL_CRS, PARCEL_FIELDS, layout, write_parcels

# The public names that lived here before the generator was split, for code that imports
# them from this module.
__all__ = [
    "ASSET_COLUMNS",
    "ITEM_COLUMNS",
    "ITEM_CRS",
    "KINDS",
    "KIND_SHARES",
    "MAX_ASSETS",
    "NO_PARCEL_KINDS",
    "PARCEL_CRS",
    "PARCEL_FIELDS",
    "TRUTH_COLUMNS",
    "USER_COLUMNS",
    "GenerateResult",
    "Kind",
    "generate",
]

MAX_ASSETS: Final = 5_000_000  # beyond this a locality runs out of distinct street names


@dataclass(frozen=True)
class GenerateResult:
    """What :func:`generate` wrote."""

    out_dir: Path
    files: dict[str, Path]
    seed: int
    assets: int
    items: int
    localities: int
    streets: int
    unit_parcels: int
    multipart_parcels: int
    invalid_parcels: int
    kinds: dict[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-ready values."""
        return {
            "outDir": str(self.out_dir),
            "files": {name: str(path) for name, path in self.files.items()},
            "seed": self.seed,
            "assets": self.assets,
            "items": self.items,
            "localities": self.localities,
            "streets": self.streets,
            "unitParcels": self.unit_parcels,
            "multipartParcels": self.multipart_parcels,
            "invalidParcels": self.invalid_parcels,
            "kinds": dict(self.kinds),
        }


def generate(
    out_dir: Path,
    *,
    assets: int,
    items: int,
    seed: int = 0,
    items_name: str = "items",
    extras: bool = False,
    overwrite: bool = False,
    progress: Progress | None = None,
) -> GenerateResult:
    """Write ``parcels.zip``, ``<items_name>.csv`` and ``<items_name>_truth.csv`` into ``out_dir``.

    With ``extras`` also ``assets.csv`` (other council assets, WKT in EPSG:4326) and
    ``users.csv``. Files are built in a temporary folder beside them and moved into place
    only when all are written, so a failure leaves nothing half-written.
    """
    report = progress or no_progress
    _check_counts(assets, items)
    if not items_name or "/" in items_name or "\\" in items_name or items_name.startswith("."):
        raise OptionError(f"items name {items_name!r} must be a plain file name without a folder")
    names = {
        "parcels": "parcels.zip",
        "items": f"{items_name}.csv",
        "truth": f"{items_name}_truth.csv",
    }
    if extras:
        names |= {"assets": "assets.csv", "users": "users.csv"}
    out_dir = Path(out_dir)
    targets = {key: out_dir / name for key, name in names.items()}
    if not overwrite:
        for path in targets.values():
            if path.exists():
                raise ToolkitError(
                    f"{path} already exists; pass overwrite=True (--overwrite) to replace it"
                )
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ToolkitError(f"cannot create output folder {out_dir}: {exc}") from exc

    rng = np.random.default_rng(seed)
    steps = 5 if extras else 4
    report("generate", 0, steps)
    parcels = layout(assets, rng)
    report("generate", 1, steps)
    with tempfile.TemporaryDirectory(prefix=".toolkit-sample-", dir=out_dir) as tmp:
        staging = Path(tmp)
        write_parcels(parcels, staging / names["parcels"], staging / "shp")
        report("generate", 2, steps)
        item_table, truth_table = build_items(parcels, items, rng)
        report("generate", 3, steps)
        write_csv(item_table, staging / names["items"])
        write_csv(truth_table, staging / names["truth"])
        report("generate", 4, steps)
        if extras:
            write_csv(assets_table(parcels, rng), staging / names["assets"])
            write_csv(users_table(), staging / names["users"])
            report("generate", 5, steps)
        for key, name in names.items():
            (staging / name).replace(targets[key])

    kinds = pc.value_counts(truth_table["kind"]).to_pylist()
    counts = {entry["values"]: entry["counts"] for entry in kinds}
    return GenerateResult(
        out_dir=out_dir,
        files=targets,
        seed=seed,
        assets=assets,
        items=items,
        localities=int(np.unique(parcels.locality).size),
        streets=parcels.streets,
        unit_parcels=int(np.count_nonzero(parcels.unit)),
        multipart_parcels=int(parcels.multipart.size),
        invalid_parcels=int(parcels.bowtie.size),
        kinds={kind: counts.get(kind, 0) for kind in KINDS},
    )


def _check_counts(assets: int, items: int) -> None:
    if not 1 <= assets <= MAX_ASSETS:
        raise OptionError(f"assets must be between 1 and {MAX_ASSETS:,}, not {assets}")
    if items < 0:
        raise OptionError(f"items must be 0 or more, not {items}")
