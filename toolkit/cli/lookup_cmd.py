"""`toolkit lookup`: resolve free text, codes or points to assets, one query or a whole file."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import (
    global_options,
    is_remote,
    note,
    open_local_site,
    open_site,
    progress_bar,
    settings,
)
from toolkit.cli.engine_opts import chosen_engine, engine_options, is_dask
from toolkit.cli.files import input_file, is_stdio, output_file, source_options
from toolkit.cli.render import render
from toolkit.names import GEOCODING_FEATURES as FEATURES
from toolkit.names import LOOKUP_MODES as MODES
from toolkit.names import LOOKUP_OUTPUTS


@cli.command("lookup")
@click.argument("queries", nargs=-1)
@click.option(
    "--file",
    "file",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path),
    help="Look up every row of this file (any readable source; - for stdin).",
)
@source_options
@click.option("--column", help="The file's column holding the query text.")
@click.option("--code-column", help="The file's column holding each row's reference.")
@click.option("--lat-column", help="Latitude column, for mode geo.")
@click.option("--lon-column", help="Longitude column, for mode geo.")
@click.option("--wkt-column", help="WKT column, for mode geo.")
@click.option(
    "--assets",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Assets to match against (columns id, name, optional type, code, friendly, "
    "regionId, geometry; others are extraInfo codes). Default: the site's assets.",
)
@click.option(
    "--index",
    "index_dir",
    type=click.Path(file_okay=False, path_type=Path),
    help="Folder of a saved index of --assets: reused while newer than the file, "
    "else built and saved there.",
)
@click.option("--mode", type=click.Choice(MODES), default="soundex", show_default=True)
@click.option("--asset-class", help="Only assets of this class (type).")
@click.option(
    "--max-rank",
    type=click.IntRange(1, 3),
    default=2,
    show_default=True,
    help="soundex: 1 exact, 2 all words in order, 3 all words in any order.",
)
@click.option("--fallback-mode", type=click.Choice(MODES), help="Tried where the mode fails.")
@click.option("--code-field", help="mode code: the code (extraInfo column) to match on.")
@click.option(
    "--external/--no-external",
    default=True,
    show_default=True,
    help="Where no asset matches, ask the site's gazetteer, then the geocoding service "
    "(useExternalLookups).",
)
@click.option(
    "--upgrade",
    is_flag=True,
    help="Make each place found outside an asset of --asset-class, so the next lookup "
    "finds it (upgradeExternalLookupToInternalAsset; the site's assets only).",
)
@click.option(
    "--required-feature",
    "required_features",
    multiple=True,
    type=click.Choice(FEATURES),
    help="Only external places of this kind count (repeatable; geocoderOptions.requiredFeatures).",
)
@click.option(
    "--output",
    "output",
    type=click.Choice(LOOKUP_OUTPUTS),
    default="asset",
    show_default=True,
    help="The whole asset object or only its id, with --json.",
)
@click.option(
    "--candidates",
    type=click.IntRange(0, 20),
    default=0,
    help="Also list the top K candidates with scores, for review.",
)
@click.option(
    "--explain",
    is_flag=True,
    help="Mode fuzzy: print each query's best candidate, its match probability and the "
    "evidence (in bits) each address component gave. --json always includes them.",
)
@click.option(
    "--review",
    "review_file",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the queries fuzzy could not link but whose best candidate is worth a look "
    "(ties included) to this CSV or XLSX, with their top candidates and a 'chosen' column "
    "to fill with 1, 2, 3, an asset id or none.",
)
@click.option(
    "--links",
    "links_file",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="A marked review file: its decisions settle the queries of the same text (and, "
    "with the site's assets, are remembered for every later lookup and import).",
)
@click.option(
    "-o",
    "out_file",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write one row per query (id, mode, accuracy, error) to this CSV (- for stdout).",
)
@engine_options
@global_options
def lookup(
    queries: tuple[str, ...],
    file: Path | None,
    file_format: str | None,
    encoding: str | None,
    delimiter: str | None,
    quotechar: str | None,
    column: str | None,
    code_column: str | None,
    lat_column: str | None,
    lon_column: str | None,
    wkt_column: str | None,
    assets: Path | None,
    index_dir: Path | None,
    mode: str,
    asset_class: str | None,
    max_rank: int,
    fallback_mode: str | None,
    code_field: str | None,
    external: bool,
    upgrade: bool,
    required_features: tuple[str, ...],
    output: str,
    candidates: int,
    explain: bool,
    review_file: Path | None,
    links_file: Path | None,
    out_file: Path | None,
    engine: str | None,
    scheduler: str | None,
) -> None:
    """Resolve QUERIES, or every row of --file, to assets, offline, before importing.

    Ties are never guessed: a query several assets fit equally gets no asset, with
    the number that tied in its error; --candidates lists them for review. A summary
    (matched, ambiguous, unmatched, per mode) goes to stderr.

    \b
    Exit status, so a scheduled run can tell:
      0  every query found an asset (or there was no query)
      3  some queries found none: unmatched, or ambiguous (a tie gives no asset)
      4  no query found an asset
      1  an error (nothing looked up); 2 a usage error

    \b
    Examples:
      toolkit lookup "11 SMITH ST BALLARAT CENTRAL" --mode soundex --max-rank 3
      toolkit lookup 003938 --mode code --code-field propnum --assets sample_data/parcels.zip
      toolkit lookup --file sample_data/damage_assessments.csv --column Address \\
          --code-column Reference --assets sample_data/parcels.zip --index parcels.idx \\
          --max-rank 3 --fallback-mode fuzzy -o matches.csv
      toolkit --json lookup --file points.csv --lat-column lat --lon-column lon --mode geo
      cut -d, -f1,2 damage.csv | toolkit lookup --file - --column Address -o - > matches.csv
      toolkit lookup --engine dask --scheduler tcp://10.0.0.5:8786 \\
          --file sample_data/damage_assessments.csv --column Address --max-rank 3 -o matches.csv

    Where no asset matches, the site's gazetteer (`toolkit gazetteer load`) and then the
    geocoding service (the config file's geocoder, or TOOLKIT_GEOCODER) are asked.
    """
    import pandas as pd

    from toolkit.matching import LookupOptions, explanations, to_spec_result
    from toolkit.matching.lookup import (
        LookupResult,
        index_from_file,
        queries_from_file,
        result_rows,
    )
    from toolkit.matching.review import read_review, review_frame, write_review
    from toolkit.safe_output import safe_frame
    from toolkit.site.ties import mark_ties

    if bool(queries) == (file is not None):
        raise click.UsageError("give QUERIES or --file, one of the two")
    if is_stdio(out_file) and settings().json:
        raise click.UsageError("-o - and --json both write to stdout; choose one")
    if file is None and (file_format or encoding or delimiter or quotechar):
        raise click.UsageError("--format, --encoding, --delimiter and --quotechar go with --file")
    if file is not None:
        with input_file(file, file_format) as (source, name), progress_bar() as progress:
            frame = queries_from_file(
                source,
                name=name,
                column=column,
                code_column=code_column,
                lat_column=lat_column,
                lon_column=lon_column,
                wkt_column=wkt_column,
                format=file_format,
                encoding=encoding,
                delimiter=delimiter,
                quotechar=quotechar,
                progress=progress,
            )
    else:
        frame = pd.DataFrame({"query": pd.array(list(queries), dtype="str")})
    if upgrade and assets is not None:
        raise click.UsageError("--upgrade makes assets of the site; it does not go with --assets")
    options: dict[str, Any] = {"mode": mode, "maxRank": max_rank, "useExternalLookups": external}
    if upgrade:
        options["upgradeExternalLookupToInternalAsset"] = True
    if required_features:
        options["geocoderOptions"] = {"requiredFeatures": list(required_features)}
    for key, value in (
        ("assetClass", asset_class),
        ("fallbackMode", fallback_mode),
        ("codeField", code_field),
    ):
        if value is not None:
            options[key] = value
    if assets is None and is_remote():
        if review_file is not None or links_file is not None or candidates:
            raise click.UsageError(
                "--review, --links and --candidates work offline (the embedded site or "
                "--assets), not with --url"
            )
        if is_dask(engine, scheduler):
            raise click.UsageError("--engine dask looks up offline, not with --url")
        _remote_lookup(frame, options, output, out_file)
        return
    decisions = None if links_file is None else read_review(links_file)
    with chosen_engine(engine, scheduler) as dask, progress_bar() as progress:
        if assets is not None:
            index = index_from_file(assets, saved=index_dir, progress=progress)
            result = _resolve(
                dask, index, frame, options, candidates, decisions, progress, _file_geocoder()
            )
        else:
            with open_local_site() as site:
                progress("index", 0, None, detail="loading the site's asset index")
                index = site.asset_index()
                progress("index", len(index), len(index))
                if decisions is not None and links_file is not None:
                    kept = site.remember_decisions(decisions)
                    note(f"Remembered {kept} review decisions from {links_file.name}")
                decisions = site.match_decisions()
                result = _resolve(
                    dask, index, frame, options, candidates, decisions, progress, site.geocoder()
                )
                index, resolved = site.upgrade_places(
                    index, result.resolved, LookupOptions.from_dict(options)
                )
                result = LookupResult(resolved, result.candidates, index)
    if review_file is not None:
        to_review = review_frame(index, result.resolved, asset_class)
        write_review(to_review, review_file)
        note(f"Wrote {len(to_review)} queries to review to {review_file}")
    summary = result.summary()
    if out_file is not None:
        _write_rows(safe_frame(result_rows(result)), out_file)
    if settings().json or out_file is None:
        document = mark_ties(to_spec_result(index, result.resolved, output), result.resolved)
        if candidates:
            rows = result_rows(result)
            for entry, review in zip(document.values(), rows["review"], strict=True):
                entry["candidates"] = review or ""
        # Beside the spec's keys, never instead of them: mode fuzzy's explanation.
        for entry, why in zip(document.values(), explanations(index, result.resolved), strict=True):
            if why is not None:
                entry["explain"] = why
        shortlists = _shortlists(result) if candidates else None
        render(document, lines=lambda d: _entry_lines(d.values(), explain, shortlists))
    by_mode = ", ".join(f"{k} {v}" for k, v in summary["byMode"].items())
    places = summary["externalPlaces"]
    note(
        f"{summary['queries']} queries: {summary['matched']} matched"
        + (f" ({by_mode})" if by_mode else "")
        + f", {summary['ambiguous']} ambiguous, {summary['unmatched']} unmatched"
        + (f" ({places} found outside as places, not assets)" if places else "")
    )
    _exit_with_status(summary["queries"], summary["matched"])


# The exit statuses of a lookup that ran: every query found an asset, some, none.
ALL_FOUND, SOME_NOT_FOUND, NONE_FOUND = 0, 3, 4


def lookup_status(queries: int, matched: int) -> int:
    """0 when every query found an asset, 3 when some found none, 4 when none found one."""
    if matched == queries:
        return ALL_FOUND
    return NONE_FOUND if matched == 0 else SOME_NOT_FOUND


def _exit_with_status(queries: int, matched: int) -> None:
    status = lookup_status(queries, matched)
    if status != ALL_FOUND:
        click.get_current_context().exit(status)


def _shortlists(result: Any) -> list[list[str]]:
    """Each query's candidates as text lines: rank, asset id, name, mode and score."""
    top = result.candidates
    lists: list[list[str]] = [[] for _ in range(len(result.resolved))]
    if top.empty:
        return lists
    names = result.index.assets["name"].to_numpy(dtype=object)[top["asset_position"].to_numpy()]
    text = (
        "candidate "
        + top["rank"].astype("string")
        + ": "
        + top["asset_id"].astype("string")
        + " "
        + names.astype(str)
        + " ("
        + top["mode"].astype("string")
        + ", score "
        + top["score"].round(1).astype("string")
        + ")"
    )
    for row, lines in text.groupby(top["row"].to_numpy()).agg(list).items():
        lists[int(row)] = lines
    return lists


def _resolve(
    dask: Any,
    index: Any,
    frame: Any,
    options: dict[str, Any],
    candidates: int,
    decisions: Any,
    progress: Any,
    geocoder: Any,
) -> Any:
    """The lookup on the chosen engine; the external last resort only on the local one
    (Dask's workers hold no gazetteer and no service: their misses say none is offline)."""
    from toolkit.matching.lookup import run_lookup

    if dask is not None:
        return dask.lookup(index, frame, options, candidates, decisions, progress)
    return run_lookup(index, frame, options, candidates, decisions, progress, geocoder)


def _file_geocoder() -> Any:
    """For ``--assets``: the configured geocoding service, if any (a gazetteer is the
    site's; without a service every miss says none is configured)."""
    from toolkit.geocoding import NoSource, service_from_config

    service = service_from_config()
    return NoSource() if service is None else service.open()


def _remote_lookup(frame: Any, options: dict[str, Any], output: str, out_file: Path | None) -> None:
    """The server resolves the queries (its batch asset-lookup), a thousand per request."""
    import pandas as pd
    import shapely

    from toolkit.safe_output import safe_frame
    from toolkit.site.ties import is_ambiguous

    texts = frame["query"].astype("string").fillna("")
    if "geometry" in frame.columns:
        # A point travels as WKT text, which the lookup reads for mode geo.
        wkt = pd.Series(shapely.to_wkt(frame["geometry"].to_numpy()), index=frame.index)
        texts = texts.where(texts != "", wkt.fillna(""))
    if "reference" in frame.columns:
        queries = [
            {"code": str(code), "str": str(text)}
            for code, text in zip(frame["reference"], texts, strict=True)
        ]
    else:
        # Without codes the server keys the answers by a 1-based count, as the spec says.
        queries = [{"str": str(text)} for text in texts]
    with open_site() as site, progress_bar() as progress:
        # Batched by the remote site, the bar moving a batch at a time.
        document = site.asset_lookup(queries, options, output, progress=progress)
    entries = list(document.values())
    matched = sum(1 for e in entries if e["asset"])
    ambiguous = sum(1 for e in entries if is_ambiguous(e))
    if out_file is not None:
        rows = pd.DataFrame(
            [
                {
                    "reference": e["reference"],
                    "query": e["query"],
                    "asset_id": e["asset"]
                    if isinstance(e["asset"], str) or e["asset"] is None
                    else e["asset"]["id"],
                    "asset_name": None if not isinstance(e["asset"], dict) else e["asset"]["name"],
                    "err": e["err"],
                }
                for e in entries
            ]
        )
        _write_rows(safe_frame(rows), out_file)
    # With --out the file is the answer; stdout stays empty unless JSON was asked for.
    render(document, lines=(lambda d: _entry_lines(d.values())) if out_file is None else None)
    note(
        f"{len(entries)} queries: {matched} matched, {ambiguous} ambiguous, "
        f"{len(entries) - matched - ambiguous} unmatched"
    )
    _exit_with_status(len(entries), matched)


def _write_rows(rows: Any, out_file: Path) -> None:
    """The rows as CSV in ``out_file``, or on stdout for ``-``."""
    with output_file(out_file) as out:
        rows.to_csv(out, index=False, encoding="utf-8")
    note(f"Wrote {len(rows)} rows to {'stdout' if is_stdio(out_file) else out_file}")


def _entry_lines(
    entries: Any, explain: bool = False, shortlists: list[list[str]] | None = None
) -> list[str]:
    """One line per lookup entry: reference, query, the asset (or -), the error; with
    ``explain``, a line for mode fuzzy's best candidate and its evidence; with
    ``shortlists`` (``--candidates``), a line per candidate."""
    lines = []
    for position, entry in enumerate(entries):
        asset = entry["asset"]
        if isinstance(asset, dict) and asset["id"] is None:
            label = f"{asset['source']} {asset['name']} (accuracy {asset['accuracy']})"
        elif isinstance(asset, dict):
            label = f"{asset['id']} {asset['name']} (accuracy {asset['accuracy']})"
        else:
            label = asset or "-"
        lines.append(f"{entry['reference']}\t{entry['query']}\t{label}\t{entry['err'] or ''}")
        why = entry.get("explain")
        if explain and why:
            parts = ", ".join(f"{c} {b:+.1f}" for c, b in why["evidence"].items() if b)
            lines.append(
                f"\t  best candidate {why['assetId']}: probability {why['probability']:.4f}; "
                f"evidence in bits: {parts or 'none'}"
            )
        if shortlists is not None:
            lines.extend(f"\t  {text}" for text in shortlists[position])
    return lines
