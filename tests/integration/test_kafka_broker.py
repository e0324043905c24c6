"""What the pipeline relies on from the broker, proven against the real one."""

from __future__ import annotations

import asyncio
import uuid
from collections import defaultdict

import pytest
from aiokafka import AIOKafkaConsumer, TopicPartition

from streamtts.runtime.kafka import make_consumer, make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames

pytestmark = pytest.mark.integration


async def _drain(consumer: AIOKafkaConsumer, expected: int, timeout_s: float = 30) -> list:
    """Read until `expected` records arrived (the event we wait for), or fail at the deadline."""
    out: list = []
    async with asyncio.timeout(timeout_s):
        while len(out) < expected:
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                out.extend(records)
    return out


async def test_keyed_records_keep_order_per_key_across_partitions(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    keys = [f"req-{i}" for i in range(12)]
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        futures = [
            await producer.send(topics.segments, key=k.encode(), value=f"{k}:{seq}".encode())
            for seq in range(20)
            for k in keys
        ]
        await asyncio.gather(*futures)
    finally:
        await producer.stop()
    consumer = make_consumer(kafka_settings, topics.segments, group_id=f"g-{uuid.uuid4().hex}")
    await consumer.start()
    try:
        records = await _drain(consumer, 20 * len(keys))
    finally:
        await consumer.stop()
    partitions_of: dict[str, set[int]] = defaultdict(set)
    seqs_of: dict[str, list[int]] = defaultdict(list)
    for r in records:
        key = r.key.decode()
        partitions_of[key].add(r.partition)
        seqs_of[key].append(int(r.value.decode().split(":")[1]))
    assert all(len(p) == 1 for p in partitions_of.values()), "a key must map to one partition"
    assert len({p for ps in partitions_of.values() for p in ps}) > 1, "keys should spread out"
    assert all(s == list(range(20)) for s in seqs_of.values())


async def test_consumer_group_resumes_from_committed_offset(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        for i in range(10):
            await producer.send_and_wait(topics.results, key=b"k", value=str(i).encode())
    finally:
        await producer.stop()
    group = f"g-{uuid.uuid4().hex}"
    first = make_consumer(kafka_settings, topics.results, group_id=group, max_poll_records=4)
    await first.start()
    try:
        got = await _drain(first, 4)
        last = got[3]
        tp = TopicPartition(last.topic, last.partition)
        await first.commit({tp: last.offset + 1})  # processed 0..3 only
    finally:
        await first.stop()
    second = make_consumer(kafka_settings, topics.results, group_id=group)
    await second.start()
    try:
        rest = await _drain(second, 6)
    finally:
        await second.stop()
    assert [int(r.value) for r in rest] == list(range(4, 10))


async def test_idempotent_producer_is_accepted_and_writes_exactly_once(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    producer = make_producer(kafka_settings)  # enable_idempotence=True, acks=all
    await producer.start()
    try:
        metas = await asyncio.gather(
            *[await producer.send(topics.audio, key=b"r", value=str(i).encode()) for i in range(50)]
        )
    finally:
        await producer.stop()
    offsets = [m.offset for m in metas]
    assert offsets == sorted(offsets) and len(set(offsets)) == 50
    consumer = make_consumer(kafka_settings, topics.audio, group_id=None)
    await consumer.start()
    try:
        records = await _drain(consumer, 50)
        more = await consumer.getmany(timeout_ms=300)
    finally:
        await consumer.stop()
    assert [int(r.value) for r in records] == list(range(50))
    assert not any(more.values()), "no duplicates after the 50 records"


async def test_committed_transaction_visible_aborted_one_invisible(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    producer = make_producer(kafka_settings, transactional_id=f"tx-{uuid.uuid4().hex}")
    await producer.start()
    try:
        async with producer.transaction():
            for i in range(3):
                await producer.send(topics.pcm, key=b"k", value=f"committed-{i}".encode(), partition=0)
        await producer.begin_transaction()
        for i in range(3):
            await producer.send(topics.pcm, key=b"k", value=f"aborted-{i}".encode(), partition=0)
        await producer.abort_transaction()
        async with producer.transaction():
            await producer.send(topics.pcm, key=b"k", value=b"after-abort", partition=0)
    finally:
        await producer.stop()

    async def read(isolation: str, expected: int) -> list[str]:
        consumer = make_consumer(kafka_settings, group_id=None, isolation_level=isolation)
        await consumer.start()
        consumer.assign([TopicPartition(topics.pcm, 0)])
        await consumer.seek_to_beginning()
        try:
            return [r.value.decode() for r in await _drain(consumer, expected)]
        finally:
            await consumer.stop()

    committed = await read("read_committed", 4)
    assert committed == ["committed-0", "committed-1", "committed-2", "after-abort"]
    # The aborted records really reached the log: only the isolation level hides them.
    uncommitted = await read("read_uncommitted", 7)
    assert [v for v in uncommitted if v.startswith("aborted")] == [
        "aborted-0",
        "aborted-1",
        "aborted-2",
    ]
