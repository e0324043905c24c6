"""Numbers, dates, times, currency, percentages and units → words, per language.

English is verbalized completely (`numbers_en`). Chinese uses cn2an after units, currencies,
dates and times are rewritten into Chinese patterns (`numbers_zh`). Japanese only gets units,
currencies, dates and times rewritten (`numbers_ja`). Korean keeps digits (espeak reads them)
minus thousands separators.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from streamtts.processors.segment.exceptions import UnreadableNumber
from streamtts.processors.segment.number_context import read_codes, read_ranges
from streamtts.processors.segment.number_tokens import TOKEN_RE, ascii_digits
from streamtts.processors.segment.numbers_en import read_en
from streamtts.processors.segment.numbers_ja import read_ja
from streamtts.processors.segment.numbers_zh import read_zh, zh_leftover_digits


def _read_ko(m: re.Match[str]) -> str:
    text = m.group(0).replace(",", "") if m.group("num") else m.group(0)
    return text.replace("%", "퍼센트")


_VERBALIZERS = {
    "en": read_en,
    "zh": read_zh,
    "yue": read_zh,
    "ja": read_ja,
    "ko": _read_ko,
}


def verbalize_numbers(text: str, lang: str, before: str = "") -> str:
    """Rewrite numeric expressions of `text` into words for `lang`.

    Codes (verification codes, phone and order numbers, card tails…) are read digit by digit,
    ranges as "A to B", everything else as quantities (see `number_context`). Digits of any
    script are read as the ASCII digits they stand for.

    Args:
        text: a run of one language (see `processors.segment.langid`).
        lang: zh, yue, en, ja, ko; any other language returns `text` unchanged.
        before: the sentence's text before this run (for code words in another run).
    Returns:
        The text with numbers, dates ("2024-03-15"), times ("10:30"), currency ("$3.50"),
        percentages and known units ("5kg") verbalized.
    Raises:
        UnreadableNumber: a number the language's reader fails on (none is known: a
            reader's own error never reaches the requester as it is).
    """
    reader = _VERBALIZERS.get(lang)
    if reader is None or not any(c.isdigit() for c in text):
        return text
    text = ascii_digits(text)
    token = _guarded(reader, lang)
    if lang == "en":  # "iPhone15", "MP3": a number glued to a word is still its own word
        text = re.sub(r"(?<=[A-Za-z])(?=\d)", " ", text)
    text = read_ranges(read_codes(text, lang, before), lang)
    out = TOKEN_RE.sub(token, text)
    if lang == "zh" or lang == "yue":
        out = zh_leftover_digits(out)
    if lang == "en":
        out = re.sub(r" *([,.;:!?]) *(?=[,.;:!?]|$)", r"\1", re.sub(r"  +", " ", out))
        out = re.sub(r" +([,.;:!?])", r"\1", out)
    return out


def _guarded(reader: Callable[[re.Match[str]], str], lang: str) -> Callable[[re.Match[str]], str]:
    """`reader`, with any failure of it (cn2an raises on shapes it does not know) turned
    into UnreadableNumber naming the number."""

    def read(m: re.Match[str]) -> str:
        try:
            return reader(m)
        except Exception:
            raise UnreadableNumber(f"the number {m.group(0)[:40]!r} cannot be read out in {lang}") from None

    return read
