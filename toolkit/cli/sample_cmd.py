"""`toolkit sample`: make synthetic council data to try the toolkit on and to measure it with."""

from __future__ import annotations

from pathlib import Path

import click

from toolkit.cli import cli
from toolkit.cli.context import global_options, note, progress_bar
from toolkit.cli.render import render


@cli.group()
@global_options
def sample() -> None:
    """Synthetic parcels and damage-assessment items, at any scale.

    \b
    Examples:
      toolkit sample generate --assets 10000 --items 10000 --out workload
    """


@sample.command()
@click.option("--assets", type=click.IntRange(min=1), required=True, help="Number of parcels.")
@click.option("--items", type=click.IntRange(min=0), required=True, help="Number of item rows.")
@click.option("--seed", type=int, default=0, show_default=True, help="Same seed, same bytes.")
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    required=True,
    help="Folder to write into (created if missing).",
)
@click.option(
    "--items-name",
    default="items",
    show_default=True,
    help="Base name of the items CSV and of its truth file (<name>_truth.csv).",
)
@click.option("--extras", is_flag=True, help="Also write assets.csv and users.csv.")
@click.option("--overwrite", is_flag=True, help="Replace files that already exist.")
@global_options
def generate(
    assets: int,
    items: int,
    seed: int,
    out_dir: Path,
    items_name: str,
    extras: bool,
    overwrite: bool,
) -> None:
    """Write parcels.zip, items.csv and items_truth.csv (the true parcel of every item row).

    Parcels are polygons in EPSG:7855 around Ballarat; item rows refer to them through
    faulty addresses, property numbers, coordinates or WKT, with a few bad rows.

    \b
    Examples:
      toolkit sample generate --assets 1000000 --items 1000000 --seed 1 --out /tmp/workload
      toolkit --json sample generate --assets 500 --items 200 --out small --overwrite
      toolkit sample generate --assets 3000 --items 1000 --extras --out my-sample
    """
    from toolkit.sample.generate import generate as generate_sample

    with progress_bar() as progress:
        result = generate_sample(
            out_dir,
            assets=assets,
            items=items,
            seed=seed,
            items_name=items_name,
            extras=extras,
            overwrite=overwrite,
            progress=progress,
        )
    render(result.to_dict())  # the notes below are the human answer, on stderr
    bad = sum(count for kind, count in result.kinds.items() if kind.startswith("bad_"))
    note(
        f"Wrote {result.assets:,} parcels ({result.localities} localities, {result.streets:,} "
        f"streets, {result.multipart_parcels:,} multipart, {result.invalid_parcels:,} invalid) "
        f"and {result.items:,} item rows ({bad:,} bad) to {result.out_dir}"
    )
    for path in result.files.values():
        note(f"  {path}")
