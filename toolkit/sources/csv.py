"""Reading delimited text: encoding, delimiter, header checks, ragged rows, all values as text.

pyarrow parses (threaded, transcoding non-UTF-8 input as it streams); Python's csv
module only looks at a sample for the delimiter and header, and, when there are
problems to report, scans once to map data records to physical line numbers.
"""

from __future__ import annotations

import csv
import io
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
from numpy.typing import NDArray

from toolkit.errors import OptionError, SourceError
from toolkit.sources.encoding import (
    WINDOWS_1252,
    EncodingDecision,
    check_encoding,
    decode_sample,
    detect_encoding,
)
from toolkit.sources.report import MIB, ReadLimits, SourceProblem

DELIMITERS = ",;\t|"
SAMPLE_BYTES = 1 * MIB
SNIFF_CHARS = 16 * 1024
_VALUE_PREVIEW = 200
_LONG_VALUE_PREVIEW = 40
# pyarrow's block size is a 32-bit count of bytes.
_MAX_BLOCK_BYTES = 2**31 - 1


@dataclass(frozen=True)
class CsvDialect:
    """How a CSV is split when detection is not wanted: a delimiter (None: detect it) and a
    quote character (None: no quoting at all, every quote is text)."""

    delimiter: str | None = None
    quotechar: str | None = '"'


# Names for the delimiters a shell makes awkward to type.
_DELIMITER_NAMES = {
    "tab": "\t",
    "\\t": "\t",
    "comma": ",",
    "semicolon": ";",
    "pipe": "|",
    "space": " ",
}


def csv_dialect(delimiter: str | None = None, quotechar: str | None = None) -> CsvDialect:
    """A checked :class:`CsvDialect` from the user's words; a bad value is an OptionError.

    ``delimiter`` is one character or ``tab``, ``comma``, ``semicolon``, ``pipe``, ``space``;
    ``quotechar`` is one character, or ``none`` for a file whose quotes are plain text.
    """
    chosen = None
    if delimiter is not None:
        chosen = _DELIMITER_NAMES.get(delimiter.lower(), delimiter)
        if len(chosen) != 1 or chosen in "\r\n":
            raise OptionError(
                f"--delimiter {delimiter!r} is not a delimiter: give one character other "
                "than a line break, such as ',' ';' '|', or the word tab"
            )
    quote: str | None = '"'
    if quotechar is not None:
        quote = None if quotechar.lower() == "none" else quotechar
        if quote is not None and (len(quote) != 1 or quote in "\r\n"):
            raise OptionError(
                f"--quotechar {quotechar!r} is not a quote character: give one character, "
                "such as \" or ', or the word none for a file without quoting"
            )
    if chosen is not None and chosen == quote:
        raise OptionError(f"--delimiter and --quotechar are both {chosen!r}; they must differ")
    return CsvDialect(chosen, quote)


@dataclass
class CsvTable:
    """A parsed CSV: text columns, each kept row's record number, and what was decided."""

    table: pa.Table
    row_numbers: NDArray[np.int64]
    encoding: EncodingDecision
    split: _Split
    problems: list[SourceProblem] = field(default_factory=list)
    rejected_rows: dict[int, SourceProblem] = field(default_factory=dict)


@dataclass(frozen=True)
class _Split:
    """The dialect a file is read with, its delimiter decided."""

    delimiter: str
    quotechar: str | None


def _reader(lines: Iterable[str], split: _Split) -> Any:
    """Python's csv reader (its type is private to ``_csv``) splitting as pyarrow does
    with ``split``."""
    if split.quotechar is None:
        return csv.reader(lines, delimiter=split.delimiter, quoting=csv.QUOTE_NONE)
    return csv.reader(lines, delimiter=split.delimiter, quotechar=split.quotechar)


class _Counting(io.RawIOBase):
    """A binary file that reports how many bytes have been read through it: pyarrow reads
    a block (16 MiB or more) at a time, so this costs nothing per row."""

    def __init__(self, raw: io.BufferedReader, on_bytes: Callable[[int], None]) -> None:
        super().__init__()
        self.raw = raw
        self.on_bytes = on_bytes
        self.count = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        read = self.raw.readinto(buffer)
        self.count += read or 0
        self.on_bytes(self.count)
        return read or 0


@dataclass
class _Ragged:
    row: int | None
    text: str
    expected: int
    actual: int


