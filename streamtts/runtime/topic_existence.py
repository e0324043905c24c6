"""Whether a topic exists, remembered: reply topics and release lanes are checked per request,
and a metadata round trip (a short-lived admin client) per request would be one per record."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field


@dataclass(eq=False)
class TopicExistence:
    """A bounded memo over `lookup(name) -> exists`.

    A found topic is trusted for `found_ttl_s`; a missing one for `missing_ttl_s` (shorter: a
    topic created by an operator is noticed within seconds). Names come from requests (a
    client picks its reply topic within the allowed prefix), so the memo keeps at most
    `max_entries`, dropping the least recently checked.
    """

    lookup: Callable[[str], Awaitable[bool]]
    _: KW_ONLY
    found_ttl_s: float = 60.0
    missing_ttl_s: float = 10.0
    max_entries: int = 4096
    clock: Callable[[], float] = time.monotonic
    _seen: OrderedDict[str, tuple[bool, float]] = field(init=False, repr=False, default_factory=OrderedDict)

    async def exists(self, name: str) -> bool:
        now = self.clock()
        known = self._seen.get(name)
        if known is not None:
            exists, at = known
            if now - at < (self.found_ttl_s if exists else self.missing_ttl_s):
                return exists
        exists = await self.lookup(name)
        self._seen[name] = (exists, now)
        self._seen.move_to_end(name)
        while len(self._seen) > self.max_entries:
            self._seen.popitem(last=False)
        return exists

    def __len__(self) -> int:
        return len(self._seen)
