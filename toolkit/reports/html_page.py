"""HTML contents: one self-contained page a person would rather read than the CSV.

Title, filters, metadata, charts that carry information (stacked bars by severity, a
time series, bands of a distribution, a map of parcels coloured by worst damage level),
extra tables, and the first rows of the table, which a small inline script lets one
sort, search and filter. Nothing is fetched from anywhere (a Content-Security-Policy
says so); every value is escaped; the script reads the table, never data written into
it. Print CSS lays it out on A4 landscape (see :mod:`toolkit.reports.html_assets`). A
table of a million rows helps nobody, so the page shows the first
:data:`MAX_TABLE_ROWS` and says so.
"""

from __future__ import annotations

import html
from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from toolkit.reports.catalogue import band_counts
from toolkit.reports.charts import (
    UNKNOWN,
    categorical_colours,
    severity_colours,
    stacked_bars,
    time_series,
)
from toolkit.reports.csv_file import header_zone, labels
from toolkit.reports.html_assets import CSP, SCRIPT, STYLE
from toolkit.reports.map_svg import snapshot_layout, svg_figure
from toolkit.reports.snapshot import Snapshot
from toolkit.reports.times import iso_local

MAX_TABLE_ROWS = 1_000
MAX_BARS = 20
MAX_MAP_POINTS = 5_000

# A text cell with a run this long breaks anywhere when printed (see html_assets).
LONG_RUN = r"\S{25}"
BREAKABLE = "<td class='brk'>"
# A bar of rows without a value (e.g. rows no mode matched, "none" in the metadata).
NO_VALUE = "(none)"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _facts(entries: list[dict[str, Any]]) -> str:
    if not entries:
        return "<p class='sub'>None.</p>"
    rows = "".join(
        f"<tr><th>{_e(entry['label'])}</th><td>{_e(entry['display'])}</td></tr>"
        for entry in entries
    )
    return f"<table class='facts'>{rows}</table>"


def _bars(snapshot: Snapshot, key: str, title: str, levels: list[str] | None = None) -> str:
    counts = pc.value_counts(snapshot.column(key).combine_chunks()).to_pylist()
    found = {c["values"]: int(c["counts"]) for c in counts}
    if levels and set(found) <= {*levels, None}:
        # A severity: every level in order, none first, in its colour (zeros shown too).
        pairs = [(level, found.get(level, 0)) for level in levels]
        colours = severity_colours(len(levels))
        if found.get(None):
            pairs.append(("(not recorded)", found[None]))
            colours.append(UNKNOWN)
        return _draw_bars(pairs, title, colours)
    if not counts:
        return ""
    if len(counts) == 1:  # one bar carries nothing a sentence does not
        only = counts[0]
        value = NO_VALUE if only["values"] is None else str(only["values"])
        return f"<h2>{_e(title)}</h2><p class='sub'>All {only['counts']:,} rows: {_e(value)}.</p>"
    counts.sort(key=lambda c: (-c["counts"], str(c["values"])))
    shown = counts[:MAX_BARS]
    others = sum(c["counts"] for c in counts[MAX_BARS:])
    pairs = [(NO_VALUE if c["values"] is None else str(c["values"]), c["counts"]) for c in shown]
    if others:
        pairs.append(("other values", others))
    return _draw_bars(pairs, title)


def _bands(snapshot: Snapshot, key: str, title: str) -> str:
    """Counts per tenth of a 0-1 number, every band in order (a distribution)."""
    values = np.asarray(snapshot.column(key).to_numpy(), dtype=float)
    values = values[~np.isnan(values)]
    if not len(values):
        return ""
    counts = band_counts(values)
    return _draw_bars(list(counts.items()), title)


