"""Token buckets per key (a tenant, a client address), in memory, per gateway process."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from streamtts.gateway.settings import RateLimit


@dataclass
class TokenBucket:
    rate: RateLimit
    tokens: float
    updated: float

    def take(self, now: float, cost: float = 1.0) -> float:
        """Take `cost` tokens; 0.0 if granted, else seconds until they would be available."""
        self.tokens = min(self.rate.burst, self.tokens + (now - self.updated) * self.rate.per_s)
        self.updated = now
        if self.tokens >= cost:
            self.tokens -= cost
            return 0.0
        return (cost - self.tokens) / self.rate.per_s


@dataclass
class RateLimiter:
    rate_for: Callable[[str], RateLimit]
    clock: Callable[[], float] = time.monotonic
    buckets: OrderedDict[str, TokenBucket] = field(default_factory=OrderedDict)
    max_keys: int | None = None
    """Buckets kept, least recently used dropped first: keys a client chooses (its address)
    must not grow memory without bound. None: every key is kept (tenants are configured)."""

    def take(self, key: str, cost: float = 1.0) -> float:
        """0.0 if `key` may go ahead (its tokens are taken), else seconds until it may."""
        now = self.clock()
        bucket = self.buckets.get(key)
        if bucket is None:
            rate = self.rate_for(key)
            bucket = self.buckets[key] = TokenBucket(rate, rate.burst, now)
            if self.max_keys is not None and len(self.buckets) > self.max_keys:
                self.buckets.popitem(last=False)
        elif self.max_keys is not None:
            self.buckets.move_to_end(key)
        return bucket.take(now, cost)
