"""First records first: a bounded look-ahead queue for stages that read ahead of their work.

Kafka hands a worker its records in arrival order, so without this a new request's first
segment (or first PCM chunk) waits behind every queued record of earlier requests
(head-of-line blocking: the benchmark's P99 time to first audio under load). The queue lets a
request's first record overtake later records of *other* requests; records of one request
keep their order (the first always sorts first, later ones stay FIFO), so a subscriber still
hears each request in order. `drain_in_request_order` runs the queue's records with bounded
concurrency, one per request at a time; `InOrderAcks` releases their acks in offset order.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping
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

    def firsts(self) -> int:
        """Items waiting with `first=True`."""
        return sum(1 for rank, _, _ in self._heap if rank == 0)

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

    async def get_where(
        self, ready: Callable[[T, bool], bool], key: Callable[[T], Hashable] | None = None
    ) -> T:
        """The first item in queue order for which `ready(item, first)` holds; waits until
        one does (call `wake` when what `ready` depends on changed). With `key`, only the
        earliest queued item of each key is a candidate: a request's later segment never
        overtakes its own first one (which may wait for a first-span slot while the later
        one would find a bulk slot free). Linear in the queue, which is bounded by `maxsize`."""
        async with self._changed:
            found: list[int] = []

            def pick() -> bool:
                earliest: dict[Hashable, int] = {}
                if key is not None:
                    for _, count, item in self._heap:
                        k = key(item)
                        if count < earliest.get(k, count + 1):
                            earliest[k] = count
                best = None
                for i, (rank, count, item) in enumerate(self._heap):
                    if key is not None and earliest[key(item)] != count:
                        continue  # an earlier item of its key is still queued
                    if (best is None or (rank, count) < self._heap[best][:2]) and ready(item, rank == 0):
                        best = i
                if best is None:
                    return False
                found.append(best)
                return True

            await self._changed.wait_for(pick)
            k = found[-1]
            _, _, item = self._heap[k]
            self._heap[k] = self._heap[-1]
            self._heap.pop()
            heapq.heapify(self._heap)
            self._changed.notify_all()
            return item

    async def wake(self) -> None:
        """Re-check waiting `get_where` calls."""
        async with self._changed:
            self._changed.notify_all()


class InOrderAcks(Generic[T]):
    """Records finish out of order (first segments overtake), but their acks are released in
    offset order per partition.

    Why: faust commits the first consecutive run of acked offsets, and faust-streaming 0.15's
    head-gap check is off by one (`min(acked) - committed > 1`, and skipped when nothing was
    committed yet), so an unacked record right at the committed offset is stepped over when a
    later one is acked — after a rebalance that record is never read again (a lost segment,
    found by `streamtts chaos`). Released in order, the acked offsets never have a gap.
    """

    def __init__(self) -> None:
        self._pending: dict[object, tuple[int, dict[int, list[object]]]] = {}
        """partition → (generation, {offset: [item, done]}) in read order."""

    def track(self, partition: object, generation: int, offset: int, item: T) -> None:
        """A record was read; a new generation (a rebalance) forgets what the old one read."""
        gen, pending = self._pending.get(partition, (generation, {}))
        if gen != generation:
            pending = {}
        pending[offset] = [item, False]
        self._pending[partition] = (generation, pending)

    def done(self, partition: object, offset: int, generation: int | None = None) -> list[T]:
        """Mark a record finished; returns the items whose acks may go out now, in order.
        `generation`: the one it was read in; a record read before a rebalance that finishes
        after its partition was read again must not release the new copy's ack."""
        entry = self._pending.get(partition)
        if entry is None or offset not in entry[1] or (generation is not None and generation != entry[0]):
            return []
        pending = entry[1]
        pending[offset][1] = True
        released: list[T] = []
        for first in list(pending):  # dicts keep read order, which is offset order
            item, finished = pending[first]
            if not finished:
                break
            released.append(item)  # type: ignore[arg-type]
            del pending[first]
        return released

    def forget(self, partitions: Iterable[object]) -> None:
        """Partitions no longer held: what was read of them is their next owner's."""
        for partition in partitions:
            self._pending.pop(partition, None)

    def __len__(self) -> int:
        return sum(len(p) for _, p in self._pending.values())


async def drain_in_request_order(
    queue: FirstSegmentsFirst[T],
    run: Callable[[T], Awaitable[None]],
    *,
    key: Callable[[T], Hashable],
    first_of: Callable[[T], bool],
    caps: Mapping[bool, int],
    total: int | None = None,
    stale: Callable[[T], bool] = lambda item: False,
) -> None:
    """Take the queue's items and `run` each in its own task, forever (until cancelled).

    At most `caps[first]` items of each kind run at once (`total` of both kinds together, if
    given), and at most one per `key` (a
    request): an item starts only once the one before it of its key has finished, and is not
    taken while an earlier item of its key still waits, so each request's outputs leave in
    order. A `stale` item (read before a rebalance) is dropped. An exception escaping `run`
    stops the drain and is raised here; cancelling the drain cancels the items running.
    """
    busy: set[Hashable] = set()
    in_flight = {True: 0, False: 0}
    tasks: set[asyncio.Task[None]] = set()
    failed: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def ready(item: T, first: bool) -> bool:
        if total is not None and in_flight[True] + in_flight[False] >= total:
            return False
        return key(item) not in busy and in_flight[first] < caps[first]

    async def one(item: T, k: Hashable, first: bool) -> None:
        try:
            await run(item)
        except Exception as err:  # a bug past the stage's own handling: stop the drain
            if not failed.done():
                failed.set_exception(err)
        finally:
            busy.discard(k)
            in_flight[first] -= 1
            await queue.wake()

    getter: asyncio.Future[T] | None = None
    try:
        while True:
            getter = asyncio.ensure_future(queue.get_where(ready, key=key))
            await asyncio.wait((getter, failed), return_when=asyncio.FIRST_COMPLETED)
            if failed.done():
                getter.cancel()
                failed.result()
            item = getter.result()
            if stale(item):
                continue
            first = first_of(item)
            k = key(item)
            busy.add(k)
            in_flight[first] += 1
            task = asyncio.create_task(one(item, k, first))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    finally:
        if getter is not None and not getter.done():
            getter.cancel()  # stopped while waiting for an item: the wait ends with us
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
