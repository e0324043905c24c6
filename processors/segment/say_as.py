"""SSML `<say-as interpret-as=…>`: the content read the way the document says (pure).

The plain front-end guesses ("2024" a year or a quantity, "110" a number or digits); say-as
removes the guess. Each reader returns words in the span's language, so the number
verbalizer after it has nothing left to read. zh (and yue) and en have their own readers; ja
reads digits itself (OpenJTalk) and gets digit words only for `digits` and `telephone`.
"""

from __future__ import annotations

import re

from streamtts.processors.segment.exceptions import SegmentationError
from streamtts.processors.segment.number_context import _groups, read_digits
from streamtts.processors.segment.numbers import verbalize_numbers
from streamtts.processors.segment.numbers_en import MONTHS, int_to_words_en, ordinal_en, year_en
from streamtts.processors.segment.numbers_zh import cn_number

INTERPRETATIONS = frozenset(
    {
        "characters",
        "spell-out",
        "digits",
        "telephone",
        "cardinal",
        "number",
        "ordinal",
        "date",
        "time",
        "currency",
    }
)

_LETTER_NAMES_EN = {
    "a": "ay", "b": "bee", "c": "see", "d": "dee", "e": "ee", "f": "ef", "g": "jee", "h": "aitch",
    "i": "eye", "j": "jay", "k": "kay", "l": "el", "m": "em", "n": "en", "o": "oh", "p": "pee",
    "q": "cue", "r": "ar", "s": "ess", "t": "tee", "u": "you", "v": "vee", "w": "double you",
    "x": "ex", "y": "why", "z": "zee",
}  # fmt: skip
_EN_DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
_ZH_DIGITS = "零一二三四五六七八九"
_CURRENCY_EN = {"$": ("dollar", "cent"), "USD": ("dollar", "cent"), "€": ("euro", "cent"),
                "EUR": ("euro", "cent"), "£": ("pound", "penny"), "GBP": ("pound", "penny"),
                "¥": ("yuan", "fen"), "￥": ("yuan", "fen"), "CNY": ("yuan", "fen"),
                "RMB": ("yuan", "fen"), "JPY": ("yen", "sen")}  # fmt: skip
_CURRENCY_ZH = {"$": "美元", "USD": "美元", "€": "欧元", "EUR": "欧元", "£": "英镑", "GBP": "英镑",
                "¥": "元", "￥": "元", "CNY": "元", "RMB": "元", "JPY": "日元"}  # fmt: skip
_CURRENCY_RE = re.compile(
    r"^\s*(?P<pre>[$€£¥￥]|[A-Z]{3})?\s*(?P<num>-?[0-9][0-9,]*(?:\.[0-9]+)?)\s*(?P<post>[$€£¥￥元]|[A-Z]{3})?\s*$"
)
_TIME_RE = re.compile(
    r"^\s*(?P<h>[0-9]{1,2})[:：.](?P<m>[0-9]{2})(?:[:：.](?P<s>[0-9]{2}))?\s*(?P<ampm>[AaPp]\.?[Mm]\.?)?\s*$"
)
_NUMBER_RE = re.compile(r"^\s*(?P<sign>[-+])?(?P<int>[0-9][0-9,]*)(?:\.(?P<frac>[0-9]+))?\s*$")
_DATE_FORMATS = frozenset({"ymd", "mdy", "dmy", "ym", "my", "md", "dm", "y", "m", "d"})


MAX_SAY_AS_CHARS = 64
"""Longest say-as content (a phone number, an amount, a code — not a paragraph)."""


def _ascii_digits(text: str) -> bool:
    # str.isdigit() takes "²" and other digits int() cannot read.
    return bool(text) and text.isascii() and text.isdigit()


class SayAsError(SegmentationError, reason="invalid_ssml"):
    """The content does not read as the interpretation says (the caller reads it plainly)."""