def sniff_delimiter(text: str, quotechar: str | None = '"') -> str:
    """The delimiter of a text sample among ``, ; TAB |``.

    The common case is decided cheaply: the candidate found the same number of times
    (outside quotes) on every complete line of the first few dozen, the most often.
    Otherwise csv.Sniffer decides; when it cannot either (one line, quoted newlines),
    the candidate most frequent in the header line wins, comma on a tie.
    """
    header = text.split("\n", 1)[0]
    lines = text[:SNIFF_CHARS]
    lines = lines[: lines.rfind("\n") + 1] or lines
    consistent = _consistent_delimiter(lines, quotechar)
    if consistent is not None:
        return consistent
    try:
        # The Sniffer's regexes are slow on large text; a few dozen lines decide as well.
        sniffed = csv.Sniffer().sniff(lines, delimiters=DELIMITERS).delimiter
        if sniffed in header:
            return sniffed
    except csv.Error:
        pass
    counts = {candidate: header.count(candidate) for candidate in DELIMITERS}
    best = max(counts, key=lambda c: counts[c])
    return best if counts[best] else ","


def _quoted(quotechar: str) -> re.Pattern[str]:
    q = re.escape(quotechar)
    return re.compile(f"{q}(?:[^{q}]|{q}{q})*{q}")


def _consistent_delimiter(
    sample: str, quotechar: str | None = '"', max_lines: int = 50
) -> str | None:
    """The candidate with the same non-zero count on every line, if exactly one has most."""
    if quotechar is not None:
        if quotechar in sample and sample.count(quotechar) % 2:
            return None  # a quoted field spans lines: leave it to the Sniffer
        sample = _quoted(quotechar).sub("", sample)
    lines = [line for line in sample.splitlines()[:max_lines] if line.strip()]
    if len(lines) < 2:
        return None
    found: dict[str, int] = {}
    for candidate in DELIMITERS:
        counts = {line.count(candidate) for line in lines}
        if len(counts) == 1 and (count := counts.pop()) > 0:
            found[candidate] = count
    if not found:
        return None
    ranked = sorted(found.items(), key=lambda item: item[1], reverse=True)
    if len(ranked) > 1 and ranked[0][1] == ranked[1][1]:
        return None
    return ranked[0][0]


def clean_header(raw: list[str]) -> tuple[list[str], list[SourceProblem]]:
    """Strip header names; name blank ones ``column_N`` and number duplicates, reporting each."""
    names: list[str] = []
    problems: list[SourceProblem] = []
    seen: Counter[str] = Counter()
    stripped = [name.strip() for name in raw]
    taken = set(stripped)
    for position, name in enumerate(stripped, start=1):
        if not name:
            name = f"column_{position}"
            problems.append(
                SourceProblem(
                    f"blank column name in position {position}; called {name}",
                    line=1,
                    column=name,
                )
            )
        seen[name] += 1
        if seen[name] > 1:
            renamed = f"{name}_{seen[name]}"
            while renamed in taken:
                seen[name] += 1
                renamed = f"{name}_{seen[name]}"
            problems.append(
                SourceProblem(
                    f"duplicate column name {name!r} in position {position}; called {renamed}",
                    line=1,
                    column=renamed,
                    value=name,
                )
            )
            name = renamed
        taken.add(name)
        names.append(name)
    return names, problems


def _arrow_encoding(decision: EncodingDecision) -> str:
    # UTF-8 is read natively (fast); pyarrow skips a UTF-8 BOM by itself. Anything else
    # goes through Python's incremental decoder as pyarrow streams the file.
    return "utf8" if decision.encoding == "utf-8" else decision.encoding


def arrow_csv_options(
    names: list[str],
    dialect: _Split,
    encoding: str,
    block_size: int,
    use_threads: bool,
    on_invalid: Callable[[pacsv.InvalidRow], str],
) -> dict[str, Any]:
    """pyarrow's read, parse and convert options for a CSV of ``dialect``: every column
    text, empty cells missing, quoted line breaks kept in their value, ragged rows handed
    to ``on_invalid``. One place for both readers (whole file and in parts)."""
    return {
        "read_options": pacsv.ReadOptions(
            use_threads=use_threads, block_size=block_size, encoding=encoding
        ),
        "parse_options": pacsv.ParseOptions(
            delimiter=dialect.delimiter,
            quote_char=dialect.quotechar if dialect.quotechar is not None else False,
            newlines_in_values=dialect.quotechar is not None,
            invalid_row_handler=on_invalid,
        ),
        "convert_options": pacsv.ConvertOptions(
            column_types=dict.fromkeys(names, pa.string()),
            strings_can_be_null=True,
            null_values=[""],
            quoted_strings_can_be_null=True,
        ),
    }


