"""What the sink has already finished, so that a redelivered chunk never makes a second result.

Why it is needed even in exactly-once mode: the sink commits a partition only up to the first
chunk of its oldest unfinished request, so chunks of requests finished *after* that point are
read again after a restart or rebalance. Without this memory they would assemble into a second
`completed` result — or, when only the tail of a request is re-read, sit incomplete until the
stale timeout and publish `failed` for a request already delivered (a flip).

The memory is keyed by (tenant, request_id) — two tenants may use the same id — and is seeded
at start from the recent tail of `tts.results` (read_committed), which covers every finished
request whose chunks can still be re-read: the committed offset lags at most the stale timeout.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Iterable

RequestKey = tuple[str, str]
"""(tenant, request_id): request ids are unique per tenant, not globally."""


class FinishedRequests:
    """A bounded, time-limited set of finished requests with their final status."""

    def __init__(
        self, ttl_s: float, max_entries: int = 200_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[RequestKey, tuple[str, float]] = OrderedDict()

    def add(self, key: RequestKey, status: str) -> None:
        """Remember `key` as finished; a `completed` status is never replaced by `failed`."""
        old = self._entries.pop(key, None)
        if old is not None and old[0] == "completed":
            status = "completed"
        self._entries[key] = (status, self._clock())
        self._trim()

    def seed(self, finished: Iterable[tuple[RequestKey, str]]) -> int:
        n = 0
        for key, status in finished:
            self.add(key, status)
            n += 1
        return n

    def status(self, key: RequestKey) -> str | None:
        """"completed"/"failed"/… if `key` finished within the TTL, else None."""
        self._trim()
        entry = self._entries.get(key)
        return entry[0] if entry else None

    def __len__(self) -> int:
        return len(self._entries)

    def _trim(self) -> None:
        horizon = self._clock() - self.ttl_s
        while self._entries:
            key, (_, at) = next(iter(self._entries.items()))
            if at >= horizon and len(self._entries) <= self.max_entries:
                break
            del self._entries[key]