def _draw_bars(pairs: list[tuple[str, int]], title: str, colours: list[str] | None = None) -> str:
    top = max(max(count for _, count in pairs), 1)
    row_height, label_width, bar_width = 24, 170, 380
    height = row_height * len(pairs) + 10
    parts = []
    for index, (label, count) in enumerate(pairs):
        y = 5 + index * row_height
        width = max(1.0, bar_width * count / top)
        parts.append(
            f"<text x='{label_width - 8}' y='{y + 16}' text-anchor='end'>{_e(label[:28])}</text>"
            f"<rect x='{label_width}' y='{y + 3}' width='{width:.1f}' height='{row_height - 8}' "
            f"fill='{colours[index] if colours else '#2f81c1'}' stroke='#4d4d4d' "
            f"stroke-width='{0.5 if colours else 0}'><title>{_e(label)}: {count:,}</title></rect>"
            f"<text x='{label_width + width + 6:.1f}' y='{y + 16}'>{count:,}</text>"
        )
    return (
        f"<figure class='chart'><h2>{_e(title)}</h2><svg role='img' aria-label='{_e(title)}' "
        f"width='640' height='{height}' viewBox='0 0 640 {height}'>"
        + "".join(parts)
        + "</svg></figure>"
    )


def _map(snapshot: Snapshot, header: Mapping[str, Any], chart: Mapping[str, Any]) -> str:
    """Parcels coloured by the chart's key (worst level) when the rows carry geometry."""
    if not snapshot.has_geometry:
        if "longitude" not in {f["key"] for f in header["spec"]}:
            return f"<h2>{_e(chart['title'])}</h2><p class='sub'>The rows have no geometry.</p>"
        return _points(snapshot, chart["title"])
    drawing = snapshot_layout(snapshot, header, chart)
    if drawing is None:
        return f"<h2>{_e(chart['title'])}</h2><p class='sub'>No asset has a location to draw.</p>"
    return svg_figure(drawing)


def _points(snapshot: Snapshot, title: str) -> str:
    x = snapshot.column("longitude").to_numpy()
    y = snapshot.column("latitude").to_numpy()
    located = ~(np.isnan(x) | np.isnan(y))
    x, y = x[located], y[located]
    if not len(x):
        return f"<h2>{_e(title)}</h2><p class='sub'>No asset has a location to draw.</p>"
    drawn = np.arange(len(x))
    if len(x) > MAX_MAP_POINTS:
        drawn = np.linspace(0, len(x) - 1, MAX_MAP_POINTS).astype(int)
    x, y = x[drawn], y[drawn]
    # Equirectangular at the data's own latitude: true enough for a town or a region.
    scale_x = np.cos(np.radians(float(np.mean(y))))
    px, py = (x - x.min()) * scale_x, y.max() - y
    span = max(float(px.max()), float(py.max()), 1e-9)
    size, pad = 560.0, 12.0
    px, py = pad + px / span * size, pad + py / span * size
    # One asset, or assets in a line, still get a frame one can see.
    width = max(float(px.max()) + pad, 200.0)
    height = max(float(py.max()) + pad, 200.0)
    path = "".join(f"M{a:.1f} {b:.1f}h0" for a, b in zip(px.tolist(), py.tolist(), strict=True))
    caption = f"{len(drawn):,} of {int(located.sum()):,} located assets drawn, north up"
    return (
        f"<h2>{_e(title)}</h2><svg role='img' aria-label='{_e(title)}' width='{width:.0f}' "
        f"height='{height:.0f}' viewBox='0 0 {width:.0f} {height:.0f}' "
        ">"
        f"<rect x='0' y='0' width='{width:.0f}' height='{height:.0f}' fill='#f6f8fa' "
        "stroke='#d0d7de'/>"
        f"<path d='{path}' stroke='#c0392b' stroke-width='6' stroke-linecap='round' "
        "stroke-opacity='0.7'/></svg>"
        f"<p class='sub'>{_e(caption)}</p>"
    )


def _stack_labels(header: Mapping[str, Any], stacks: list[str]) -> list[str]:
    labels = {f["key"]: f["label"] for f in header["spec"]}
    return [str(labels.get(s, s)) for s in stacks]


def _stacked(snapshot: Snapshot, header: Mapping[str, Any], chart: Mapping[str, Any]) -> str:
    """Bars per value of the chart's key, made of its count columns, largest first."""
    stacks = list(chart.get("stacks") or [])
    frame = pd.DataFrame(
        {k: snapshot.column(k).to_pandas() for k in [chart["key"], *stacks]}
    ).fillna({chart["key"]: NO_VALUE})
    sums = frame.groupby(chart["key"])[stacks].sum()
    sums = sums.loc[sums.sum(axis=1).sort_values(ascending=False).index][:MAX_BARS]
    return stacked_bars(
        chart["title"],
        [str(c) for c in sums.index],
        _stack_labels(header, stacks),
        {
            label: sums[key].tolist()
            for key, label in zip(stacks, _stack_labels(header, stacks), strict=True)
        },
        _palette(chart, len(stacks)),
    )


