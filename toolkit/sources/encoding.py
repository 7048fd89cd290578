"""Deciding the text encoding of a source from its bytes, and saying how it was decided.

Order of evidence: a byte-order mark; a strict UTF-8 decode (cheap and nearly never
wrong: Windows-1252 text with accents is almost never valid UTF-8); only then
charset-normalizer, trusted for scripts other than Western European, because on a
few accented Latin letters it may name any of a dozen similar code pages.
"""

from __future__ import annotations

import codecs
from dataclasses import dataclass

from toolkit.errors import SourceError
from toolkit.sources.report import EncodingSource

_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF32_LE, "utf-32"),  # before UTF-16 LE: it starts with the same two bytes
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)

# Code pages charset-normalizer may decide on its own: scripts where a Western guess
# would be wrong for nearly every character, so its statistics are meaningful.
_DISTINCT_SCRIPTS = frozenset(
    {
        "cp1251",
        "koi8_r",
        "cp1253",
        "cp1255",
        "cp1256",
        "shift_jis",
        "cp932",
        "euc_jp",
        "gb2312",
        "gbk",
        "gb18030",
        "big5",
        "euc_kr",
        "cp949",
        "utf_16",
        "utf_16_le",
        "utf_16_be",
        "tis_620",
        "cp874",
    }
)

WINDOWS_1252 = "windows-1252"
LATIN_1 = "latin-1"


@dataclass(frozen=True)
class EncodingDecision:
    """An encoding (a Python codec name), how it was decided, and the BOM bytes to skip."""

    encoding: str
    source: EncodingSource
    bom_length: int = 0


def check_encoding(name: str, path: str) -> str:
    """The canonical codec name for a user-given encoding, or a SourceError."""
    try:
        return codecs.lookup(name).name
    except LookupError:
        raise SourceError(
            f"{path}: unknown encoding {name!r}; pass --encoding with a Python codec name "
            "such as utf-8, windows-1252, latin-1 or utf-16"
        ) from None


def detect_encoding(sample: bytes) -> EncodingDecision:
    """Decide the encoding of text whose first bytes are ``sample``."""
    for bom, encoding in _BOMS:
        if sample.startswith(bom):
            return EncodingDecision(encoding, "bom", len(bom))
    if is_utf8(sample):
        return EncodingDecision("utf-8", "detected")
    return EncodingDecision(guess_single_byte(sample), "detected")


def is_utf8(sample: bytes) -> bool:
    """True if ``sample`` is valid UTF-8, allowing a character cut at the end of the sample."""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        return False
    return True


def guess_single_byte(sample: bytes) -> str:
    """The encoding of text known not to be UTF-8: Windows-1252 unless evidence says otherwise."""
    from charset_normalizer import from_bytes

    best = from_bytes(sample).best()
    if best is not None and best.encoding in _DISTINCT_SCRIPTS:
        return best.encoding
    # Windows-1252 leaves five bytes undefined; text using them is Latin-1 (C1 controls).
    try:
        sample.decode("cp1252")
    except UnicodeDecodeError:
        return LATIN_1
    return WINDOWS_1252


def decode_sample(sample: bytes, encoding: str) -> str:
    """Decode the leading ``sample`` of a file, tolerating a character cut at its end."""
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    return decoder.decode(sample, final=False)
