"""HTML contents: one self-contained page a person would rather read than the CSV.

Title, filters, metadata, a chart where one helps (bars of counts, or a map of
points), and the first rows of the table. No script, stylesheet, font or image
is fetched from anywhere; every value is escaped. A table of a million rows
helps nobody, so the page shows the first :data:`MAX_TABLE_ROWS` and says so.
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
from toolkit.reports.charts import severity_colours, stacked_bars, time_series
from toolkit.reports.csv_file import header_zone, labels
from toolkit.reports.snapshot import Snapshot
from toolkit.reports.times import iso_local

MAX_TABLE_ROWS = 1_000
MAX_BARS = 20
MAX_MAP_POINTS = 5_000

STYLE = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;margin:2rem;
color:#1b1f23;background:#fff;line-height:1.4}
h1{font-size:1.6rem;margin:0 0 .25rem}h2{font-size:1.15rem;margin:1.75rem 0 .5rem}
.sub{color:#57606a;margin:0 0 1rem}
.facts{border-collapse:collapse;margin:.25rem 0}
.facts th{text-align:left;font-weight:600;padding:.2rem 1.5rem .2rem 0;color:#57606a}
.facts td{padding:.2rem 0}
.note{background:#fff8c5;border:1px solid #d4a72c;padding:.5rem .75rem;border-radius:4px}
.wrap{overflow-x:auto;max-height:70vh;border:1px solid #d0d7de;border-radius:4px}
table.data{border-collapse:collapse;font-size:.85rem;white-space:nowrap}
table.data th{position:sticky;top:0;background:#1f4e78;color:#fff;text-align:left;
padding:.35rem .6rem}
table.data td{padding:.25rem .6rem;border-top:1px solid #eaeef2}
table.data tr:nth-child(even) td{background:#f6f8fa}
td.num{text-align:right;font-variant-numeric:tabular-nums}
svg text{font-size:12px;fill:#1b1f23}
"""


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


def _bars(snapshot: Snapshot, key: str, title: str) -> str:
    counts = pc.value_counts(snapshot.column(key).combine_chunks()).to_pylist()
    if not counts:
        return ""
    counts.sort(key=lambda c: (-c["counts"], str(c["values"])))
    shown = counts[:MAX_BARS]
    others = sum(c["counts"] for c in counts[MAX_BARS:])
    pairs = [("(empty)" if c["values"] is None else str(c["values"]), c["counts"]) for c in shown]
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


def _draw_bars(pairs: list[tuple[str, int]], title: str) -> str:
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
            f"fill='#2f81c1'><title>{_e(label)}: {count:,}</title></rect>"
            f"<text x='{label_width + width + 6:.1f}' y='{y + 16}'>{count:,}</text>"
        )
    return (
        f"<h2>{_e(title)}</h2><svg role='img' aria-label='{_e(title)}' width='640' "
        f"height='{height}' viewBox='0 0 640 {height}'>" + "".join(parts) + "</svg>"
    )


def _map(snapshot: Snapshot, title: str) -> str:
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
    ).fillna({chart["key"]: "(empty)"})
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
        severity_colours(len(stacks)),
    )


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
        return _map(snapshot, chart["title"])
    if chart["kind"] == "bands":
        return _bands(snapshot, chart["key"], chart["title"])
    return _bars(snapshot, chart["key"], chart["title"])


def _cell_text(column: pa.Array, kind: str, zone: str) -> list[str]:
    if kind == "timestamp":
        column = iso_local(column, zone, excel=True)
    elif kind == "date":
        column = column.cast(pa.string())
    values = column.to_pylist()
    if kind == "boolean":
        return ["" if v is None else ("yes" if v else "no") for v in values]
    return ["" if v is None else _e(v) for v in values]


def _table(snapshot: Snapshot, header: Mapping[str, Any], limit: int) -> str:
    spec = list(header["spec"])
    zone = header_zone(header)
    heads = "".join(f"<th>{_e(label)}</th>" for label in labels(header))
    numeric = [f["type"] in ("integer", "number") for f in spec]
    body: list[str] = []
    shown = 0
    for batch in snapshot.batches(rows=min(limit, 65_536)):
        part = batch.slice(0, limit - shown)
        columns = [_cell_text(part.column(i), f["type"], zone) for i, f in enumerate(spec)]
        for row in zip(*columns, strict=True):
            cells = "".join(
                f"<td class='num'>{v}</td>" if numeric[i] else f"<td>{v}</td>"
                for i, v in enumerate(row)
            )
            body.append(f"<tr>{cells}</tr>")
        shown += part.num_rows
        if shown >= limit:
            break
    return (
        f"<div class='wrap'><table class='data'><thead><tr>{heads}</tr></thead>"
        f"<tbody>{''.join(body)}</tbody></table></div>"
    )


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
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<title>{name}</title><style>{STYLE}</style></head><body>"
        f"<h1>{name}</h1><p class='sub'>{total:,} rows; generated {_e(generated)}</p>"
        f"<h2>Filters</h2>{_facts(header['filter'])}"
        f"<h2>Data quality</h2>{_facts(header['meta'])}"
        f"{_chart(snapshot, header.get('chart'), header)}"
        f"{''.join(_chart(snapshot, chart, header) for chart in header.get('charts', []))}"
        f"<h2>Rows</h2>{note}{_table(snapshot, header, max_rows)}"
        "</body></html>"
    )
