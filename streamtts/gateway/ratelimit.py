"""Per-tenant token buckets (in memory, per gateway process)."""

from __future__ import annotations

import time
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
    buckets: dict[str, TokenBucket] = field(default_factory=dict)

    def take(self, tenant: str, cost: float = 1.0) -> float:
        now = self.clock()
        bucket = self.buckets.get(tenant)
        if bucket is None:
            rate = self.rate_for(tenant)
            bucket = self.buckets[tenant] = TokenBucket(rate, rate.burst, now)
        return bucket.take(now, cost)
