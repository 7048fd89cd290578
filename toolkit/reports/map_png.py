"""The map as a PNG image: the drawing of :func:`toolkit.reports.map_svg.layout_map`
(the HTML's SVG) rendered with Pillow, for the XLSX's Map sheet (a workbook shows no
SVG).

Drawn at :data:`RESOLUTION` times the SVG's pixels so it stays sharp when printed; the
text uses Pillow's bundled font, so nothing is read from the system.
"""

from __future__ import annotations

import io
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from PIL import Image, ImageDraw, ImageFont

from toolkit.reports.map_svg import PAD, MapLayout, snapshot_layout

if TYPE_CHECKING:
    from toolkit.reports.snapshot import Snapshot

RESOLUTION = 2
INK = "#1b1f23"
BACKGROUND = "#f6f8fa"
EDGE = "#4d4d4d"


def map_png(drawing: MapLayout) -> bytes:
    """PNG bytes of the drawing, ``RESOLUTION`` pixels per SVG pixel."""
    k = RESOLUTION
    image = Image.new("RGB", (round(drawing.width * k), round(drawing.height * k)), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default(size=12 * k)
    bold = ImageFont.load_default(size=13 * k)
    draw.rectangle(
        (0, 0, drawing.width * k - 1, drawing.map_bottom * k), fill=BACKGROUND, outline="#d0d7de"
    )
    for shape in drawing.shapes:
        for page, closed in shape.rings:
            points = [(float(x) * k, float(y) * k) for x, y in page]
            if closed and len(points) >= 3:
                draw.polygon(points, fill=shape.colour, outline=EDGE)
            elif len(points) >= 2:
                draw.line(points, fill=EDGE, width=k)
        for x, y in shape.points:
            draw.ellipse((x * k - 2 * k, y * k - 2 * k, x * k + 2 * k, y * k + 2 * k), shape.colour)
    for name, x, y in drawing.labels:  # white halo, as the SVG's CSS gives its labels
        draw.text(
            (x * k, y * k), name, fill=INK, font=bold, anchor="ms", stroke_width=2 * k,
            stroke_fill="white",
        )  # fmt: skip
    bar, sy = drawing.scale_bar * k, drawing.scale_y * k
    left = PAD * k
    draw.rectangle((left, sy, left + bar / 2, sy + 5 * k), fill=INK)
    draw.rectangle((left + bar / 2, sy, left + bar, sy + 5 * k), fill="white", outline=INK)
    draw.text((left, sy + 18 * k), "0", fill=INK, font=font, anchor="ls")
    draw.text((left + bar, sy + 18 * k), drawing.scale_label, fill=INK, font=font, anchor="ms")
    nx, ny = drawing.north[0] * k, drawing.north[1] * k
    draw.polygon(
        [(nx, ny), (nx - 9 * k, ny + 26 * k), (nx, ny + 19 * k), (nx + 9 * k, ny + 26 * k)],
        fill=INK,
    )
    draw.text((nx, ny + 42 * k), "N", fill=INK, font=bold, anchor="ms")
    x, y = drawing.legend_x * k, (drawing.scale_y - 2) * k
    for label, colour in zip(drawing.levels, drawing.colours, strict=True):
        draw.rectangle((x, y, x + 14 * k, y + 14 * k), fill=colour, outline="#555555")
        draw.text((x + 19 * k, y + 12 * k), label, fill=INK, font=font, anchor="ls")
        x += (28 + 7.5 * len(label)) * k
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


@dataclass(frozen=True)
class MapImage:
    """A run's map for a workbook: the PNG, its size as shown (SVG pixels), its words."""

    png: bytes
    width: float
    height: float
    title: str
    caption: str


def report_map(snapshot: Snapshot, header: Mapping[str, Any]) -> MapImage | None:
    """The map of a run whose rows carry geometry and which draws one; else None."""
    charts = [header.get("chart"), *(header.get("charts") or [])]
    chart = next((c for c in charts if c and c.get("kind") == "map"), None)
    if chart is None or not snapshot.has_geometry:
        return None
    heard, snapshot.on_rows = snapshot.on_rows, None  # progress counts the data rows only
    try:
        drawing = snapshot_layout(snapshot, header, chart)
    finally:
        snapshot.on_rows = heard
    if drawing is None:
        return None
    return MapImage(map_png(drawing), drawing.width, drawing.height, drawing.title, drawing.caption)