def _parse(
    path: Path,
    raw_names: list[str],
    dialect: _Split,
    encoding: str,
    block_size: int,
    use_threads: bool,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[pa.Table, list[_Ragged]]:
    ragged: list[_Ragged] = []

    def skip_ragged(row: pacsv.InvalidRow) -> str:
        # pyarrow numbers records from 1 at the header (blank lines not counted),
        # so its number minus one is our data-record number. None when threaded.
        number = None if row.number is None else row.number - 1
        ragged.append(_Ragged(number, row.text, row.expected_columns, row.actual_columns))
        return "skip"

    def read(names: list[str]) -> pa.Table:
        ragged.clear()
        with path.open("rb") as raw:
            return pacsv.read_csv(
                _Counting(raw, on_bytes) if on_bytes is not None else raw,
                **arrow_csv_options(names, dialect, encoding, block_size, use_threads, skip_ragged),
            )

    table = read(raw_names)
    if not all(pa.types.is_string(t) for t in table.schema.types):
        # pyarrow read a header name differently from the csv module (a stray byte, a
        # BOM in another encoding) and typed that column itself: again, by its names.
        table = read(table.column_names)
    return table, ragged


def _read_table(
    path: Path,
    raw_names: list[str],
    dialect: _Split,
    decision: EncodingDecision,
    limits: ReadLimits,
    on_bytes: Callable[[int], None] | None = None,
) -> tuple[pa.Table, list[_Ragged], EncodingDecision]:
    # A record must fit in one block when values may hold newlines.
    block_size = max(16 * MIB, 2 * limits.max_field_bytes)

    def parse(encoding: str, use_threads: bool) -> tuple[pa.Table, list[_Ragged]]:
        nonlocal block_size
        try:
            return _parse(path, raw_names, dialect, encoding, block_size, use_threads, on_bytes)
        except pa.ArrowInvalid as exc:
            whole_file = min(path.stat().st_size + 1, _MAX_BLOCK_BYTES)
            if "straddl" not in str(exc) or block_size >= whole_file:
                raise
            # A quoted value with line breaks is longer than a block: read the file as one
            # block, so the over-long value's row can be left out like any other.
            block_size = whole_file
            return _parse(path, raw_names, dialect, encoding, block_size, use_threads, on_bytes)

    try:
        try:
            table, ragged = parse(_arrow_encoding(decision), True)
        except pa.ArrowInvalid as exc:
            # The sample looked like UTF-8 but a later byte is not: the file is a single-byte
            # encoding whose first accented letter came after the sample.
            if decision.source == "detected" and "invalid UTF8" in str(exc):
                decision = EncodingDecision(WINDOWS_1252, "detected")
                table, ragged = parse(WINDOWS_1252, True)
            else:
                raise
        if ragged:
            # Threaded parsing cannot number rows; the rare file with ragged rows is re-read
            # serially so each one can be reported with its record number.
            table, ragged = parse(_arrow_encoding(decision), False)
    except (pa.ArrowInvalid, UnicodeDecodeError) as exc:
        raise unreadable_csv(path, decision, exc) from exc
    return table, ragged, decision


def unreadable_csv(path: Path, decision: EncodingDecision, exc: Exception) -> SourceError:
    """The error for a CSV pyarrow cannot parse in the chosen encoding, with a hint to
    pass ``--encoding`` when decoding is what failed (both readers raise it)."""
    hint = "pass --encoding" if "UTF8" in str(exc) or "decode" in str(exc) else ""
    return SourceError(
        f"{path}: cannot read as {decision.encoding} CSV: {exc}"
        + (f"; {hint} (e.g. windows-1252)" if hint else "")
    )


def record_lines(path: Path, encoding: str, dialect: _Split, last_row: int) -> NDArray[np.int64]:
    """Physical line where each data record starts, for records 1..last_row.

    Records with quoted newlines make lines and records differ, and only a CSV parser
    knows which newlines are quoted: from the file's bytes at once where they tell it
    (:func:`_record_lines_from_bytes`), else by a scan with the csv module.
    """
    found = _record_lines_from_bytes(path, encoding, dialect, last_row)
    if found is not None:
        return found
    return _record_lines_scanned(path, encoding, dialect, last_row)


# Encodings in which a newline, a carriage return, a quote and a delimiter of ASCII are
# their one byte and no other character holds that byte.
_ASCII_BYTES = {"utf-8", "cp1252", "latin-1", "iso8859-1", "ascii"}


def _record_lines_from_bytes(
    path: Path, encoding: str, dialect: _Split, last_row: int
) -> NDArray[np.int64] | None:
    """:func:`record_lines` from the file's bytes with numpy, or None where they might not
    tell what the csv module's scan tells (which then runs: 1.1 s of CPU for a million
    records, this 0.4 s). They tell it when the encoding spells the newline, quote and
    delimiter as single ASCII bytes, no carriage return stands alone, the file holds no NUL,
    and every quote is where RFC 4180 puts one: opening a field, closing it, or doubled
    inside it. A newline then ends a record exactly when an even number of quotes came
    before it, and a record with nothing on its line is a blank line (no record)."""
    import codecs

    delimiter, quote = dialect.delimiter, dialect.quotechar
    if codecs.lookup(encoding).name not in _ASCII_BYTES or not all(
        len(c) == 1 and ord(c) < 128 for c in (delimiter, quote or ",")
    ):
        return None
    scanned = _scan_bytes(path, ord(quote) if quote is not None else None)
    if scanned is None:
        return None
    newlines, quotes, around, after_newline, begin, size = scanned
    ends = newlines
    if quote is not None:
        if quotes.size % 2:
            return None
        edges = np.array([ord(delimiter), 10, 13], dtype=np.uint8)
        opening, closing = quotes[0::2], quotes[1::2]
        # Doubled inside a field: a closing quote at once followed by an opening one.
        doubled_after = np.zeros(opening.size, dtype=bool)
        doubled_after[1:] = closing[:-1] == opening[1:] - 1
        before_ok = (opening == begin) | (np.isin(around[0::2, 0], edges) & (opening > begin))
        if not (before_ok | doubled_after).all():
            return None
        doubled_before = np.zeros(closing.size, dtype=bool)
        doubled_before[:-1] = doubled_after[1:]
        if not (np.isin(around[1::2, 1], edges) | doubled_before).all():
            return None
        outside = np.searchsorted(quotes, newlines) % 2 == 0
        ends, after_newline = newlines[outside], after_newline[outside]
    # A record starts the file and follows each newline that ends one; a record that
    # starts with a line break is a blank line. The first record is the header.
    starts = np.concatenate([np.array([begin]), ends + 1])
    first = np.concatenate([np.array([_byte_at(path, begin)]), after_newline])
    kept = (starts < size) & (first != 10) & (first != 13)
    lines = 1 + np.searchsorted(newlines, starts[kept][1:])
    found = np.zeros(last_row, dtype=np.int64)
    found[: min(last_row, lines.size)] = lines[:last_row]
    return found


def _byte_at(path: Path, begin: int) -> int:
    """The byte at ``begin`` of ``path`` (10, a line break, past its end)."""
    with path.open("rb") as handle:
        handle.seek(begin)
        byte = handle.read(1)
    return byte[0] if byte else 10


_SCAN_BLOCK = 1 << 24


def _scan_bytes(
    path: Path, quote: int | None
) -> (
    tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.uint8], NDArray[np.uint8], int, int]
    | None
):
    """The positions of the newlines and of the quotes of ``path``, each quote's bytes
    before and after it, each newline's byte after it (10 past the file's end), where the
    text begins (after a UTF-8 byte order mark) and the file's size; None when a carriage
    return stands alone or a NUL is there. Read a block at a time, so memory stays a
    block's whatever the file's size."""
    import codecs

    size = path.stat().st_size
    newlines: list[NDArray[np.int64]] = []
    quotes: list[NDArray[np.int64]] = []
    around: list[NDArray[np.uint8]] = []
    after_newline: list[NDArray[np.uint8]] = []
    begin = 0
    with path.open("rb") as handle:
        for start in range(0, size, _SCAN_BLOCK):
            # The block with a byte of each neighbour, so each byte's neighbours are here.
            base = max(start - 1, 0)
            handle.seek(base)
            data = np.frombuffer(handle.read(_SCAN_BLOCK + 2), dtype=np.uint8)
            padded = np.concatenate([np.array([10], np.uint8), data, np.array([10], np.uint8)])
            if start == 0 and data[:3].tobytes() == codecs.BOM_UTF8:
                begin = 3
            lo, hi = start - base, min(start + _SCAN_BLOCK, size) - base
            core = data[lo:hi]
            if (core == 0).any():
                return None
            returns = np.flatnonzero(core == 13) + lo
            if returns.size and (padded[returns + 2] != 10).any():
                return None
            here = np.flatnonzero(core == 10) + lo
            newlines.append(here + base)
            after_newline.append(padded[here + 2])
            if quote is not None:
                at = np.flatnonzero(core == quote) + lo
                quotes.append(at + base)
                around.append(np.stack([padded[at], padded[at + 2]], axis=1))

    def joined(parts: list[Any], dtype: Any, shape: tuple[int, ...] = (0,)) -> Any:
        return np.concatenate(parts) if parts else np.empty(shape, dtype=dtype)

    return (
        joined(newlines, np.int64),
        joined(quotes, np.int64),
        joined(around, np.uint8, (0, 2)),
        joined(after_newline, np.uint8),
        begin,
        size,
    )