def say_as(kind: str, text: str, lang: str, fmt: str | None = None) -> str:
    """`text` read as `kind` in `lang` (zh, yue, en, ja, ko).

    Raises:
        SayAsError: `text` is not a `kind` (e.g. letters for "digits"), or `kind` unknown.
    """
    lang = "zh" if lang == "yue" else lang
    if len(text) > MAX_SAY_AS_CHARS:
        raise SayAsError(
            f"say-as {kind}: {len(text)} characters; at most {MAX_SAY_AS_CHARS} are read this way"
        )
    if kind in ("characters", "spell-out"):
        return _characters(text, lang)
    if kind == "digits":
        digits = re.sub(r"[\s-]", "", text)
        if not _ascii_digits(digits):
            raise SayAsError(f"say-as digits: {text!r} holds more than digits")
        return _digits(digits, lang)
    if kind == "telephone":
        return _telephone(text, lang)
    if kind in ("cardinal", "number"):
        return _cardinal(text, lang)
    if kind == "ordinal":
        return _ordinal(text, lang)
    if kind == "date":
        return _date(text, lang, (fmt or "ymd").lower())
    if kind == "time":
        return _time(text, lang)
    if kind == "currency":
        return _currency(text, lang)
    raise SayAsError(f"say-as interpret-as {kind!r} is not supported")


def _characters(text: str, lang: str) -> str:
    chars = [c for c in text if not c.isspace()]
    if lang in ("zh", "ja") and any(not c.isascii() for c in chars):
        sep = "，" if lang == "zh" else "、"
        return sep.join(_char_word(c, lang) for c in chars)
    return (
        ", ".join(_char_word(c, lang) for c in chars)
        if lang == "en"
        else " ".join(_char_word(c, lang) for c in chars)
    )


def _char_word(c: str, lang: str) -> str:
    if _ascii_digits(c):
        return _EN_DIGITS[int(c)] if lang == "en" else _ZH_DIGITS[int(c)] if lang == "zh" else c
    if c.isascii() and c.isalpha():
        return _LETTER_NAMES_EN[c.lower()] if lang == "en" else c.upper()
    return c


def _digits(digits: str, lang: str) -> str:
    if lang == "en":
        return " ".join(_EN_DIGITS[int(d)] for d in digits)
    if lang == "ja":
        return read_digits([digits], "ja")
    return " ".join(_ZH_DIGITS[int(d)] for d in digits)


def _telephone(text: str, lang: str) -> str:
    plus = text.strip().startswith("+")
    groups = [g for g in re.split(r"[\s\-().]+", text.strip().lstrip("+")) if g]
    if not groups or not all(_ascii_digits(g) for g in groups):
        raise SayAsError(f"say-as telephone: {text!r} is not a phone number")
    if len(groups) == 1:
        groups = _groups(groups[0])
    if lang == "zh":
        # Phone numbers say 1 as 幺 (一 is easily misheard as 七 in a digit string).
        spoken = "，".join(" ".join("幺" if d == "1" else _ZH_DIGITS[int(d)] for d in g) for g in groups)
        return ("加 " if plus else "") + spoken
    spoken = read_digits(groups, lang if lang in ("en", "ja") else "en")
    return ("plus " if plus else "") + spoken


def _cardinal(text: str, lang: str) -> str:
    m = _NUMBER_RE.match(text)
    if not m:
        raise SayAsError(f"say-as cardinal: {text!r} is not a number")
    int_part, frac, neg = m.group("int").replace(",", ""), m.group("frac"), m.group("sign") == "-"
    if lang == "en":
        words = int_to_words_en(int(int_part)) + (f" point {_digits(frac, 'en')}" if frac else "")
        return ("minus " if neg else "") + words
    if lang == "zh":
        return ("负" if neg else "") + cn_number(f"{int_part}.{frac}" if frac else int_part)
    return text.strip().replace(",", "")


def _ordinal(text: str, lang: str) -> str:
    digits = re.sub(r"(st|nd|rd|th|\.)$", "", text.strip(), flags=re.I)
    if not _ascii_digits(digits):
        raise SayAsError(f"say-as ordinal: {text!r} is not a whole number")
    if lang == "en":
        return ordinal_en(int(digits))
    if lang == "zh":
        return "第" + cn_number(digits)
    if lang == "ja":
        return f"{int(digits)}番目"
    return digits


