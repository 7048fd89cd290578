"""Every record of a collection, a page at a time, on either face of a site.

The API pages with ``limit`` and ``offset`` and answers ``count`` and ``total`` (spec
2.1, 4.11); the embedded site answers in the same shapes. :func:`pages` asks for one
page after another until the collection is exhausted, so a caller can write each page
before the next is fetched, never holding more than one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

from toolkit.errors import OptionError
from toolkit.query.filters import MAX_LIMIT

ListPage = Callable[[Mapping[str, str]], dict[str, Any]]


def pages(
    list_page: ListPage, params: Mapping[str, str], *, page_size: int = MAX_LIMIT
) -> Iterator[dict[str, Any]]:
    """Each page (the spec's envelope) of the collection ``list_page`` answers for
    ``params``, from their ``offset`` on, ``page_size`` records at a time.

    It stops at a short or empty page, or once ``total`` records have been passed; a
    collection that grows while it is read (records are ordered by ``params['order']``,
    ``id`` by default) may gain records at its end, which are read too.
    """
    if not 1 <= page_size <= MAX_LIMIT:
        raise OptionError(f"page size {page_size} is not in 1..{MAX_LIMIT}")
    offset = int(params.get("offset", 0) or 0)
    while True:
        page = list_page({**params, "limit": str(page_size), "offset": str(offset)})
        yield page
        count = int(page["count"])
        offset += count
        if count < page_size or offset >= int(page["total"]):
            return