def _record_lines_scanned(
    path: Path, encoding: str, dialect: _Split, last_row: int
) -> NDArray[np.int64]:
    """:func:`record_lines` by the csv module's scan of the file (a Python loop)."""
    codec = "utf-8-sig" if encoding == "utf-8" else encoding
    starts = np.zeros(last_row, dtype=np.int64)
    # The scan passes over the over-long values whose rows were left out, so no field may
    # be refused here: none is longer than the file itself.
    _allow_csv_fields(path.stat().st_size + 1)
    with path.open(encoding=codec, errors="replace", newline="") as handle:
        reader = _reader(handle, dialect)
        consumed = 0
        count = -1  # the header is record 0
        for record in reader:
            start = consumed + 1
            consumed = reader.line_num
            if not record:
                continue  # a blank line is not a record (pyarrow skips it too)
            if count >= 0:
                starts[count] = start
            count += 1
            if count >= last_row:
                break
    return starts


_FIELD_LIMIT_LOCK = threading.Lock()


def _allow_csv_fields(size: int) -> None:
    """Raise the csv module's field size limit to at least ``size`` characters.

    The limit is global to the process and imports run in threads, so it only ever grows
    (under a lock): lowering it back could cut short another thread's scan.
    """
    with _FIELD_LIMIT_LOCK:
        if csv.field_size_limit() < size:
            csv.field_size_limit(min(size, 2**31 - 1))


