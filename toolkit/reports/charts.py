"""SVG charts that carry information: stacked bars by severity, a time series, and the
palette both share with the map.

Severity colours are ColorBrewer's YlOrRd (colour-blind safe, and printable in grey as
a light-to-dark ramp); the lowest level (no damage) is a neutral grey so that the eye
goes to damage. Every value is escaped; every bar has a ``<title>`` tooltip.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence

# YlOrRd, 9 classes, lightest first (ColorBrewer, colour-blind safe).
YLORRD = (
    "#ffffcc",
    "#ffeda0",
    "#fed976",
    "#feb24c",
    "#fd8d3c",
    "#fc4e2a",
    "#e31a1c",
    "#bd0026",
    "#800026",
)
NO_DAMAGE = "#bdbdbd"
# Okabe-Ito: distinguishable with every common colour-vision deficiency.
OKABE_ITO = ("#0072b2", "#009e73", "#e69f00", "#56b4e9", "#d55e00", "#cc79a7", "#f0e442")
UNKNOWN = "#f0f0f0"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def severity_colours(count: int) -> list[str]:
    """Colours for ``count`` levels, none first: grey, then YlOrRd spread evenly from a
    yellow that still shows on white to the darkest red."""
    if count <= 0:
        return []
    if count == 1:
        return [NO_DAMAGE]
    ramp = YLORRD[2:]  # the two palest yellows vanish on white paper
    damaged = count - 1
    picks = [round(i * (len(ramp) - 1) / max(damaged - 1, 1)) for i in range(damaged)]
    if damaged == 1:
        picks = [len(ramp) - 2]
    return [NO_DAMAGE, *(ramp[p] for p in picks)]


def categorical_colours(count: int) -> list[str]:
    return [OKABE_ITO[i % len(OKABE_ITO)] for i in range(count)]


def legend(labels: Sequence[str], colours: Sequence[str], x: float, y: float) -> str:
    """A row of swatches with their labels, starting at (x, y)."""
    parts = []
    for label, colour in zip(labels, colours, strict=True):
        parts.append(
            f"<rect x='{x:.0f}' y='{y:.0f}' width='14' height='14' fill='{colour}' "
            f"stroke='#555' stroke-width='0.5'/>"
            f"<text x='{x + 19:.0f}' y='{y + 12:.0f}'>{_e(label)}</text>"
        )
        x += 28 + 7.5 * len(label)
    return "".join(parts)


def stacked_bars(
    title: str,
    categories: Sequence[str],
    stacks: Sequence[str],
    values: Mapping[str, Sequence[int]],
    colours: Sequence[str],
) -> str:
    """Horizontal bars, one per category, each made of ``stacks`` (in order) with their
    counts (``values[stack][i]`` for category i) and the total at the end."""
    if not categories:
        return ""
    totals = [sum(int(values[s][i]) for s in stacks) for i in range(len(categories))]
    top = max(max(totals), 1)
    row, label_w, bar_w = 26, 190, 560
    height = row * len(categories) + 44
    parts = [legend(stacks, colours, label_w, 4)]
    for i, category in enumerate(categories):
        y = 30 + i * row
        parts.append(
            f"<text x='{label_w - 8}' y='{y + 16}' text-anchor='end'>{_e(category[:30])}</text>"
        )
        x = float(label_w)
        for stack, colour in zip(stacks, colours, strict=True):
            count = int(values[stack][i])
            if not count:
                continue
            width = bar_w * count / top
            parts.append(
                f"<rect x='{x:.1f}' y='{y + 3}' width='{width:.1f}' height='{row - 8}' "
                f"fill='{colour}' stroke='#fff' stroke-width='0.5'>"
                f"<title>{_e(category)}, {_e(stack)}: {count:,}</title></rect>"
            )
            x += width
        parts.append(f"<text x='{x + 6:.1f}' y='{y + 16}'>{totals[i]:,}</text>")
    width = label_w + bar_w + 70
    return (
        f"<figure class='chart'><h2>{_e(title)}</h2><svg role='img' aria-label='{_e(title)}' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}'>"
        + "".join(parts)
        + "</svg></figure>"
    )


def time_series(
    title: str,
    dates: Sequence[str],
    stacks: Sequence[str],
    values: Mapping[str, Sequence[int]],
    colours: Sequence[str],
) -> str:
    """Stacked columns per date (dates in order, gaps kept as they come), a y axis with
    gridlines, and date labels thinned to fit."""
    if not dates:
        return ""
    totals = [sum(int(values[s][i]) for s in stacks) for i in range(len(dates))]
    top = max(max(totals), 1)
    step = _nice_step(top)
    ceiling = step * -(-top // step)
    left, plot_w, plot_h, top_pad = 48, 720, 220, 30
    width, height = left + plot_w + 70, top_pad + plot_h + 70
    column = plot_w / len(dates)
    parts = [legend(stacks, colours, left, 4)]
    for tick in range(0, ceiling + 1, step):
        y = top_pad + plot_h - plot_h * tick / ceiling
        parts.append(
            f"<line x1='{left}' x2='{left + plot_w}' y1='{y:.1f}' y2='{y:.1f}' "
            f"stroke='#d0d7de' stroke-width='0.5'/>"
            f"<text x='{left - 6}' y='{y + 4:.1f}' text-anchor='end'>{tick:,}</text>"
        )
    every = max(1, round(len(dates) / 12))
    for i, day in enumerate(dates):
        x = left + i * column
        y = float(top_pad + plot_h)
        for stack, colour in zip(stacks, colours, strict=True):
            count = int(values[stack][i])
            if not count:
                continue
            h = plot_h * count / ceiling
            y -= h
            parts.append(
                f"<rect x='{x + column * 0.1:.1f}' y='{y:.1f}' width='{column * 0.8:.1f}' "
                f"height='{h:.1f}' fill='{colour}'><title>{_e(day)}, {_e(stack)}: "
                f"{count:,}</title></rect>"
            )
        if i % every == 0:
            tx, ty = x + column / 2, top_pad + plot_h + 12
            parts.append(
                f"<text x='{tx:.1f}' y='{ty}' transform='rotate(40 {tx:.1f} {ty})' "
                f"font-size='10'>{_e(day)}</text>"
            )
    parts.append(
        f"<line x1='{left}' x2='{left + plot_w}' y1='{top_pad + plot_h}' "
        f"y2='{top_pad + plot_h}' stroke='#57606a'/>"
    )
    return (
        f"<figure class='chart'><h2>{_e(title)}</h2><svg role='img' aria-label='{_e(title)}' "
        f"width='{width}' height='{height}' viewBox='0 0 {width} {height}'>"
        + "".join(parts)
        + "</svg></figure>"
    )


def _nice_step(top: int) -> int:
    """A round gridline step giving about five lines up to ``top``."""
    raw = max(top / 5, 1)
    magnitude = 10 ** (len(str(int(raw))) - 1)
    for factor in (1, 2, 5, 10):
        if factor * magnitude >= raw:
            return int(factor * magnitude)
    return int(10 * magnitude)
