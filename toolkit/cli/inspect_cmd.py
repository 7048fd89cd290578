"""`toolkit inspect`: what a source file holds, as the import will read it."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from toolkit.cli import cli
from toolkit.cli.context import (
    global_options,
    note,
    print_renderable,
    progress_bar,
    warn,
)
from toolkit.cli.engine_opts import chosen_engine, engine_options
from toolkit.cli.files import input_file, source_options
from toolkit.cli.render import render

if TYPE_CHECKING:
    import geopandas as gpd

    from toolkit.sources import SourceReport
    from toolkit.sources.chunks import ChunkedSource

_SHORT_WKT = 60
_SHORT_VALUE = 40


@cli.command()
@click.argument("file", type=click.Path(allow_dash=True, path_type=Path))
@click.option("--layer", default=None, help="Layer of a zip/GeoPackage, or sheet of an XLSX.")
@source_options
@click.option("--crs", default=None, help="CRS of a source without one, e.g. EPSG:7855.")
@click.option("--wkt-column", default=None, help="Column holding WKT geometry.")
@click.option("--lat-column", default=None, help="Column holding latitude (or northing).")
@click.option("--lon-column", default=None, help="Column holding longitude (or easting).")
@click.option("--head", type=click.IntRange(min=0), default=0, help="Also show the first N rows.")
@engine_options
@global_options
def inspect(
    file: Path,
    layer: str | None,
    file_format: str | None,
    encoding: str | None,
    delimiter: str | None,
    quotechar: str | None,
    crs: str | None,
    wkt_column: str | None,
    lat_column: str | None,
    lon_column: str | None,
    head: int,
    engine: str | None,
    scheduler: str | None,
) -> None:
    """Read FILE (- for stdin) as an import would and report what was found.

    Shows the format, rows, columns, encoding (and how it was decided), source CRS,
    geometry types, repaired/missing/empty geometries, and every problem with its row
    and line. Rows are numbered from 1 at the first record after the header. A CSV is
    read in parts (memory follows the part, not the file); with --engine dask its parts
    are read on the cluster's workers.

    \b
    Examples:
      toolkit inspect parcels.zip
      toolkit inspect items.csv --head 5
      toolkit inspect export.shp.zip --layer parcels --crs EPSG:7855
      toolkit inspect legacy.csv --encoding windows-1252 --json
      toolkit inspect export.dat --format csv --delimiter tab --quotechar none
      unzip -p backup.zip items.csv | toolkit inspect - --head 3
      toolkit inspect --engine dask --scheduler tcp://10.0.0.5:8786 \\
          sample_data/damage_assessments.csv
    """
    from toolkit.scratch import scratch_folder
    from toolkit.sources.chunks import read_chunks

    with (
        input_file(file, file_format) as (source, name),
        progress_bar() as progress,
        chosen_engine(engine, scheduler) as dask,
        scratch_folder("toolkit-inspect-") as folder,
    ):
        chunked = read_chunks(
            source,
            Path(folder) / "parts",
            chunk_rows=dask.partition_rows if dask is not None else None,
            name=name,
            format=file_format,
            delimiter=delimiter,
            quotechar=quotechar,
            layer=layer,
            encoding=encoding,
            crs=crs,
            wkt_column=wkt_column,
            lat_column=lat_column,
            lon_column=lon_column,
            progress=progress,
        )
        frame = (
            dask.read_parts(chunked, progress, head)
            if dask is not None
            else _read_parts(chunked, head)
        )
        report = chunked.finish()
    for warning in report.warnings:
        warn(warning)
    document = report.to_dict()
    if head:
        document["head"] = head_rows(frame, head)

    def show(_document: dict[str, Any]) -> None:
        _print_report(report)
        if head:
            _print_head(frame, head)
        note(f"{report.path}: {report.rows} rows, {len(report.problems)} problems")

    render(document, human=show)


def _read_parts(chunked: ChunkedSource, head: int) -> gpd.GeoDataFrame:
    """Read every part of ``chunked`` here (its report is whole then); its first ``head``
    rows."""
    import geopandas as gpd
    import pandas as pd

    frames: list[gpd.GeoDataFrame] = []
    wanted = head
    for i in range(chunked.count):
        frame = chunked.read(i).frame
        if wanted > 0 or not frames:
            frames.append(frame.iloc[: max(wanted, 0)])
            wanted -= len(frames[-1])
    return frames[0] if len(frames) == 1 else gpd.GeoDataFrame(pd.concat(frames))


def head_rows(frame: gpd.GeoDataFrame, count: int) -> list[dict[str, Any]]:
    """The first ``count`` rows as JSON objects: ``row``, the columns, geometry as WKT."""
    import pandas as pd

    part = frame.head(count)
    wkt = part.geometry.to_wkt()
    rows = []
    labels: list[int] = part.index.tolist()  # row numbers: a read file is indexed by row
    for row, (_, values), text in zip(
        labels, part.drop(columns=part.geometry.name).iterrows(), wkt, strict=True
    ):
        record: dict[str, Any] = {"row": int(row)}
        record.update({str(k): _plain(v) for k, v in values.items()})
        record["geometry"] = None if pd.isna(text) else text
        rows.append(record)
    return rows


def _plain(value: Any) -> Any:
    """A cell as a JSON value: missing is None, numpy scalars unwrapped, dates as ISO text."""
    import pandas as pd

    if value is None or (not isinstance(value, list | tuple | dict) and pd.isna(value)):
        return None
    if isinstance(value, str | bool | int | float):
        return value
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if hasattr(value, "item"):
        return value.item()
    return str(value)


def _print_report(report: SourceReport) -> None:
    from rich.table import Table

    data = report.to_dict()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    shown = {
        "file": data["path"],
        "format": data["format"],
        "layer": data["layer"],
        "rows": data["rows"],
        "columns": ", ".join(data["columns"]),
        "encoding": f"{data['encoding']} ({data['encodingSource']})" if data["encoding"] else None,
        "delimiter": repr(data["delimiter"]) if data["delimiter"] else None,
        "crs": data["crs"],
        "geometry": data["geometrySource"],
        "geometry types": ", ".join(f"{k} {v}" for k, v in data["geometryTypes"].items()),
        "repaired": data["repairedGeometries"],
        "missing geometry": data["nullGeometries"],
        "empty geometry": data["emptyGeometries"],
        "problems": len(data["problems"]),
    }
    for key, value in shown.items():
        if value not in (None, ""):
            table.add_row(key, str(value))
    print_renderable(table)
    if report.problems:
        problems = Table("row", "line", "column", "value", "problem")
        for problem in report.problems:
            problems.add_row(
                _text(problem.row),
                _text(problem.line),
                _text(problem.column),
                _short(problem.value, _SHORT_VALUE),
                problem.message,
            )
        print_renderable(problems)


def _print_head(frame: gpd.GeoDataFrame, count: int) -> None:
    from rich.table import Table

    rows = head_rows(frame, count)
    columns = ["row", *[c for c in frame.columns if c != frame.geometry.name], "geometry"]
    table = Table(*[str(c) for c in columns])
    for record in rows:
        table.add_row(
            *[
                _short(record.get(str(c)), _SHORT_WKT if c == "geometry" else _SHORT_VALUE)
                for c in columns
            ]
        )
    print_renderable(table)


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _short(value: object, width: int) -> str:
    text = _text(value)
    return text if len(text) <= width else text[: width - 1] + "…"
