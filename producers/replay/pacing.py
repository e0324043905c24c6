"""Rate limiting and progress output for replays."""

from __future__ import annotations

import asyncio
import sys
import time


class Pacer:
    """At most `rate` records per second (None: unlimited)."""

    def __init__(self, rate: float | None) -> None:
        self.interval = 1.0 / rate if rate else 0.0
        self._next = time.monotonic()

    async def wait(self) -> None:
        if not self.interval:
            return
        now = time.monotonic()
        if self._next > now:
            await asyncio.sleep(self._next - now)  # pacing, not synchronisation
        self._next = max(self._next, now) + self.interval


class Progress:
    """A one-line progress counter on stderr (only when it is a terminal or verbose)."""

    def __init__(self, label: str, enabled: bool | None = None) -> None:
        self.label = label
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._last = 0.0

    def update(self, read: int, moved: int) -> None:
        now = time.monotonic()
        if self.enabled and now - self._last > 0.2:
            print(
                f"\r[replay] {self.label}: read {read}, re-driven {moved}",
                end="",
                file=sys.stderr,
                flush=True,
            )
            self._last = now

    def done(self) -> None:
        if self.enabled:
            print(file=sys.stderr)
