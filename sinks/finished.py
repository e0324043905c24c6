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
from dataclasses import dataclass
from datetime import datetime

from streamtts.schemas import RequestContext
from streamtts.schemas.headers import REPLAY_AT, header

RequestKey = tuple[str, str]
"""(tenant, request_id): request ids are unique per tenant, not globally."""
RenderKey = tuple[str, str, str]
"""(tenant, request_id, rendering): "" for the original rendering, a replay's own mark else."""


def rendering_of(ctx: RequestContext, headers: tuple[tuple[str, bytes], ...]) -> RenderKey:
    """Which rendering of which request a chunk belongs to: the original one, or a replay
    (`streamtts replay request|window`, marked by the header carried from the request)."""
    at = header(headers, REPLAY_AT)
    return (ctx.tenant, ctx.request_id, at.decode(errors="replace") if at else "")


@dataclass(frozen=True)
class Finished:
    status: str
    """"completed" if any rendering completed, else "failed"."""
    at: datetime
    """When its latest result was published."""
    renderings: frozenset[str]
    """The renderings of the request that have a result."""


class FinishedRequests:
    """A bounded, time-limited set of finished requests with their final status."""

    def __init__(
        self, ttl_s: float, max_entries: int = 200_000, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: OrderedDict[RequestKey, tuple[Finished, float]] = OrderedDict()

    def add(self, key: RenderKey, status: str, at: datetime) -> Finished | None:
        """Remember a rendering as finished; a `completed` request never becomes `failed`.
        Returns what was remembered of the request before (for `restore`)."""
        request = key[:2]
        old = self._entries.pop(request, None)
        renderings = frozenset({key[2]})
        if old is not None:
            renderings |= old[0].renderings
            if old[0].status == "completed":
                status = "completed"
        self._entries[request] = (Finished(status, at, renderings), self._clock())
        self._trim()
        return old[0] if old is not None else None

    def restore(self, key: RequestKey, before: Finished | None) -> None:
        """Undo an `add` whose result never became visible (exactly-once: its transaction was
        aborted or fenced), so the request's chunks, read again, are finished again."""
        self._entries.pop(key, None)
        if before is not None:
            self._entries[key] = (before, self._clock())

    def seed(self, finished: Iterable[tuple[RenderKey, str, datetime]]) -> None:
        for key, status, at in finished:
            self.add(key, status, at)

    def get(self, key: RequestKey) -> Finished | None:
        """How a request finished, if it did within the TTL."""
        self._trim()
        entry = self._entries.get(key)
        return entry[0] if entry else None

    def has(self, key: RenderKey) -> bool:
        """Whether this rendering of the request already has its result."""
        found = self.get(key[:2])
        return found is not None and key[2] in found.renderings

    def status(self, key: RequestKey) -> str | None:
        found = self.get(key)
        return found.status if found else None

    def __len__(self) -> int:
        return len(self._entries)

    def _trim(self) -> None:
        horizon = self._clock() - self.ttl_s
        while self._entries:
            key, (_, at) = next(iter(self._entries.items()))
            if at >= horizon and len(self._entries) <= self.max_entries:
                break
            del self._entries[key]
