"""`partitions_of` and `attach_at_end`: the group-less consumer setup the gateway, the result
waiter and the benches share — every partition of the topics, assigned at their end, the end
resolved before the caller sends anything."""

from __future__ import annotations

import pytest
from aiokafka import TopicPartition

from streamtts.runtime import kafka as kafka_module
from streamtts.runtime.kafka import attach_at_end, partitions_of
from streamtts.runtime.settings import KafkaSettings


async def test_partitions_of_lists_each_topic_in_partition_order(monkeypatch: pytest.MonkeyPatch) -> None:
    known = {"a": {2, 0, 1}, "b": {0}}

    async def fake(kafka: KafkaSettings, topic: str) -> set[int]:
        return known.get(topic, set())

    monkeypatch.setattr(kafka_module, "topic_partitions", fake)
    got = await partitions_of(KafkaSettings(), ["b", "missing", "a"])
    assert got == [
        TopicPartition("b", 0),
        TopicPartition("a", 0),
        TopicPartition("a", 1),
        TopicPartition("a", 2),
    ]


class _Consumer:
    def __init__(self) -> None:
        self.calls: list[tuple[str, object]] = []

    def assign(self, tps: list[TopicPartition]) -> None:
        self.calls.append(("assign", list(tps)))

    async def seek_to_end(self, *tps: TopicPartition) -> None:
        self.calls.append(("seek_to_end", tps))

    async def position(self, tp: TopicPartition) -> int:
        self.calls.append(("position", tp))
        return 0


async def test_attach_at_end_assigns_seeks_and_resolves_every_position() -> None:
    tps = [TopicPartition("a", 0), TopicPartition("a", 1)]
    consumer = _Consumer()
    await attach_at_end(consumer, tps)  # type: ignore[arg-type]
    assert consumer.calls == [
        ("assign", tps),
        ("seek_to_end", tuple(tps)),
        ("position", tps[0]),
        ("position", tps[1]),
    ]
