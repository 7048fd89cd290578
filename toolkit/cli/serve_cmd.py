"""``toolkit serve``: the service's HTTP API over the embedded site file."""

from __future__ import annotations

import click

from toolkit.cli import cli
from toolkit.cli.context import embedded_only, global_options, note, settings
from toolkit.model.location import display_name
from toolkit.names import GEOCODER_PROTOCOLS


@cli.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=int, default=8080, show_default=True, help="Port to listen on.")
@click.option(
    "--rate-limit",
    default="600/minute",
    show_default=True,
    help="Requests per user (all its tokens together): COUNT/second|minute|hour, or none.",
)
@click.option(
    "--auth-rate-limit",
    default="60/minute",
    show_default=True,
    help="auth calls per client address (and as many refused tokens), or none.",
)
@click.option(
    "--forwarded-allow-ips",
    metavar="IPS",
    help="Comma-separated proxy addresses or networks (or *) whose X-Forwarded-For and "
    "X-Forwarded-Proto are believed (default: none; the client is the TCP peer).",
)
@click.option(
    "--header-timeout",
    type=click.FloatRange(0.1, 3600),
    default=10.0,
    show_default=True,
    help="Seconds a request's line and headers may take to arrive.",
)
@click.option(
    "--body-timeout",
    type=click.FloatRange(0.1, 3600),
    default=60.0,
    show_default=True,
    help="Seconds a request's body may take to arrive (and a client may stall reading an answer).",
)
@click.option(
    "--max-connections",
    type=click.IntRange(1, 100_000),
    default=512,
    show_default=True,
    help="Connections open at once; more are answered 503.",
)
@click.option(
    "--max-connections-per-client",
    type=click.IntRange(1, 100_000),
    default=64,
    show_default=True,
    help="Connections open at once per client address (trusted proxies exempt).",
)
@click.option(
    "--workers",
    type=click.IntRange(1, 64),
    default=2,
    show_default=True,
    help="Import jobs, and report runs, each at most this many at once in the background.",
)
@click.option(
    "--max-unfinished-reports",
    type=click.IntRange(0, 100_000),
    default=16,
    show_default=True,
    help="Report runs a user may have queued or running, over all its tokens; more are "
    "answered 429 (0: no cap).",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 64),
    default=1,
    show_default=True,
    help="Server processes on the one port, to use several cores; limits and failed logins "
    "are counted over all of them, connection caps and --workers per process.",
)
@click.option(
    "--base-url",
    help="The URL clients reach this server at, for the $schema of report contents "
    "(default: the URL each request came to).",
)
@click.option(
    "--geocoder",
    metavar="URL",
    help="A Nominatim- or Pelias-compatible geocoding service that lookups ask when no asset "
    "and no gazetteer matches (default: the config file's geocoder, or TOOLKIT_GEOCODER). "
    "Put a URL that holds a key in the config file, not here.",
)
@click.option(
    "--geocoder-protocol",
    metavar="|".join(GEOCODER_PROTOCOLS),
    help="How to talk to --geocoder (default: pelias when its path ends in /v1, else nominatim).",
)
@global_options
def serve(
    host: str,
    port: int,
    rate_limit: str,
    auth_rate_limit: str,
    forwarded_allow_ips: str | None,
    header_timeout: float,
    body_timeout: float,
    max_connections: int,
    max_connections_per_client: int,
    workers: int,
    max_unfinished_reports: int,
    processes: int,
    base_url: str | None,
    geocoder: str | None,
    geocoder_protocol: str | None,
) -> None:
    """Serve the API of the service over the embedded site file (every site in it).

    Clients choose the site with X-Site and log in with POST /api/json/auth as a
    user set up with `toolkit user ...`. The API is described at
    /api/json/openapi.json. Logs one line per request, never headers or bodies.
    Failed logins lock an account name for a while (5 in a row: 2 s, doubling
    to 15 minutes); slow clients are cut off by the header and body timeouts.

    \b
    Examples:
      toolkit serve
      toolkit --store staging.sqlite serve --host 0.0.0.0 --port 9000 --rate-limit 1200/minute
      toolkit serve --workers 4 --base-url https://staging.example.org
      toolkit serve --host 0.0.0.0 --processes 4   # one per core
      toolkit serve --host 127.0.0.1 --forwarded-allow-ips 127.0.0.1  # behind a local proxy
      toolkit serve --rules ./our-rules     # clients may then name the rules in that folder
      toolkit serve --geocoder http://localhost:8088   # a Nominatim of the organisation

    Clients name a rule of the catalogue (the built-in rules and those of --rules,
    before or after `serve`), never a path. A lookup that matches no asset asks the
    site's gazetteer (`toolkit gazetteer load`), then the geocoding service.
    """
    import uvicorn

    from toolkit.geocoding import ServiceSettings, service_from_config
    from toolkit.server import ServerSettings, create_app
    from toolkit.server.limits import parse_rate
    from toolkit.server.processes import log_requests, serve_processes
    from toolkit.server.transport import uvicorn_config

    embedded_only("serve serves the embedded site file")
    current = settings()
    parse_rate(rate_limit)  # a bad value is a clear error before anything starts
    parse_rate(auth_rate_limit)
    if geocoder_protocol is not None and geocoder is None:
        raise click.UsageError("--geocoder-protocol goes with --geocoder")
    service = (
        ServiceSettings.of(geocoder, geocoder_protocol)
        if geocoder is not None
        else service_from_config(current.profile)
    )
    server_settings = ServerSettings(
        rate_limit=rate_limit,
        auth_rate_limit=auth_rate_limit,
        workers=workers,
        max_unfinished_reports=max_unfinished_reports or None,
        rule_paths=current.rule_paths,
        base_url=base_url,
        header_timeout_s=header_timeout,
        body_timeout_s=body_timeout,
        max_connections=max_connections,
        max_connections_per_client=max_connections_per_client,
        forwarded_allow_ips=forwarded_allow_ips or None,
        geocoder=service,
    )
    # Made here in every case, so a bad file or --rules fails before anything listens.
    app = create_app(current.store, settings=server_settings)
    if not current.quiet:
        log_requests(process_ids=processes > 1)
    if service is not None:
        note(f"lookups that match no asset ask {service.name}")
    each = f" in {processes} processes" if processes > 1 else ""
    note(
        f"serving {display_name(current.store)} at http://{host}:{port}/api/json/{each} "
        "(Ctrl+C to stop)"
    )
    if processes == 1:
        uvicorn.Server(uvicorn_config(app, host=host, port=port)).run()
        return
    app.state.server.shutdown()  # each worker process makes its own
    serve_processes(
        current.store,
        server_settings,
        host=host,
        port=port,
        processes=processes,
        quiet=current.quiet,
    )
