"""What a number looks like in text: the one token pattern every language's reader matches,
and digits of any script as the ASCII digits the readers know."""

from __future__ import annotations

import re
import unicodedata
from typing import NamedTuple

# Groups the readers use: date (y, mo, d), time (hh, mm, ss), num (sign, cur, int, frac,
# suffix: a unit, %, an ordinal ending or am/pm).
TOKEN_RE = re.compile(
    r"(?P<date>(?<!\d)(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})(?!\d))"
    r"|(?P<time>(?<!\d)(?P<hh>\d{1,2}):(?P<mm>\d{2})(?::(?P<ss>\d{2}))?(?!\d))"
    r"|(?P<num>(?P<sign>(?<![\w.])[-+])?(?P<cur>[$€£¥￥])?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<frac>\d+))?"
    r"(?P<suffix>%|‰|°[CF]?|℃|km/h|m/s|[a-zA-Z]{1,3}(?![a-zA-Z])"
    r"| (?:km|cm|mm|kg|mg|ml|mL|lbs?|ft|mi|hr|min|ms|[GMKkT]B|[kMG]?Hz|kW|mph|°[CF])"
    r"(?![\w/]))?)"
)


class NumberToken(NamedTuple):
    """A `num` match of `TOKEN_RE` in its parts."""

    sign: str | None
    cur: str | None
    int_part: str
    """The integer digits, with or without the thousands separators as written."""
    frac: str | None
    suffix: str | None
    """The unit, %, ordinal ending or am/pm, without the space before it."""


def number_token(m: re.Match[str], *, separators: bool = True) -> NumberToken:
    """The parts of a `num` match; `separators=False` drops the thousands separators."""
    int_part = m.group("int") if separators else m.group("int").replace(",", "")
    suffix = (m.group("suffix") or "").strip() or None
    return NumberToken(m.group("sign"), m.group("cur"), int_part, m.group("frac"), suffix)


def ascii_digits(text: str) -> str:
    """`text` with every Unicode decimal digit (category Nd: ١٢٣, १२३, ๑๒๓ …) as its ASCII
    digit, one character for one: the readers (cn2an, the word tables) know 0-9 only, while
    `\\d` in a pattern matches them all."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.digit(c)) if unicodedata.category(c) == "Nd" else c for c in text)
