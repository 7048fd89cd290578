"""How many rejected rows an import may have and still write the good ones (maxRejects).

``N`` allows N rejected rows, ``N%`` allows N percent of the rows read (rounded down):
a job with more rejected rows than that FAILS and writes nothing, as ingestion tools
do. Without a limit a job writes its good rows, whatever the rejects; rollbackOnError
is the limit 0.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

from toolkit.errors import OptionError

# A count (digits), or a percentage with an optional decimal part.
_PATTERN = re.compile(r"^\s*(?P<number>\d+(?:\.\d+)?)\s*(?P<percent>%?)\s*$")


@dataclass(frozen=True)
class RejectLimit:
    """A limit on rejected rows: a number of rows, or a percentage of the rows read."""

    count: int | None = None
    percent: Fraction | None = None

    @classmethod
    def parse(cls, value: object, name: str = "maxRejects") -> RejectLimit:
        """``10`` or ``2.5%`` (a whole number of rows, or 0 to 100 percent); any other
        value is an :class:`OptionError` naming ``name`` and what is allowed."""
        text = str(value) if isinstance(value, int | str) and not isinstance(value, bool) else ""
        match = _PATTERN.match(text)
        wanted = "a whole number of rows (10) or a percentage of the rows read (2.5%)"
        if match is None:
            raise OptionError(f"{name} {value!r} is not {wanted}")
        number = match["number"]
        if match["percent"]:
            percent = Fraction(number)
            if percent > 100:
                raise OptionError(f"{name} {value!r}: a percentage is 0% to 100%")
            return cls(percent=percent)
        if "." in number:
            raise OptionError(f"{name} {value!r} is not {wanted}")
        return cls(count=int(number))

    def allowed(self, read: int) -> int:
        """How many rejected rows a job that read ``read`` rows may have."""
        if self.percent is not None:
            return math.floor(self.percent * read / 100)
        return int(self.count or 0)

    def exceeded(self, rejected: int, read: int) -> bool:
        return rejected > self.allowed(read)

    def describe(self, read: int) -> str:
        """``10`` or ``5% (50 of 1000 rows read)``: the limit, and what it came to."""
        if self.percent is None:
            return str(self)
        return f"{self} ({self.allowed(read)} of {read} rows read)"

    def __str__(self) -> str:
        if self.percent is not None:
            whole = self.percent.denominator == 1
            return f"{self.percent.numerator if whole else float(self.percent):g}%"
        return str(self.count)


def refusal(
    limit: RejectLimit | None,
    rejected: int,
    read: int,
    *,
    rollback_on_error: bool = False,
    outcome: str = "nothing was written",
) -> str | None:
    """Why a job with ``rejected`` of ``read`` rows writes nothing, naming the count and
    the limit (``limit`` is rollbackOnError's 0 when that is set), or None when it may
    write its good rows."""
    if limit is None or not limit.exceeded(rejected, read):
        return None
    if rollback_on_error:
        return f"{rejected} row(s) rejected and rollbackOnError is set; {outcome}"
    allowed = limit.describe(read)
    return f"{rejected} row(s) rejected, more than maxRejects {allowed} allows; {outcome}"
