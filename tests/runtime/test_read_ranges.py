"""`read_ranges`: the bounded read under `snapshot` and the rollback's re-drive — records at
start ≤ offset < end of each partition, done when the position (not the last record) reaches
the end, since transaction markers take offsets without being records."""

from __future__ import annotations

from dataclasses import dataclass

from aiokafka import TopicPartition

from streamtts.runtime.snapshot import read_ranges


@dataclass
class _Record:
    topic: str
    partition: int
    offset: int


class _Log:
    """A consumer over fixed partitions; `marker` offsets hold transaction markers."""

    def __init__(self, sizes: dict[TopicPartition, int], markers: set[tuple[TopicPartition, int]]) -> None:
        self.sizes = sizes
        self.markers = markers
        self.assigned: list[TopicPartition] = []
        self.positions: dict[TopicPartition, int] = {}

    def assign(self, tps: list[TopicPartition]) -> None:
        self.assigned = list(tps)

    def seek(self, tp: TopicPartition, offset: int) -> None:
        assert tp in self.assigned, "seek only what is assigned"
        self.positions[tp] = offset

    async def getmany(self, *tps: TopicPartition, timeout_ms: int) -> dict[TopicPartition, list[_Record]]:
        batch: dict[TopicPartition, list[_Record]] = {}
        for tp in tps:
            at, end = self.positions[tp], self.sizes[tp]
            records = [_Record(tp.topic, tp.partition, o) for o in range(at, min(at + 2, end))]
            self.positions[tp] = min(at + 2, end)
            records = [r for r in records if (tp, r.offset) not in self.markers]
            if records:
                batch[tp] = records
        return batch

    async def position(self, tp: TopicPartition) -> int:
        return self.positions[tp]


async def test_each_range_is_read_to_its_end_and_no_further() -> None:
    a0, a1, a2 = (TopicPartition("a", p) for p in range(3))
    log = _Log({a0: 10, a1: 10, a2: 10}, markers={(a1, 4)})
    starts = {a0: 2, a1: 3, a2: 7}
    ends = {a0: 5, a1: 5, a2: 7}  # a2: nothing to read
    got = [(r.partition, r.offset) async for r in read_ranges(log, starts, ends)]  # type: ignore[arg-type]
    assert sorted(got) == [(0, 2), (0, 3), (0, 4), (1, 3)]
    assert log.assigned == [a0, a1]


async def test_a_range_that_ends_in_a_marker_is_done() -> None:
    tp = TopicPartition("t", 0)
    log = _Log({tp: 3}, markers={(tp, 1), (tp, 2)})
    got = [r.offset async for r in read_ranges(log, {tp: 0}, {tp: 3})]  # type: ignore[arg-type]
    assert got == [0]


async def test_nothing_to_read_assigns_nothing() -> None:
    tp = TopicPartition("t", 0)
    log = _Log({tp: 3}, markers=set())
    assert [r async for r in read_ranges(log, {tp: 3}, {tp: 3})] == []  # type: ignore[arg-type]
    assert log.assigned == []