def _oversized_rows(table: pa.Table, limit: int) -> dict[int, str]:
    """Positions of rows holding a value longer than ``limit`` bytes, each with its first
    such column."""
    found: dict[int, str] = {}
    for name, column in zip(table.column_names, table.columns, strict=True):
        # No value can be longer than all of its chunk's text together: usually decides at once.
        if all(
            chunk.buffers()[2] is None or chunk.buffers()[2].size <= limit
            for chunk in column.chunks
        ):
            continue
        lengths = pc.binary_length(column)
        longest = pc.max(lengths).as_py()
        if longest is not None and longest > limit:
            over = pc.fill_null(pc.greater(lengths, limit), False).to_numpy(zero_copy_only=False)
            for position in np.flatnonzero(over).tolist():
                found.setdefault(position, name)
    return dict(sorted(found.items()))


def add_lines(problems: list[SourceProblem], path: Path, table: CsvTable) -> list[SourceProblem]:
    """The problems with the physical line of each problem row filled in."""
    rows = [p.row for p in problems if p.row is not None and p.line is None]
    if not rows:
        return problems
    starts = record_lines(path, table.encoding.encoding, table.split, max(rows))
    return [
        replace(p, line=int(starts[p.row - 1]) or None)
        if p.row is not None and p.line is None
        else p
        for p in problems
    ]


