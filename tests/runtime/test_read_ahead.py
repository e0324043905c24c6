"""The stages' look-ahead queue: first records first, order kept per request; the drain over it."""

from __future__ import annotations

import asyncio

import pytest

from streamtts.runtime.read_ahead import FirstSegmentsFirst


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
    from streamtts.runtime.read_ahead import InOrderAcks

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
    from streamtts.runtime.read_ahead import InOrderAcks

    acks: InOrderAcks[str] = InOrderAcks()
    acks.track("p0", 1, 10, "old")
    acks.track("p0", 2, 10, "new")  # re-read from the committed offset after the rebalance
    assert acks.done("p0", 10) == ["new"]


def test_a_record_of_the_old_generation_finishing_late_does_not_ack_its_new_copy() -> None:
    from streamtts.runtime.read_ahead import InOrderAcks

    acks: InOrderAcks[str] = InOrderAcks()
    acks.track("p0", 1, 10, "old")
    acks.track("p0", 2, 10, "new")  # the partition read again while "old" was still in flight
    assert acks.done("p0", 10, generation=1) == [], "the old copy finishing says nothing of the new"
    assert acks.done("p0", 10, generation=2) == ["new"]


async def test_the_drain_runs_one_item_per_request_within_each_kinds_cap() -> None:
    from streamtts.runtime.read_ahead import drain_in_request_order

    q: FirstSegmentsFirst[tuple[str, int]] = FirstSegmentsFirst(maxsize=10)
    for item in [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("C", 0), ("B", 1)]:
        await q.put(item, first=item[1] == 0)
    started: list[tuple[str, int]] = []
    gates = {item: asyncio.Event() for item in [("A", 0), ("A", 1), ("A", 2), ("B", 0), ("C", 0), ("B", 1)]}
    running: set[tuple[str, int]] = set()
    most = {True: 0, False: 0}

    changed = asyncio.Condition()

    async def run(item: tuple[str, int]) -> None:
        async with changed:
            started.append(item)
            changed.notify_all()
        running.add(item)
        for first in (True, False):
            most[first] = max(most[first], sum(1 for r in running if (r[1] == 0) == first))
        await gates[item].wait()
        running.discard(item)

    drain = asyncio.create_task(
        drain_in_request_order(
            q, run, key=lambda item: item[0], first_of=lambda item: item[1] == 0, caps={True: 1, False: 1}
        )
    )

    async def until(n: int) -> None:
        async with changed:
            await asyncio.wait_for(changed.wait_for(lambda: len(started) >= n), 2)

    await until(1)
    assert started == [("A", 0)]  # B0 and C0 wait for the one first slot, A1 for A0
    gates[("A", 0)].set()
    await until(3)
    assert set(started[1:]) == {("B", 0), ("A", 1)}  # a first beside a later one, each kind capped
    gates[("B", 0)].set()
    gates[("A", 1)].set()
    await until(5)
    assert set(started[3:5]) == {("C", 0), ("A", 2)} or set(started[3:5]) == {("C", 0), ("B", 1)}
    for gate in gates.values():
        gate.set()
    await until(6)
    drain.cancel()
    await asyncio.gather(drain, return_exceptions=True)
    assert most == {True: 1, False: 1}
    for rid in "AB":  # each request in order
        seqs = [s for r, s in started if r == rid]
        assert seqs == sorted(seqs)


async def test_the_drain_drops_stale_items_and_raises_what_a_run_raised() -> None:
    from streamtts.runtime.read_ahead import drain_in_request_order

    q: FirstSegmentsFirst[str] = FirstSegmentsFirst(maxsize=10)
    for item in ("old", "boom"):
        await q.put(item, first=False)
    ran: list[str] = []

    async def run(item: str) -> None:
        ran.append(item)
        raise RuntimeError(f"bug in {item}")

    with pytest.raises(RuntimeError, match="bug in boom"):
        await asyncio.wait_for(
            drain_in_request_order(
                q,
                run,
                key=lambda item: item,
                first_of=lambda item: False,
                caps={True: 1, False: 1},
                stale=lambda item: item == "old",
            ),
            2,
        )
    assert ran == ["boom"]
