"""Whether a topic exists, remembered: reply topics and release lanes are checked per request,
and a metadata round trip (a short-lived admin client) per request would be one per record."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable


class TopicExistence:
    """A bounded memo over `lookup(name) -> exists`.

    A found topic is trusted for `found_ttl_s`; a missing one for `missing_ttl_s` (shorter: a
    topic created by an operator is noticed within seconds). Names come from requests (a
    client picks its reply topic within the allowed prefix), so the memo keeps at most
    `max_entries`, dropping the least recently checked.
    """

    def __init__(
        self,
        lookup: Callable[[str], Awaitable[bool]],
        *,
        found_ttl_s: float = 60.0,
        missing_ttl_s: float = 10.0,
        max_entries: int = 4096,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._lookup = lookup
        self._found_ttl_s = found_ttl_s
        self._missing_ttl_s = missing_ttl_s
        self._max_entries = max_entries
        self._clock = clock
        self._seen: OrderedDict[str, tuple[bool, float]] = OrderedDict()

    async def exists(self, name: str) -> bool:
        now = self._clock()
        known = self._seen.get(name)
        if known is not None:
            exists, at = known
            if now - at < (self._found_ttl_s if exists else self._missing_ttl_s):
                return exists
        exists = await self._lookup(name)
        self._seen[name] = (exists, now)
        self._seen.move_to_end(name)
        while len(self._seen) > self._max_entries:
            self._seen.popitem(last=False)
        return exists

    def __len__(self) -> int:
        return len(self._seen)