def read_csv_table(
    path: Path,
    encoding: str | None,
    limits: ReadLimits,
    dialect: CsvDialect | None = None,
    *,
    on_bytes: Callable[[int], None] | None = None,
) -> CsvTable:
    """Parse ``path`` into text columns, deciding encoding and delimiter (unless ``dialect``
    gives it), collecting problems."""
    decision, split, raw_names, names, problems = csv_prelude(path, encoding, dialect)
    table, ragged, decision = _read_table(path, raw_names, split, decision, limits, on_bytes)
    if table.num_columns != len(names):
        raise SourceError(
            f"{path}: the header has {len(names)} columns but pyarrow found "
            f"{table.num_columns}; check the delimiter and quoting"
        )
    table = table.rename_columns(names)
    row_numbers, rejected = _ragged_rows(ragged, table.num_rows, 1)
    table, row_numbers = _drop_oversized(table, row_numbers, limits, rejected)
    if table.num_rows == 0 and not ragged:
        problems.append(SourceProblem("the file has a header but no data rows", line=None))
    return CsvTable(table, row_numbers, decision, split, problems, rejected)


def csv_prelude(
    path: Path, encoding: str | None, dialect: CsvDialect | None
) -> tuple[EncodingDecision, _Split, list[str], list[str], list[SourceProblem]]:
    """What a read of ``path`` decides from its first MiB: the encoding, how it is split,
    the header as written and as cleaned, and the header's problems."""
    dialect = dialect or CsvDialect()
    with path.open("rb") as handle:
        sample = handle.read(SAMPLE_BYTES)
        whole = len(sample) < SAMPLE_BYTES
    if encoding is not None:
        decision = EncodingDecision(check_encoding(encoding, str(path)), "given")
    else:
        decision = detect_encoding(sample)
    text = decode_sample(sample, decision.encoding).lstrip("\ufeff")
    if not whole:
        text = text[: text.rfind("\n") + 1] or text  # do not sniff a cut-off last line
    if not text.strip():
        raise SourceError(f"{path}: the file is empty (no header, no data)")

    delimiter = dialect.delimiter or sniff_delimiter(text, dialect.quotechar)
    split = _Split(delimiter, dialect.quotechar)
    # As pyarrow reads it: a lone "\r" ends a line (not an error), blank lines are skipped.
    records = _reader(io.StringIO(text, newline=""), split)
    raw_names: list[str] = next((record for record in records if record), [])
    names, problems = clean_header(raw_names)
    return decision, split, raw_names, names, problems


def _ragged_rows(
    ragged: list[_Ragged], kept: int, first: int
) -> tuple[NDArray[np.int64], dict[int, SourceProblem]]:
    """The record numbers of ``kept`` rows read from record ``first`` on, skipping the
    ragged rows among them, and a problem for each ragged row."""
    numbers = sorted(r.row for r in ragged if r.row is not None)
    skipped = np.array([n for n in numbers if n >= first], dtype=np.int64)
    # The kept rows are the next ``kept`` numbers that are not ragged.
    count = kept
    while True:
        span = np.arange(first, first + count, dtype=np.int64)
        inside = int((skipped < first + count).sum())
        if count == kept + inside:
            break
        count = kept + inside
    row_numbers = span[~np.isin(span, skipped)] if skipped.size else span
    rejected = {
        item.row or 0: SourceProblem(
            f"expected {item.expected} values, found {item.actual}; row left out",
            row=item.row,
            value=item.text[:_VALUE_PREVIEW],
        )
        for item in ragged
    }
    return row_numbers, rejected


def _drop_oversized(
    table: pa.Table,
    row_numbers: NDArray[np.int64],
    limits: ReadLimits,
    rejected: dict[int, SourceProblem],
) -> tuple[pa.Table, NDArray[np.int64]]:
    """``table`` without its rows holding an over-long value, each added to ``rejected``."""
    oversized = _oversized_rows(table, limits.max_field_bytes)
    if not oversized:
        return table, row_numbers
    for position, name in oversized.items():
        row = int(row_numbers[position])
        start = table.column(name)[position].as_py()[:_LONG_VALUE_PREVIEW]
        rejected[row] = SourceProblem(
            f"the value is longer than {limits.max_field_bytes} bytes; row left out",
            row=row,
            column=name,
            value=f"{start}...",
        )
    keep = np.ones(table.num_rows, dtype=bool)
    keep[list(oversized)] = False
    return table.filter(pa.array(keep)), row_numbers[keep]
