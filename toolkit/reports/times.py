"""Times in the site's time zone, with the zone named.

The site's zone is configured where the reports run: ``TOOLKIT_TIMEZONE`` (an IANA name
such as ``Australia/Melbourne``; default ``UTC``) in the environment of the command or of
``toolkit serve``. A run records the zone in its header, so every fetch of that run
shows the same times. JSON keeps the spec's epoch seconds; the other formats show local
times and name the zone in the column heading; CSV writes ISO 8601 with the offset
(``2026-02-14T19:00:00+11:00``), or with ``--excel`` the local time a spreadsheet reads
as a date (``2026-02-14 19:00:00``).

Everything is done on whole Arrow columns: the zone database is consulted once per
column by ``local_timestamp``, and offsets are formatted with string kernels.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

import pyarrow as pa
import pyarrow.compute as pc

from toolkit.errors import OptionError

TIMEZONE_ENV = "TOOLKIT_TIMEZONE"
UTC = "UTC"


def check_zone(name: str) -> str:
    """``name`` if it is an IANA time zone, else an error naming it and the variable."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        close = sorted(z for z in available_timezones() if name.lower() in z.lower())[:5]
        hint = f"; did you mean {', '.join(close)}" if close else " (e.g. Australia/Melbourne)"
        raise OptionError(f"{TIMEZONE_ENV} {name!r} is not an IANA time zone{hint}") from None
    return name


def site_zone(environ: Mapping[str, str] | None = None) -> str:
    """The configured zone of the reports run here (checked), UTC when none is."""
    env = os.environ if environ is None else environ
    return check_zone(env.get(TIMEZONE_ENV, "").strip() or UTC)


def local_time(column: pa.Array, zone: str) -> pa.Array:
    """Timestamps as naive local times in ``zone`` (what a spreadsheet cell holds)."""
    naive = pa.timestamp("ms")
    if zone == UTC:
        return column.cast(naive)
    return pc.local_timestamp(column.cast(pa.timestamp("ms", tz=zone))).cast(naive)


def _two(numbers: pa.Array) -> pa.Array:
    return pc.utf8_lpad(numbers.cast(pa.string()), 2, "0")


def _offset_text(offset_ms: pa.Array) -> pa.Array:
    """Offsets in milliseconds as ``+11:00``, ``-03:30``, ``+00:00``."""
    minutes = pc.divide(offset_ms, 60_000)
    sign = pc.if_else(pc.less(minutes, 0), "-", "+")
    size = pc.abs(minutes)
    hours = pc.divide(size, 60)
    rest = pc.subtract(size, pc.multiply(hours, 60))
    return pc.binary_join_element_wise(sign, _two(hours), ":", _two(rest), "")


def iso_local(column: pa.Array, zone: str, *, excel: bool = False) -> pa.Array:
    """ISO 8601 text of each timestamp in ``zone``: ``2026-02-14T19:00:00+11:00`` (seconds;
    milliseconds when not whole), or for a spreadsheet ``2026-02-14 19:00:00``."""
    local = local_time(column, zone)
    text = local.cast(pa.string())  # "2026-02-14 19:00:00.000"
    ms = local.cast(pa.int64())
    fraction = pc.not_equal(pc.subtract(ms, pc.multiply(pc.divide(ms, 1000), 1000)), 0)
    text = pc.if_else(pc.fill_null(fraction, False), text, pc.utf8_slice_codeunits(text, 0, 19))
    if excel:
        return text
    iso = pc.replace_substring(text, " ", "T", max_replacements=1)
    offset = pc.subtract(local.cast(pa.int64()), column.cast(pa.timestamp("ms")).cast(pa.int64()))
    return pc.binary_join_element_wise(iso, _offset_text(offset), "")


def local_text(millis: int | None, zone: str) -> str:
    """One moment (epoch milliseconds) as local time in ``zone``, e.g. for a page's
    "generated" line."""
    if millis is None:
        return "-"
    moment = pa.array([millis], pa.timestamp("ms", tz=UTC))
    return str(iso_local(moment, zone, excel=True)[0].as_py())


def zone_label(label: str, zone: str) -> str:
    """A timestamp column's heading with its zone: ``Created (Australia/Melbourne)``."""
    return f"{label} ({zone})"
