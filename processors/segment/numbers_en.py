"""English numbers in words: cardinals, ordinals, years, times, money and units.

Read here completely, since espeak reads "$5" as "dollar five".
"""

from __future__ import annotations

import re

from streamtts.processors.segment.number_tokens import number_token

MONTHS = (
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

# unit → (singular, plural).
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


def read_en(m: re.Match[str]) -> str:
    """One `TOKEN_RE` match read out in English words."""
    if m.group("date"):
        y, mo, d = int(m.group("y")), int(m.group("mo")), int(m.group("d"))
        if 1 <= mo <= 12 and 1 <= d <= 31:
            return f" {MONTHS[mo - 1]} {ordinal_en(d)}, {year_en(y)} "
        return " ".join(_number_en(p, None) for p in (m.group("y"), m.group("mo"), m.group("d")))
    if m.group("time"):
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        if hh <= 24 and mm < 60:
            return _time_en(hh, mm)
        return f"{int_to_words_en(hh)} {int_to_words_en(mm)}"
    sign, cur, int_part, frac, suffix = number_token(m)
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
