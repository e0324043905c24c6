"""Argument types the subcommands share (argparse `type=` callables)."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta

_RELATIVE = re.compile(r"^-?(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def when(text: str) -> datetime:
    """ISO 8601 (naive = UTC), or a duration back from now: `90s`, `15m`, `1h`, `7d` (or `-1h`)."""
    text = text.strip()
    rel = _RELATIVE.match(text)
    if rel:
        return datetime.now(UTC) - timedelta(seconds=float(rel.group(1)) * _UNITS[rel.group(2)])
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a time: {text!r} (use ISO 8601 or 15m / 1h / 7d)") from None
    return value if value.tzinfo else value.replace(tzinfo=UTC)