def _date(text: str, lang: str, fmt: str) -> str:
    if fmt not in _DATE_FORMATS:
        raise SayAsError(f"say-as date: format {fmt!r} is not one of {', '.join(sorted(_DATE_FORMATS))}")
    parts = [p for p in re.split(r"[\s/.\-年月日,]+", text.strip()) if p]
    if len(parts) != len(fmt) or not all(_ascii_digits(p) for p in parts):
        raise SayAsError(f"say-as date: {text!r} does not read as {fmt}")
    fields = dict(zip(fmt, (int(p) for p in parts), strict=True))
    year, month, day = fields.get("y"), fields.get("m"), fields.get("d")
    if (month is not None and not 1 <= month <= 12) or (day is not None and not 1 <= day <= 31):
        raise SayAsError(f"say-as date: {text!r} has no such month or day")
    if lang == "zh" or lang == "ja":
        out = ""
        if year is not None:
            out += (cn_number(str(year), "direct") if lang == "zh" else str(year)) + "年"
        if month is not None:
            out += (cn_number(str(month)) if lang == "zh" else str(month)) + "月"
        if day is not None:
            out += (cn_number(str(day)) if lang == "zh" else str(day)) + "日"
        return out
    words: list[str] = []
    if month is not None:
        words.append(MONTHS[month - 1])
    if day is not None:
        words.append(("the " if month is None else "") + ordinal_en(day))
    head = " ".join(words)
    if year is not None:
        return f"{head}, {year_en(year)}" if head else year_en(year)
    return head


def _time(text: str, lang: str) -> str:
    m = _TIME_RE.match(text)
    if not m:
        raise SayAsError(f"say-as time: {text!r} is not a time like 14:30")
    hh, mm = int(m.group("h")), int(m.group("m"))
    ampm = (m.group("ampm") or "").replace(".", "").lower()
    if hh > 23 or mm > 59:
        raise SayAsError(f"say-as time: {text!r} is not a time of day")
    if lang == "zh":
        prefix = "下午" if ampm == "pm" else "上午" if ampm == "am" else ""
        return prefix + f"{cn_number(str(hh))}点" + (f"{cn_number(str(mm))}分" if mm else "整")
    if lang == "en":
        spoken = (
            f"{int_to_words_en(hh)} o'clock"
            if mm == 0 and not ampm
            else int_to_words_en(hh) + (f" {'oh ' if mm < 10 else ''}{int_to_words_en(mm)}" if mm else "")
        )
        return spoken + (f" {' '.join(ampm.upper())}" if ampm else "")
    return verbalize_numbers(text, lang)


def _currency(text: str, lang: str) -> str:
    m = _CURRENCY_RE.match(text)
    if not m:
        raise SayAsError(f"say-as currency: {text!r} is not an amount like $12.50 or 12.50 USD")
    unit = m.group("pre") or m.group("post") or ("¥" if lang == "zh" else "$")
    amount = m.group("num").replace(",", "")
    whole, _, cents = amount.lstrip("-").partition(".")
    neg = amount.startswith("-")
    if lang == "zh":
        name = _CURRENCY_ZH.get(unit if unit != "元" else "¥")
        if name is None:
            raise SayAsError(f"say-as currency: unknown currency {unit!r}")
        number = cn_number(f"{whole}.{cents}" if cents and int(cents) else whole)
        return ("负" if neg else "") + number + name
    if lang != "en":
        return verbalize_numbers(text, lang)
    names = _CURRENCY_EN.get(unit if unit != "元" else "¥")
    if names is None:
        raise SayAsError(f"say-as currency: unknown currency {unit!r}")
    major, minor = names
    n = int(whole or "0")
    words = f"{int_to_words_en(n)} {major}{'' if n == 1 else 's'}"
    c = int((cents + "00")[:2]) if cents else 0
    if c:
        minor_word = minor if c == 1 else ("pence" if minor == "penny" else minor + "s")
        words += f" and {int_to_words_en(c)} {minor_word}"
    return ("minus " if neg else "") + words