def _palette(chart: Mapping[str, Any], count: int) -> list[str]:
    if chart.get("palette") == "categorical":
        return categorical_colours(count)
    return severity_colours(count)


def _series(header: Mapping[str, Any], chart: Mapping[str, Any]) -> str:
    """Stacked columns per date from the metadata table the chart names."""
    rows = next((m["value"] for m in header["meta"] if m["key"] == chart["key"]), None) or []
    stacks = list(chart.get("stacks") or [])
    labels = _stack_labels(header, stacks)
    dated = [r for r in rows if str(r.get("date", "")).startswith(("1", "2"))]
    return time_series(
        chart["title"],
        [str(r["date"]) for r in dated],
        labels,
        {label: [int(r.get(k, 0)) for r in dated] for k, label in zip(stacks, labels, strict=True)},
        severity_colours(len(stacks)),
    )


def _chart(snapshot: Snapshot, chart: Mapping[str, Any] | None, header: Mapping[str, Any]) -> str:
    if not chart or snapshot.row_count == 0:
        return ""
    if chart["kind"] == "stacked":
        return _stacked(snapshot, header, chart)
    if chart["kind"] == "series":
        return _series(header, chart)
    if chart["kind"] == "map":
        return _map(snapshot, header, chart)
    if chart["kind"] == "bands":
        return _bands(snapshot, chart["key"], chart["title"])
    return _bars(snapshot, chart["key"], chart["title"], list(header.get("levels") or []))


def _cell_text(column: pa.Array, kind: str, zone: str) -> list[str]:
    if kind == "timestamp":
        column = iso_local(column, zone, excel=True)
    elif kind == "date":
        column = column.cast(pa.string())
    elif kind == "number":  # shown to 6 decimals (0.1 m of a longitude); the files keep all
        column = pc.round(column, 6)
    values = column.to_pylist()
    if kind == "boolean":
        return ["" if v is None else ("yes" if v else "no") for v in values]
    return ["" if v is None else _e(v) for v in values]


def _table(snapshot: Snapshot, header: Mapping[str, Any], limit: int) -> str:
    spec = list(header["spec"])
    zone = header_zone(header)
    numeric = [f["type"] in ("integer", "number") for f in spec]
    classes = ["<th scope='col' class='num'>" if n else "<th scope='col'>" for n in numeric]
    heads = "".join(f"{classes[i]}{_e(label)}</th>" for i, label in enumerate(labels(header)))
    filters = "".join(
        f"<th><input data-col='{i}' aria-label='filter {_e(f['label'])}' placeholder='filter'></th>"
        for i, f in enumerate(spec)
    )
    opens = [
        "<td class='num'>"
        if numeric[i]
        else "<td class='ts'>"
        if f["type"] in ("timestamp", "date")
        else "<td>"
        for i, f in enumerate(spec)
    ]
    body: list[str] = []
    sums = [0.0] * len(spec)
    shown = 0
    for batch in snapshot.batches(rows=min(limit, 65_536)):
        part = batch.slice(0, limit - shown)
        columns = [_cell_text(part.column(i), f["type"], zone) for i, f in enumerate(spec)]
        # Text with a long unbroken run (JSON, a URL) may break anywhere when printed;
        # other text only between words, so a code or a word is never split.
        for i, f in enumerate(spec):
            if f["type"] == "text":
                runs = pc.match_substring_regex(part.column(i), LONG_RUN).fill_null(False)
                columns[i] = [
                    f"{BREAKABLE}{v}" if long else f"{opens[i]}{v}"
                    for v, long in zip(columns[i], runs.to_pylist(), strict=True)
                ]
            else:
                columns[i] = [f"{opens[i]}{v}" for v in columns[i]]
        if header.get("totals"):
            for i, kind in enumerate(numeric):
                if kind and spec[i]["key"] not in ("eventId", "id"):
                    sums[i] += float(pc.sum(part.column(i)).as_py() or 0)
        for row in zip(*columns, strict=True):
            cells = "</td>".join(row) + "</td>"
            body.append(f"<tr>{cells}</tr>")
        shown += part.num_rows
        if shown >= limit:
            break
    foot = ""
    if header.get("totals") and shown == snapshot.row_count and shown > 1:
        totals = [
            f"<td class='num'>{sums[i]:,.0f}</td>"
            if numeric[i] and spec[i]["key"] not in ("eventId", "id")
            else "<td></td>"
            for i in range(len(spec))
        ]
        totals[0] = "<td>Total</td>"
        foot = f"<tfoot><tr>{''.join(totals)}</tr></tfoot>"
    return (
        "<div class='controls'><input id='search' type='search' placeholder='Search every "
        "column' aria-label='search the rows'><span><span id='shown'>"
        f"{shown:,}</span> of {shown:,} rows shown</span></div>"
        f"<div class='wrap'><table class='data'><thead><tr class='names'>{heads}</tr>"
        f"<tr class='filters'>{filters}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody>{foot}</table></div>"
    )


