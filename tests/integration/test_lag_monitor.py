"""Consumer lag as the worker exports it, measured against the real broker: end offset minus
the group's committed offset, per partition, round after round on the same clients."""

from __future__ import annotations

import uuid

import pytest
from aiokafka import TopicPartition
from aiokafka.structs import OffsetAndMetadata

from streamtts.runtime.kafka import make_consumer, make_producer
from streamtts.runtime.lag import LagMonitor
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames

pytestmark = pytest.mark.integration


async def _produce(kafka: KafkaSettings, topic: str, n: int) -> int:
    """`n` records under one key; the partition they went to."""
    producer = make_producer(kafka)
    await producer.start()
    try:
        sent = [await producer.send_and_wait(topic, key=b"one-key", value=b"x") for _ in range(n)]
    finally:
        await producer.stop()
    return sent[0].partition


async def _commit(kafka: KafkaSettings, group: str, tp: TopicPartition, offset: int) -> None:
    consumer = make_consumer(kafka, group_id=group)
    await consumer.start()
    try:
        consumer.assign([tp])
        await consumer.commit({tp: OffsetAndMetadata(offset, "")})
    finally:
        await consumer.stop()


async def test_lag_is_end_minus_committed_round_after_round(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    group = f"lag-{uuid.uuid4().hex[:8]}"
    partition = await _produce(kafka_settings, topics.segments, 10)
    tp = TopicPartition(topics.segments, partition)
    await _commit(kafka_settings, group, tp, 4)
    telemetry = Telemetry()
    monitor = LagMonitor(kafka_settings, {group: [topics.segments]}, telemetry)
    try:
        first = await monitor.measure()
        assert first[(group, topics.segments, partition)] == 6
        # Partitions the group never committed on count from 0: their whole log is lag.
        assert all(lag == 0 for (_, _, p), lag in first.items() if p != partition)
        labels = {"group": group, "topic": topics.segments, "partition": str(partition)}
        assert telemetry.registry.get_sample_value("streamtts_consumer_lag", labels) == 6

        clients = monitor._clients
        await _produce(kafka_settings, topics.segments, 5)
        second = await monitor.measure()
        assert second[(group, topics.segments, partition)] == 11
        assert monitor._clients is clients, "a new admin client and consumer for every round"
    finally:
        await monitor.stop()
    assert monitor._clients is None
