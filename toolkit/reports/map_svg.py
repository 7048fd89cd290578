"""A map as one self-contained SVG: parcel polygons coloured by worst damage level, a
legend, a scale bar, a north arrow and locality labels. No tiles, no script, no fetch.

Coordinates are EPSG:4326; they are drawn equirectangular at the data's mean latitude
(true to a fraction of a percent over a town or a region), north up. Geometries are
simplified to about half a pixel, and beyond :data:`MAX_SHAPES` a spread sample is
drawn (the caption says how many), so the page stays small. :func:`layout_map` is the
drawing; :func:`svg_figure` and :func:`toolkit.reports.map_png.map_png` render it.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import shapely

from toolkit.reports.charts import NO_DAMAGE, UNKNOWN, legend, severity_colours

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot

MAX_SHAPES = 20_000
WIDTH = 900.0
MAX_HEIGHT = 640.0
PAD = 16.0
METRES_PER_DEGREE = 111_320.0
NICE = (1, 2, 5)


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _scale_length(metres_wide: float) -> float:
    """A round length (1, 2, 5 x 10^n m) about a fifth of the map's width."""
    target = metres_wide / 5
    power = 10 ** math.floor(math.log10(max(target, 1e-9)))
    best = power
    for factor in NICE:
        if factor * power <= target:
            best = factor * power
    return float(best)


@dataclass
class Shape:
    """One geometry in page coordinates: rings (polygons closed) or points."""

    colour: str
    rings: list[tuple[np.ndarray, bool]]  # (N x 2 points, closed)
    points: list[tuple[float, float]]


@dataclass
class MapLayout:
    """Everything a map draws, in page pixels (north up): the same drawing becomes the
    HTML's SVG and the PNG of the XLSX (:mod:`toolkit.reports.map_png`)."""

    title: str
    width: float
    height: float
    map_bottom: float
    shapes: list[Shape]
    labels: list[tuple[str, float, float]]
    scale_y: float
    scale_bar: float
    scale_label: str
    north: tuple[float, float]
    levels: list[str]
    colours: list[str]
    legend_x: float
    caption: str


def _shapes(
    geometries: np.ndarray, colours: list[str], x0: float, y1: float, kx: float, ky: float
) -> list[Shape]:
    """Each geometry (polygons, lines or points) in page coordinates."""
    out = []
    for geometry, colour in zip(geometries, colours, strict=True):
        shape = Shape(colour, [], [])
        out.append(shape)
        if geometry is None or geometry.is_empty:
            continue
        for part in getattr(geometry, "geoms", [geometry]):
            kind = part.geom_type
            if kind == "Point":
                shape.points.append(((part.x - x0) * kx, (y1 - part.y) * ky))
                continue
            rings = (
                [part.exterior, *part.interiors]
                if kind == "Polygon"
                else [part]
                if kind in ("LineString", "LinearRing")
                else []
            )
            for ring in rings:
                xy = np.asarray(ring.coords)
                page = np.column_stack(((xy[:, 0] - x0) * kx, (y1 - xy[:, 1]) * ky))
                shape.rings.append((page, kind == "Polygon"))
    return out


def _path(shape: Shape) -> str:
    """SVG path data of one shape."""
    parts = [f"M{x:.1f} {y:.1f}h0" for x, y in shape.points]
    for page, closed in shape.rings:
        points = " ".join(f"{a:.1f} {b:.1f}" for a, b in page)
        parts.append(f"M{points}" + ("Z" if closed else ""))
    return "".join(parts)


def layout_map(
    title: str,
    wkb: Sequence[bytes | None],
    values: Sequence[str | None],
    levels: Sequence[str],
    localities: Sequence[str | None],
) -> MapLayout | None:
    """The drawing: ``wkb`` geometries coloured by ``values`` (one of ``levels``, none
    first; without levels every shape is one colour), labelled by locality; None when
    no geometry has a location."""
    geometries = shapely.from_wkb(np.asarray(wkb, dtype=object))
    present = ~shapely.is_missing(geometries) & ~shapely.is_empty(geometries)
    located = int(present.sum())
    if not located:
        return None
    index = np.flatnonzero(present)
    if len(index) > MAX_SHAPES:
        index = index[np.linspace(0, len(index) - 1, MAX_SHAPES).astype(np.int64)]
    shapes = geometries[index]
    x_min, y_min, x_max, y_max = shapely.total_bounds(shapes)
    shrink = math.cos(math.radians((y_min + y_max) / 2))
    span_x = max((x_max - x_min) * shrink, 1e-6)
    span_y = max(y_max - y_min, 1e-6)
    inner_w = WIDTH - 2 * PAD
    scale = min(inner_w / span_x, (MAX_HEIGHT - 2 * PAD) / span_y)  # pixels per degree
    height = span_y * scale + 2 * PAD + 56  # room for the legend and scale bar below
    kx, ky = scale * shrink, scale
    tolerance = 0.5 / scale
    shapes = shapely.simplify(shapes, tolerance, preserve_topology=True)
    colours = severity_colours(len(levels)) if levels else [NO_DAMAGE]
    fill = dict(zip(levels, colours, strict=True)) if levels else {}
    chosen = [fill.get(str(values[int(i)]), UNKNOWN if levels else "#3182bd") for i in index]
    drawn = _shapes(shapes, chosen, x_min - PAD / kx, y_max + PAD / ky, kx, ky)
    # Locality labels at the middle of their drawn assets.
    names = np.array([localities[int(i)] for i in index], dtype=object)
    centres = shapely.centroid(shapes)
    cx = (shapely.get_x(centres) - x_min) * kx + PAD
    cy = (y_max - shapely.get_y(centres)) * ky + PAD
    labels = []
    for name in sorted({n for n in names if n}):
        mask = names == name
        labels.append((str(name), float(np.median(cx[mask])), float(np.median(cy[mask]))))
    map_bottom = span_y * scale + 2 * PAD
    # Scale bar, bottom left: metres per pixel from the drawn scale.
    metres_wide = span_x * METRES_PER_DEGREE
    length = _scale_length(metres_wide)
    bar = length / metres_wide * span_x * scale
    return MapLayout(
        title=title,
        width=WIDTH,
        height=height,
        map_bottom=map_bottom,
        shapes=drawn,
        labels=labels,
        scale_y=map_bottom + 18,
        scale_bar=bar,
        scale_label=f"{length / 1000:g} km" if length >= 1000 else f"{length:g} m",
        north=(WIDTH - PAD - 14, PAD + 6),
        levels=list(levels),
        colours=colours if levels else [],
        legend_x=PAD + bar + 60,
        caption=(
            f"{len(index):,} of {located:,} located assets drawn, coloured by worst damage "
            "level; north up, EPSG:4326 drawn equirectangular"
        ),
    )


