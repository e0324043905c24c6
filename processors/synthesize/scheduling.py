"""First segments first: a bounded look-ahead queue for the synthesize stage.

Kafka hands a worker its segments in arrival order, so without this a new request's first
segment waits behind every queued segment of earlier requests (head-of-line blocking: the
benchmark's P99 time to first audio under load). The queue lets a request's seq 0 overtake
later segments of *other* requests; segments of one request keep their order (seq 0 always
sorts first, later ones stay FIFO), so a subscriber still hears each request in order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from typing import Generic, TypeVar

T = TypeVar("T")


class FirstSegmentsFirst(Generic[T]):
    """Bounded priority queue: items with `first=True` leave before the others, FIFO within each."""

    def __init__(self, maxsize: int) -> None:
        if maxsize < 1:
            raise ValueError("maxsize must be at least 1")
        self.maxsize = maxsize
        self._heap: list[tuple[int, int, T]] = []
        self._counter = itertools.count()
        self._changed = asyncio.Condition()

    def __len__(self) -> int:
        return len(self._heap)

    async def put(self, item: T, *, first: bool) -> None:
        """Add an item; waits while the queue is full (back-pressure on the Kafka stream)."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self._heap) < self.maxsize)
            heapq.heappush(self._heap, (0 if first else 1, next(self._counter), item))
            self._changed.notify_all()

    async def get(self) -> T:
        async with self._changed:
            await self._changed.wait_for(lambda: bool(self._heap))
            _, _, item = heapq.heappop(self._heap)
            self._changed.notify_all()
            return item
