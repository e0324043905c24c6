"""Chinese numbers (zh, yue): units, currencies, dates and times rewritten into Chinese
patterns, the numbers themselves read by cn2an."""

from __future__ import annotations

import re

from streamtts.processors.segment.exceptions import UnreadableNumber
from streamtts.processors.segment.number_tokens import ascii_digits, number_token

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


def cn_number(number: str, mode: str = "low") -> str:
    """`number` (ASCII digits, maybe a fraction) in Chinese numerals; cn2an's `mode`: "low"
    reads a quantity, "direct" digit by digit."""
    import cn2an

    try:
        return str(cn2an.an2cn(number, mode))
    except Exception:  # cn2an rejects some shapes (huge ints): read digit by digit
        pass
    try:
        return str(cn2an.an2cn(re.sub(r"[^0-9]", "", ascii_digits(number)) or "0", "direct"))
    except Exception:  # its own message would reach the requester
        raise UnreadableNumber(f"the number {number[:40]!r} cannot be read out in zh") from None


def warm_zh_numbers() -> None:
    """Import cn2an now (it compiles its patterns: ~0.13 s on 2 cores, in one step no plan
    deadline can stop), not in the first Chinese number's plan."""
    cn_number("1")


def read_zh(m: re.Match[str]) -> str:
    """One `TOKEN_RE` match read out in Chinese."""
    if m.group("date"):
        year = cn_number(m.group("y"), "direct")
        month, day = cn_number(str(int(m.group("mo")))), cn_number(str(int(m.group("d"))))
        return f"{year}年{month}月{day}日"
    if m.group("time"):
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        return f"{cn_number(str(hh))}点" + (f"{cn_number(str(mm))}分" if mm else "整")
    sign, cur, int_part, frac, suffix = number_token(m, separators=False)
    prefix = "负" if sign == "-" else ""
    if not frac and len(int_part) > 1 and (len(int_part) >= 11 or int_part[0] == "0"):
        return prefix + cn_number(int_part, "direct")  # phone numbers, codes
    number = cn_number(f"{int_part}.{frac}" if frac else int_part)
    if suffix in ("%", "‰"):
        return f"{prefix}{'百分之' if suffix == '%' else '千分之'}{number}"
    if suffix and suffix.lower() in ("st", "nd", "rd", "th"):
        return f"第{number}"
    if cur:
        return f"{prefix}{number}{_ZH_CURRENCY[cur]}" + (suffix or "")
    if suffix:
        return f"{prefix}{number}{_ZH_UNITS.get(suffix, suffix)}"
    if len(int_part) == 4 and not frac and m.end() < len(m.string) and m.string[m.end()] == "年":
        return cn_number(int_part, "direct")
    return prefix + number


def zh_leftover_digits(text: str) -> str:
    """Digits that the token pass left (none expected) are read one by one, never dropped."""
    digits = "零一二三四五六七八九"
    return re.sub(r"\d", lambda m: digits[int(m.group(0))], text)
