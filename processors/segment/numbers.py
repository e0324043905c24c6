"""Numbers, dates, times, currency, percentages and units → words, per language.

English is verbalized here completely (espeak reads "$5" as "dollar five"). Chinese uses cn2an
after units, currencies, dates and times are rewritten into Chinese patterns. Japanese only
gets units, currencies, dates and times rewritten: pyopenjtalk reads Arabic numerals with the
correct counters itself. Korean keeps digits (espeak reads them) minus thousands separators.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

from streamtts.processors.segment.exceptions import UnreadableNumber
from streamtts.processors.segment.number_context import read_codes, read_ranges

_CURRENCY_CHARS = "$€£¥￥"
TOKEN_RE = re.compile(
    r"(?P<date>(?<!\d)(?P<y>\d{4})-(?P<mo>\d{1,2})-(?P<d>\d{1,2})(?!\d))"
    r"|(?P<time>(?<!\d)(?P<hh>\d{1,2}):(?P<mm>\d{2})(?::(?P<ss>\d{2}))?(?!\d))"
    r"|(?P<num>(?P<sign>(?<![\w.])[-+])?(?P<cur>[$€£¥￥])?"
    r"(?P<int>\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.(?P<frac>\d+))?"
    r"(?P<suffix>%|‰|°[CF]?|℃|km/h|m/s|[a-zA-Z]{1,3}(?![a-zA-Z])"
    r"| (?:km|cm|mm|kg|mg|ml|mL|lbs?|ft|mi|hr|min|ms|[GMKkT]B|[kMG]?Hz|kW|mph|°[CF])"
    r"(?![\w/]))?)"
)

_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
_ONES = (
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
    "thirteen",
    "fourteen",
    "fifteen",
    "sixteen",
    "seventeen",
    "eighteen",
    "nineteen",
)
_TENS = ("", "", "twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety")
_SCALES = ((10**12, "trillion"), (10**9, "billion"), (10**6, "million"), (1000, "thousand"))
_ORDINAL_WORDS = {
    "one": "first",
    "two": "second",
    "three": "third",
    "five": "fifth",
    "eight": "eighth",
    "nine": "ninth",
    "twelve": "twelfth",
}

# unit → (singular, plural) for English; single strings for Chinese and Japanese.
_EN_UNITS: dict[str, tuple[str, str]] = {
    "km": ("kilometer", "kilometers"),
    "m": ("meter", "meters"),
    "cm": ("centimeter", "centimeters"),
    "mm": ("millimeter", "millimeters"),
    "kg": ("kilogram", "kilograms"),
    "g": ("gram", "grams"),
    "mg": ("milligram", "milligrams"),
    "lb": ("pound", "pounds"),
    "lbs": ("pound", "pounds"),
    "ft": ("foot", "feet"),
    "mi": ("mile", "miles"),
    "h": ("hour", "hours"),
    "hr": ("hour", "hours"),
    "min": ("minute", "minutes"),
    "s": ("second", "seconds"),
    "ms": ("millisecond", "milliseconds"),
    "l": ("liter", "liters"),
    "L": ("liter", "liters"),
    "ml": ("milliliter", "milliliters"),
    "mL": ("milliliter", "milliliters"),
    "GB": ("gigabyte", "gigabytes"),
    "MB": ("megabyte", "megabytes"),
    "KB": ("kilobyte", "kilobytes"),
    "kB": ("kilobyte", "kilobytes"),
    "TB": ("terabyte", "terabytes"),
    "Hz": ("hertz", "hertz"),
    "kHz": ("kilohertz", "kilohertz"),
    "MHz": ("megahertz", "megahertz"),
    "GHz": ("gigahertz", "gigahertz"),
    "W": ("watt", "watts"),
    "kW": ("kilowatt", "kilowatts"),
    "V": ("volt", "volts"),
    "mph": ("mile per hour", "miles per hour"),
    "km/h": ("kilometer per hour", "kilometers per hour"),
    "m/s": ("meter per second", "meters per second"),
    "°C": ("degree Celsius", "degrees Celsius"),
    "℃": ("degree Celsius", "degrees Celsius"),
    "°F": ("degree Fahrenheit", "degrees Fahrenheit"),
    "°": ("degree", "degrees"),
    "%": ("percent", "percent"),
    "‰": ("per mille", "per mille"),
    "k": ("thousand", "thousand"),
    "x": ("times", "times"),
}
_EN_CURRENCY = {
    "$": ("dollar", "dollars", "cent", "cents"),
    "€": ("euro", "euros", "cent", "cents"),
    "£": ("pound", "pounds", "penny", "pence"),
    "¥": ("yen", "yen", "", ""),
    "￥": ("yen", "yen", "", ""),
}
_ZH_UNITS = {
    "km": "公里",
    "m": "米",
    "cm": "厘米",
    "mm": "毫米",
    "kg": "千克",
    "g": "克",
    "mg": "毫克",
    "lb": "磅",
    "lbs": "磅",
    "h": "小时",
    "hr": "小时",
    "min": "分钟",
    "s": "秒",
    "ms": "毫秒",
    "l": "升",
    "L": "升",
    "ml": "毫升",
    "mL": "毫升",
    "km/h": "公里每小时",
    "m/s": "米每秒",
    "°C": "摄氏度",
    "℃": "摄氏度",
    "°F": "华氏度",
    "°": "度",
    "W": "瓦",
    "kW": "千瓦",
    "V": "伏",
    "Hz": "赫兹",
    "kHz": "千赫",
    "MHz": "兆赫",
    "GHz": "吉赫",
    "k": "千",
}
_ZH_CURRENCY = {"$": "美元", "€": "欧元", "£": "英镑", "¥": "元", "￥": "元"}
_JA_UNITS = {
    "km": "キロメートル",
    "m": "メートル",
    "cm": "センチメートル",
    "mm": "ミリメートル",
    "kg": "キログラム",
    "g": "グラム",
    "mg": "ミリグラム",
    "h": "時間",
    "min": "分",
    "s": "秒",
    "ms": "ミリ秒",
    "l": "リットル",
    "L": "リットル",
    "ml": "ミリリットル",
    "mL": "ミリリットル",
    "km/h": "キロメートル毎時",
    "m/s": "メートル毎秒",
    "°C": "度",
    "℃": "度",
    "°F": "華氏度",
    "°": "度",
    "%": "パーセント",
    "‰": "パーミル",
    "GB": "ギガバイト",
    "MB": "メガバイト",
    "KB": "キロバイト",
    "kB": "キロバイト",
    "TB": "テラバイト",
    "Hz": "ヘルツ",
    "kHz": "キロヘルツ",
    "MHz": "メガヘルツ",
    "GHz": "ギガヘルツ",
    "W": "ワット",
    "kW": "キロワット",
    "V": "ボルト",
}
_JA_CURRENCY = {"$": "ドル", "€": "ユーロ", "£": "ポンド", "¥": "円", "￥": "円"}


# --- English -------------------------------------------------------------------------------


def int_to_words_en(n: int) -> str:
    """Cardinal number in English words ("one hundred twenty-three"); digits read one by one
    beyond the trillions."""
    if n < 0:
        return "minus " + int_to_words_en(-n)
    if n >= 10**15:
        return " ".join(_ONES[int(d)] for d in str(n))
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens] + (f"-{_ONES[ones]}" if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        return f"{_ONES[hundreds]} hundred" + (f" {int_to_words_en(rest)}" if rest else "")
    for value, name in _SCALES:
        if n >= value:
            high, rest = divmod(n, value)
            return f"{int_to_words_en(high)} {name}" + (f" {int_to_words_en(rest)}" if rest else "")
    raise AssertionError("unreachable")  # pragma: no cover


def ordinal_en(n: int) -> str:
    """Ordinal in English words ("twenty-first")."""
    words = int_to_words_en(n)
    m = re.search(r"[a-z]+$", words)
    assert m is not None  # int_to_words_en always ends with a word
    head, last = words[: m.start()], m.group(0)
    if last in _ORDINAL_WORDS:
        last = _ORDINAL_WORDS[last]
    elif last.endswith("y"):
        last = last[:-1] + "ieth"
    else:
        last += "th"
    return head + last


def year_en(n: int) -> str:
    """Read a year the usual way: 1984 → nineteen eighty-four, 2005 → two thousand five."""
    if 2000 <= n <= 2009 or n % 1000 == 0:
        return int_to_words_en(n)
    high, low = divmod(n, 100)
    if low == 0:
        return f"{int_to_words_en(high)} hundred"
    return f"{int_to_words_en(high)} {'oh ' if low < 10 else ''}{int_to_words_en(low)}"


def _digits_en(digits: str) -> str:
    return " ".join(_ONES[int(d)] for d in digits)


def _number_en(int_part: str, frac: str | None) -> str:
    digits = int_part.replace(",", "")
    if len(digits.lstrip("0")) > 15:  # what int_to_words_en does, without int() of a long run
        words = _digits_en(digits.lstrip("0"))
    else:
        words = int_to_words_en(int(digits))
    return words + (f" point {_digits_en(frac)}" if frac else "")


def _time_en(hh: int, mm: int) -> str:
    if mm == 0:
        return f"{int_to_words_en(hh)} o'clock"
    return f"{int_to_words_en(hh)} {'oh ' if mm < 10 else ''}{int_to_words_en(mm)}"


def _en_token(m: re.Match[str]) -> str:
    if m.group("date"):
        y, mo, d = int(m.group("y")), int(m.group("mo")), int(m.group("d"))
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return f" {_MONTHS[mo - 1]} {ordinal_en(d)}, {year_en(y)} "
        return " ".join(_number_en(p, None) for p in (m.group("y"), m.group("mo"), m.group("d")))
    if m.group("time"):
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        if hh <= 24 and mm < 60:
            return _time_en(hh, mm)
        return f"{int_to_words_en(hh)} {int_to_words_en(mm)}"
    sign, cur, int_part = m.group("sign"), m.group("cur"), m.group("int")
    frac, suffix = m.group("frac"), (m.group("suffix") or "").strip() or None
    prefix = "minus " if sign == "-" else ""
    value = float(f"{int_part.replace(',', '')}.{frac or 0}")
    if cur:
        one, many, sub_one, sub_many = _EN_CURRENCY[cur]
        out = f"{int_to_words_en(int(int_part.replace(',', '')))} {one if value == 1 else many}"
        cents = int((frac or "0")[:2].ljust(2, "0"))
        if frac and cents and sub_one:
            out += f" and {int_to_words_en(cents)} {sub_one if cents == 1 else sub_many}"
        elif frac and not sub_one:
            out = f"{_number_en(int_part, frac)} {many}"
        tail = f" {suffix}" if suffix else ""
        return f" {prefix}{out}{tail} "
    if suffix and suffix.lower() in ("st", "nd", "rd", "th") and not frac:
        return f"{prefix}{ordinal_en(int(int_part.replace(',', '')))}"
    if suffix and suffix.lower() in ("am", "pm"):
        return f"{_number_en(int_part, frac)} {' '.join(suffix.upper())}"
    if (
        not frac
        and not suffix
        and not sign
        and "," not in int_part
        and len(int_part) == 4
        and 1100 <= int(int_part) <= 2099
    ):
        return year_en(int(int_part))
    if not frac and "," not in int_part and len(int_part) > 1 and int_part.startswith("0"):
        words = _digits_en(int_part)  # codes, phone numbers: "007" → "zero zero seven"
    else:
        words = _number_en(int_part, frac)
    if suffix:
        unit = _EN_UNITS.get(suffix)
        if unit is None:
            return f"{prefix}{words} {suffix}"
        return f"{prefix}{words} {unit[0] if value == 1 and not frac else unit[1]}"
    return f"{prefix}{words}"


# --- Chinese -------------------------------------------------------------------------------


def _cn(number: str, mode: str = "low") -> str:
    import cn2an

    try:
        return str(cn2an.an2cn(number, mode))
    except Exception:  # cn2an rejects some shapes (huge ints): read digit by digit
        pass
    try:
        return str(cn2an.an2cn(re.sub(r"[^0-9]", "", ascii_digits(number)) or "0", "direct"))
    except Exception:  # its own message would reach the requester
        raise UnreadableNumber(f"the number {number[:40]!r} cannot be read out in zh") from None


def _zh_token(m: re.Match[str]) -> str:
    if m.group("date"):
        return (
            f"{_cn(m.group('y'), 'direct')}年{_cn(str(int(m.group('mo'))))}月{_cn(str(int(m.group('d'))))}日"
        )
    if m.group("time"):
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        return f"{_cn(str(hh))}点" + (f"{_cn(str(mm))}分" if mm else "整")
    sign, cur, int_part = m.group("sign"), m.group("cur"), m.group("int").replace(",", "")
    frac, suffix = m.group("frac"), (m.group("suffix") or "").strip() or None
    prefix = "负" if sign == "-" else ""
    if not frac and len(int_part) > 1 and (len(int_part) >= 11 or int_part[0] == "0"):
        return prefix + _cn(int_part, "direct")  # phone numbers, codes
    number = _cn(f"{int_part}.{frac}" if frac else int_part)
    if suffix in ("%", "‰"):
        return f"{prefix}{'百分之' if suffix == '%' else '千分之'}{number}"
    if suffix and suffix.lower() in ("st", "nd", "rd", "th"):
        return f"第{number}"
    if cur:
        return f"{prefix}{number}{_ZH_CURRENCY[cur]}" + (suffix or "")
    if suffix:
        return f"{prefix}{number}{_ZH_UNITS.get(suffix, suffix)}"
    if len(int_part) == 4 and not frac and m.end() < len(m.string) and m.string[m.end()] == "年":
        return _cn(int_part, "direct")
    return prefix + number


# --- Japanese ------------------------------------------------------------------------------


def _ja_token(m: re.Match[str]) -> str:
    if m.group("date"):
        return f"{int(m.group('y'))}年{int(m.group('mo'))}月{int(m.group('d'))}日"
    if m.group("time"):
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        return f"{hh}時" + (f"{mm}分" if mm else "")
    sign, cur, int_part = m.group("sign"), m.group("cur"), m.group("int").replace(",", "")
    frac, suffix = m.group("frac"), (m.group("suffix") or "").strip() or None
    number = ("マイナス" if sign == "-" else "") + int_part + (f".{frac}" if frac else "")
    if cur:
        number += _JA_CURRENCY[cur]
    if suffix:
        number += _JA_UNITS.get(suffix, suffix)
    return number


def _ko_token(m: re.Match[str]) -> str:
    text = m.group(0).replace(",", "") if m.group("num") else m.group(0)
    return text.replace("%", "퍼센트")


_VERBALIZERS = {
    "en": _en_token,
    "zh": _zh_token,
    "yue": _zh_token,
    "ja": _ja_token,
    "ko": _ko_token,
}


def ascii_digits(text: str) -> str:
    """`text` with every Unicode decimal digit (category Nd: ١٢٣, १२३, ๑๒๓ …) as its ASCII
    digit, one character for one: the readers (cn2an, the word tables) know 0-9 only, while
    `\\d` in a pattern matches them all."""
    if text.isascii():
        return text
    return "".join(str(unicodedata.digit(c)) if unicodedata.category(c) == "Nd" else c for c in text)


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
        out = _zh_leftovers(out)
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


def _zh_leftovers(text: str) -> str:
    """Digits that the token pass left (none expected) are read one by one, never dropped."""
    digits = "零一二三四五六七八九"
    return re.sub(r"\d", lambda m: digits[int(m.group(0))], text)
