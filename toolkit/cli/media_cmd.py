"""`toolkit media upload|get`: the API's media files (spec 4.10), on either face.

An upload answers the file's id, which items carry in a field of type ``media``
(every register has ``photos``); a download writes the bytes as they were stored.
"""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import click

from toolkit.cli import cli
from toolkit.cli.context import global_options, note, open_site, settings
from toolkit.cli.files import STDIN_NAME, is_stdio, output_file
from toolkit.cli.render import render


@cli.group("media")
@global_options
def media_group() -> None:
    """Upload files (photos, videos, documents) to attach to items, and download them.

    \b
    Examples:
      toolkit media upload roof.jpg
      toolkit item update 42 --field photos:=[1]
      toolkit media get 1 -o roof.jpg
    """


def _read(file: Path, name: str) -> bytes:
    """The file's bytes (stdin for ``-``), refused before reading when over the limit."""
    from toolkit.errors import SourceError
    from toolkit.site.writes import MAX_MEDIA_BYTES, check_media_size

    try:
        if is_stdio(file):
            if sys.stdin.isatty():
                raise click.UsageError("- uploads stdin, but nothing is piped in")
            content = sys.stdin.buffer.read(MAX_MEDIA_BYTES + 1)
        else:
            check_media_size(name, file.stat().st_size)
            content = file.read_bytes()
    except OSError as exc:
        raise SourceError(f"{file}: cannot read it: {exc.strerror or exc}") from exc
    check_media_size(name, len(content))
    return content


@media_group.command("upload")
@click.argument(
    "file", type=click.Path(exists=True, dir_okay=False, allow_dash=True, path_type=Path)
)
@click.option("--name", help="The file's friendly name (default: FILE's name; needed for -).")
@click.option(
    "--content-type",
    help="Its media type, e.g. image/jpeg (default: what the name suggests).",
)
@global_options
def media_upload(file: Path, name: str | None, content_type: str | None) -> None:
    """Upload FILE (- for stdin) as a media file and print its id.

    At most 10 MB, one request of the API. Attach it to an item by putting the id in
    a media field: `toolkit item update ITEM --field photos:=[ID]`.

    \b
    Examples:
      toolkit media upload roof.jpg
      toolkit media upload roof.jpg --json | jq .id
      curl -s https://example.org/plan.pdf | toolkit media upload - --name plan.pdf
    """
    if name is None:
        if is_stdio(file):
            raise click.UsageError("an upload from stdin needs --name (its friendly file name)")
        name = file.name
    content = _read(file, name)
    with open_site() as site:
        media = site.upload_media(name, content, content_type)
    shown = STDIN_NAME if is_stdio(file) else str(file)
    render(media, lines=lambda m: _upload_line(m, shown, len(content)))
    note(f"Attach it to an item: toolkit item update ITEM --field photos:=[{media['id']}]")


def _upload_line(media: dict[str, Any], source: str, size: int) -> str:
    kind = f"{media['contentType']}, " if media.get("contentType") else ""
    return f"Uploaded {source} as media file {media['id']} ({kind}{size:,} bytes)"


@media_group.command("get")
@click.argument("media_id", type=int)
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, allow_dash=True, path_type=Path),
    help="Write the file here (- for stdout; the default when stdout is not a terminal).",
)
@global_options
def media_get(media_id: int, output: Path | None) -> None:
    """Download media file MEDIA_ID, its bytes exactly as uploaded.

    A file is written whole or not at all. With -o FILE, --json prints the file's id,
    content type, size and SHA-256.

    \b
    Examples:
      toolkit media get 1 -o roof.jpg
      toolkit media get 1 -o - | file -
      toolkit media get 1 > roof.jpg
    """
    if output is None:
        if sys.stdout.isatty():
            raise click.UsageError("a media file is binary: write it with -o FILE or redirect")
        output = Path("-")
    if is_stdio(output) and settings().json:
        raise click.UsageError("--json and -o - both write stdout; give -o FILE for --json")
    with open_site() as site:
        content, content_type = site.download_media(media_id)
    with output_file(output) as out:
        out.write(content)
    info = {
        "id": media_id,
        "contentType": content_type,
        "size": len(content),
        "sha256": hashlib.sha256(content).hexdigest(),
        "file": str(output),
    }
    if is_stdio(output):
        note(f"Wrote media file {media_id} ({content_type}, {len(content):,} bytes) to stdout")
        return
    render(
        info,
        lines=lambda i: (
            f"Wrote media file {media_id} to {output} ({i['contentType']}, {i['size']:,} bytes)"
        ),
    )
