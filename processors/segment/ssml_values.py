"""SSML attribute values read as numbers: a `break`'s time or strength, a `prosody` rate."""

from __future__ import annotations

import re

from streamtts.processors.segment.ssml_document import Refuse

_STRENGTH_MS = {"none": 0, "x-weak": 100, "weak": 200, "medium": 400, "strong": 700, "x-strong": 1000}
_RATE_WORDS = {"x-slow": 0.6, "slow": 0.8, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")
_RATE_RE = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)\s*(%?)\s*$")


def break_ms(attrs: dict[str, str], refuse: Refuse) -> float:
    """The pause a `<break>` asks for, in ms (`time` wins over `strength`; unbounded)."""
    time = attrs.get("time")
    if time is not None:
        m = _TIME_RE.match(time)
        if not m:
            raise refuse(f"break time {time[:40]!r} is not a duration like 500ms or 1.5s")
        return float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
    strength = attrs.get("strength", "medium").strip().lower()
    if strength not in _STRENGTH_MS:
        raise refuse(f"break strength {strength[:20]!r} is not one of {', '.join(_STRENGTH_MS)}")
    return _STRENGTH_MS[strength]


def prosody_rate(value: str, current: float, refuse: Refuse) -> float:
    """The rate inside a `<prosody rate=value>` whose parent speaks at `current`: a word,
    a percentage (relative with a sign), or a factor."""
    word = _RATE_WORDS.get(value.strip().lower())
    if word is not None:
        return current * word
    m = _RATE_RE.match(value)
    if not m:
        raise refuse(f"prosody rate {value[:40]!r} is not a rate (x-slow … x-fast, 80%, +20%, 1.2)")
    number, percent = float(m.group(1)), m.group(2)
    if percent:
        factor = (1 + number / 100) if value.strip()[0] in "+-" else number / 100
    else:
        factor = number
    if factor <= 0:
        raise refuse(f"prosody rate {value[:40]!r} must be above zero")
    return current * factor
