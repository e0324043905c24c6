"""Japanese numbers: only units, currencies, dates and times are rewritten; pyopenjtalk
reads Arabic numerals with the correct counters itself."""

from __future__ import annotations

import re

from streamtts.processors.segment.number_tokens import number_token

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


def read_ja(m: re.Match[str]) -> str:
    """One `TOKEN_RE` match with its unit, currency, date or time parts in Japanese."""
    if m.group("date"):
        return f"{int(m.group('y'))}年{int(m.group('mo'))}月{int(m.group('d'))}日"
    if m.group("time"):
        hh, mm = int(m.group("hh")), int(m.group("mm"))
        return f"{hh}時" + (f"{mm}分" if mm else "")
    sign, cur, int_part, frac, suffix = number_token(m, separators=False)
    number = ("マイナス" if sign == "-" else "") + int_part + (f".{frac}" if frac else "")
    if cur:
        number += _JA_CURRENCY[cur]
    if suffix:
        number += _JA_UNITS.get(suffix, suffix)
    return number
