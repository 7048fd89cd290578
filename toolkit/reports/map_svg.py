"""A map as one self-contained SVG: parcel polygons coloured by worst damage level, a
legend, a scale bar, a north arrow and locality labels. No tiles, no script, no fetch.

Coordinates are EPSG:4326; they are drawn equirectangular at the data's mean latitude
(true to a fraction of a percent over a town or a region), north up. Geometries are
simplified to about half a pixel, and beyond :data:`MAX_SHAPES` a spread sample is
drawn (the caption says how many), so the page stays small.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence

import numpy as np
import shapely

from toolkit.reports.charts import NO_DAMAGE, UNKNOWN, legend, severity_colours

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


def _paths(geometries: np.ndarray, x0: float, y1: float, kx: float, ky: float) -> list[str]:
    """SVG path data of each geometry (polygons, lines or points) in page coordinates."""
    out = []
    for geometry in geometries:
        if geometry is None or geometry.is_empty:
            out.append("")
            continue
        parts = []
        for part in getattr(geometry, "geoms", [geometry]):
            kind = part.geom_type
            rings = (
                [part.exterior, *part.interiors]
                if kind == "Polygon"
                else [part]
                if kind in ("LineString", "LinearRing")
                else []
            )
            if kind == "Point":
                px, py = (part.x - x0) * kx, (y1 - part.y) * ky
                parts.append(f"M{px:.1f} {py:.1f}h0")
                continue
            for ring in rings:
                xy = np.asarray(ring.coords)
                px = (xy[:, 0] - x0) * kx
                py = (y1 - xy[:, 1]) * ky
                points = " ".join(f"{a:.1f} {b:.1f}" for a, b in zip(px, py, strict=True))
                parts.append(f"M{points}" + ("Z" if kind == "Polygon" else ""))
        out.append("".join(parts))
    return out


def draw_map(
    title: str,
    wkb: Sequence[bytes | None],
    values: Sequence[str | None],
    levels: Sequence[str],
    localities: Sequence[str | None],
) -> str:
    """The figure: ``wkb`` geometries coloured by ``values`` (one of ``levels``, none
    first; without levels every shape is one colour), labelled by locality."""
    geometries = shapely.from_wkb(np.asarray(wkb, dtype=object))
    present = ~shapely.is_missing(geometries) & ~shapely.is_empty(geometries)
    located = int(present.sum())
    if not located:
        return f"<h2>{_e(title)}</h2><p class='sub'>No asset has a location to draw.</p>"
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
    paths = _paths(shapes, x_min - PAD / kx, y_max + PAD / ky, kx, ky)
    colours = severity_colours(len(levels)) if levels else [NO_DAMAGE]
    fill = dict(zip(levels, colours, strict=True)) if levels else {}
    chosen = [values[int(i)] for i in index]
    groups: dict[str, list[str]] = {}
    for path, value in zip(paths, chosen, strict=True):
        colour = fill.get(str(value), UNKNOWN if levels else "#3182bd")
        groups.setdefault(colour, []).append(path)
    body = [
        f"<path d='{''.join(group)}' fill='{colour}' stroke='#4d4d4d' stroke-width='0.3' "
        "stroke-linejoin='round'/>"
        for colour, group in groups.items()
    ]
    # Locality labels at the middle of their drawn assets, with a white halo.
    names = np.array([localities[int(i)] for i in index], dtype=object)
    centres = shapely.centroid(shapes)
    cx = (shapely.get_x(centres) - x_min) * kx + PAD
    cy = (y_max - shapely.get_y(centres)) * ky + PAD
    for name in sorted({n for n in names if n}):
        mask = names == name
        lx, ly = float(np.median(cx[mask])), float(np.median(cy[mask]))
        body.append(
            f"<text x='{lx:.0f}' y='{ly:.0f}' text-anchor='middle' class='place'>{_e(name)}</text>"
        )
    map_bottom = span_y * scale + 2 * PAD
    # Scale bar, bottom left: metres per pixel from the drawn scale.
    metres_wide = span_x * METRES_PER_DEGREE
    length = _scale_length(metres_wide)
    bar = length / metres_wide * span_x * scale
    label = f"{length / 1000:g} km" if length >= 1000 else f"{length:g} m"
    sy = map_bottom + 18
    body.append(
        f"<g class='scale'><rect x='{PAD}' y='{sy}' width='{bar / 2:.1f}' height='5' "
        f"fill='#1b1f23'/><rect x='{PAD + bar / 2:.1f}' y='{sy}' width='{bar / 2:.1f}' "
        f"height='5' fill='#fff' stroke='#1b1f23' stroke-width='0.8'/>"
        f"<text x='{PAD}' y='{sy + 18}'>0</text>"
        f"<text x='{PAD + bar:.1f}' y='{sy + 18}' text-anchor='middle'>{label}</text></g>"
    )
    # North arrow, top right.
    nx, ny = WIDTH - PAD - 14, PAD + 6
    body.append(
        f"<g class='north' aria-label='north'><path d='M{nx} {ny}l-9 26l9-7l9 7z' "
        f"fill='#1b1f23'/><text x='{nx}' y='{ny + 42}' text-anchor='middle' "
        "font-weight='700'>N</text></g>"
    )
    if levels:
        body.append(legend(levels, colours, PAD + bar + 60, sy - 2))
    drawn = len(index)
    caption = (
        f"{drawn:,} of {located:,} located assets drawn, coloured by worst damage level; "
        "north up, EPSG:4326 drawn equirectangular"
    )
    return (
        f"<figure class='chart map'><h2>{_e(title)}</h2><svg role='img' "
        f"aria-label='{_e(title)}' width='{WIDTH:.0f}' height='{height:.0f}' "
        f"viewBox='0 0 {WIDTH:.0f} {height:.0f}'>"
        f"<rect x='0' y='0' width='{WIDTH:.0f}' height='{map_bottom:.0f}' fill='#f6f8fa' "
        f"stroke='#d0d7de'/>{''.join(body)}</svg>"
        f"<figcaption class='sub'>{_e(caption)}</figcaption></figure>"
    )
