"""The synthesize stage's look-ahead queue: first segments first, order kept per request."""

from __future__ import annotations

import asyncio

import pytest

from streamtts.processors.synthesize.scheduling import FirstSegmentsFirst


async def test_first_segments_overtake_and_each_request_keeps_its_order() -> None:
    q: FirstSegmentsFirst[tuple[str, int]] = FirstSegmentsFirst(maxsize=10)
    arrivals = [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("A", 3), ("C", 0), ("B", 1)]
    for rid, seq in arrivals:
        await q.put((rid, seq), first=seq == 0)
    out = [await q.get() for _ in arrivals]
    assert out[:3] == [("A", 0), ("B", 0), ("C", 0)]
    for rid in "ABC":
        seqs = [s for r, s in out if r == rid]
        assert seqs == sorted(seqs), f"request {rid} reordered: {seqs}"


async def test_put_waits_when_full_until_a_get() -> None:
    q: FirstSegmentsFirst[int] = FirstSegmentsFirst(maxsize=2)
    await q.put(1, first=False)
    await q.put(2, first=False)
    blocked = asyncio.create_task(q.put(3, first=True))
    await asyncio.sleep(0)  # let it reach the wait
    assert not blocked.done() and len(q) == 2
    assert await q.get() == 1
    await asyncio.wait_for(blocked, 1)
    assert [await q.get(), await q.get()] == [3, 2]


def test_maxsize_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        FirstSegmentsFirst(0)


def test_acks_are_released_in_offset_order_per_partition() -> None:
    from streamtts.processors.synthesize.scheduling import InOrderAcks

    acks: InOrderAcks[str] = InOrderAcks()
    for offset in (10, 11, 12):
        acks.track("p0", 1, offset, f"p0@{offset}")
    acks.track("p1", 1, 5, "p1@5")
    assert acks.done("p0", 12) == [], "10 and 11 are still in the queue: 12's ack must wait"
    assert acks.done("p1", 5) == ["p1@5"], "another partition is independent"
    assert acks.done("p0", 10) == ["p0@10"]
    assert acks.done("p0", 11) == ["p0@11", "p0@12"]
    assert len(acks) == 0


def test_a_rebalance_forgets_what_the_old_generation_read() -> None:
    from streamtts.processors.synthesize.scheduling import InOrderAcks

    acks: InOrderAcks[str] = InOrderAcks()
    acks.track("p0", 1, 10, "old")
    acks.track("p0", 2, 10, "new")  # re-read from the committed offset after the rebalance
    assert acks.done("p0", 10) == ["new"]