def _tiles(header: Mapping[str, Any]) -> str:
    """The headline figures, large, before anything else."""
    meta = {m["key"]: m for m in header["meta"]}
    tiles = [
        f"<div class='tile'><b>{_e(meta[k]['display'])}</b><span>{_e(meta[k]['label'])}</span>"
        "</div>"
        for k in header.get("headline") or []
        if k in meta
    ]
    return f"<div class='tiles'>{''.join(tiles)}</div>" if tiles else ""


def _extra_tables(header: Mapping[str, Any]) -> str:
    """Metadata entries whose value is a list of rows (e.g. items per date), as tables."""
    labels_of = {"date": "Date", **{f["key"]: f["label"] for f in header["spec"]}}
    parts = []
    for table in header.get("tables") or []:
        rows = next((m["value"] for m in header["meta"] if m["key"] == table["key"]), None)
        if not rows:
            continue
        keys = list(rows[0])
        heads = "".join(f"<th>{_e(labels_of.get(k, k))}</th>" for k in keys)
        body = "".join(
            "<tr>"
            + "".join(
                f"<td class='num'>{v:,}</td>" if isinstance(v, int) else f"<td>{_e(v)}</td>"
                for v in (row.get(k) for k in keys)
            )
            + "</tr>"
            for row in rows
        )
        parts.append(
            f"<h2>{_e(table['title'])}</h2><div class='wrap'><table class='data extra'>"
            f"<thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></div>"
        )
    return "".join(parts)


def write_html(
    snapshot: Snapshot,
    header: Mapping[str, Any],
    *,
    generated: str,
    max_rows: int = MAX_TABLE_ROWS,
) -> str:
    """The page as text (bounded in size: at most ``max_rows`` table rows)."""
    total = snapshot.row_count
    shown = min(total, max_rows)
    if total > shown:
        note = (
            f"<p class='note'>This page shows the first {shown:,} of {total:,} rows. "
            "Fetch the report as CSV or XLSX for every row.</p>"
        )
    else:
        note = f"<p class='sub'>All {total:,} rows.</p>"
    name = _e(header["name"])
    tables = {t["key"] for t in header.get("tables") or []}
    facts = [m for m in header["meta"] if m["key"] not in tables]
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{name}</title><style>{STYLE}</style></head><body>"
        f"<h1>{name}</h1><p class='sub'>{total:,} rows; generated {_e(generated)}</p>"
        f"{_tiles(header)}"
        f"<div class='cols'><section><h2>Filters</h2>{_facts(header['filter'])}</section>"
        f"<section><h2>Data quality</h2>{_facts(facts)}</section></div>"
        f"{_chart(snapshot, header.get('chart'), header)}"
        f"{''.join(_chart(snapshot, chart, header) for chart in header.get('charts', []))}"
        f"<h2>Rows</h2>{note}{_table(snapshot, header, max_rows)}"
        f"{_extra_tables(header)}"
        f"<script>{SCRIPT}</script></body></html>"
    )