def snapshot_layout(
    snapshot: Snapshot, header: Mapping[str, Any], chart: Mapping[str, Any]
) -> MapLayout | None:
    """The drawing of a run's rows that carry geometry: coloured by the chart's key (the
    worst level), labelled by their ``locality`` column when they have one."""
    wkb: list[bytes | None] = []
    values: list[str | None] = []
    places: list[str | None] = []
    keys = [chart.get("key") or "", "locality"]
    present = {f["key"] for f in header["spec"]}
    for batch in snapshot.batches(geometry=True):
        names = batch.schema.names
        wkb += batch.column(names.index("geometry")).to_pylist()
        n = batch.num_rows
        values += (
            batch.column(names.index(keys[0])).to_pylist() if keys[0] in present else [None] * n
        )
        places += (
            batch.column(names.index(keys[1])).to_pylist() if keys[1] in present else [None] * n
        )
    levels = list(header.get("levels") or [])
    return layout_map(str(chart["title"]), wkb, values, levels, places)


def svg_figure(drawing: MapLayout) -> str:
    """The figure as SVG under its title, with its caption."""
    groups: dict[str, list[str]] = {}
    for shape in drawing.shapes:
        groups.setdefault(shape.colour, []).append(_path(shape))
    body = [
        f"<path d='{''.join(group)}' fill='{colour}' stroke='#4d4d4d' stroke-width='0.3' "
        "stroke-linejoin='round'/>"
        for colour, group in groups.items()
    ]
    # Locality labels with a white halo (the page's CSS).
    body += [
        f"<text x='{lx:.0f}' y='{ly:.0f}' text-anchor='middle' class='place'>{_e(name)}</text>"
        for name, lx, ly in drawing.labels
    ]
    bar, sy = drawing.scale_bar, drawing.scale_y
    body.append(
        f"<g class='scale'><rect x='{PAD}' y='{sy}' width='{bar / 2:.1f}' height='5' "
        f"fill='#1b1f23'/><rect x='{PAD + bar / 2:.1f}' y='{sy}' width='{bar / 2:.1f}' "
        f"height='5' fill='#fff' stroke='#1b1f23' stroke-width='0.8'/>"
        f"<text x='{PAD}' y='{sy + 18}'>0</text>"
        f"<text x='{PAD + bar:.1f}' y='{sy + 18}' text-anchor='middle'>"
        f"{drawing.scale_label}</text></g>"
    )
    nx, ny = drawing.north
    body.append(
        f"<g class='north' aria-label='north'><path d='M{nx} {ny}l-9 26l9-7l9 7z' "
        f"fill='#1b1f23'/><text x='{nx}' y='{ny + 42}' text-anchor='middle' "
        "font-weight='700'>N</text></g>"
    )
    if drawing.levels:
        body.append(legend(drawing.levels, drawing.colours, drawing.legend_x, sy - 2))
    width, height, title = drawing.width, drawing.height, drawing.title
    return (
        f"<figure class='chart map'><h2>{_e(title)}</h2><svg role='img' "
        f"aria-label='{_e(title)}' width='{width:.0f}' height='{height:.0f}' "
        f"viewBox='0 0 {width:.0f} {height:.0f}'>"
        f"<rect x='0' y='0' width='{width:.0f}' height='{drawing.map_bottom:.0f}' "
        f"fill='#f6f8fa' stroke='#d0d7de'/>{''.join(body)}</svg>"
        f"<figcaption class='sub'>{_e(drawing.caption)}</figcaption></figure>"
    )
