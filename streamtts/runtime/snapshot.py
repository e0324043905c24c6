"""Read a topic as a bounded snapshot: from a start (beginning or a time) to the end offsets
captured when reading began — records appended meanwhile (e.g. replays that fail again and
land back in the DLQ) are not read, so a replay can never loop on its own output."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Mapping
from contextlib import aclosing
from datetime import datetime

from aiokafka import AIOKafkaConsumer, TopicPartition
from aiokafka.structs import ConsumerRecord

from streamtts.errors import ConfigError
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.settings import KafkaSettings


async def snapshot(
    kafka: KafkaSettings,
    topic: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    partitions: set[int] | None = None,
    from_offsets: Mapping[int, int] | None = None,
    reached: dict[int, int] | None = None,
) -> AsyncGenerator[ConsumerRecord, None]:
    """Records of `topic` with since ≤ timestamp < until (either bound optional).

    from_offsets: partition → offset to start from instead (a partition not named starts by
    `since`); reached: filled, once every record was read, with each partition's end offset
    (where the next read can start: `from_offsets`)."""
    all_partitions = await topic_partitions(kafka, topic)
    if not all_partitions:
        raise ConfigError(f"topic {topic!r} does not exist")
    chosen = sorted(all_partitions & partitions if partitions is not None else all_partitions)
    consumer = make_consumer(kafka, group_id=None, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in chosen]
        consumer.assign(tps)
        ends = await consumer.end_offsets(tps)
        starts = await consumer.beginning_offsets(tps)
        if since is not None:
            found = await consumer.offsets_for_times({tp: int(since.timestamp() * 1000) for tp in tps})
            starts = {tp: (found[tp].offset if found.get(tp) else ends[tp]) for tp in tps}
        if until is not None:  # offsets looked up by time: the first record at/after `until`
            found = await consumer.offsets_for_times({tp: int(until.timestamp() * 1000) for tp in tps})
            ends = {tp: min(ends[tp], found[tp].offset) if found.get(tp) else ends[tp] for tp in tps}
        for tp in tps:
            if from_offsets is not None and tp.partition in from_offsets:
                earliest = (await consumer.beginning_offsets([tp]))[tp]
                starts[tp] = min(max(from_offsets[tp.partition], earliest), ends[tp])
        async with aclosing(read_ranges(consumer, starts, ends)) as records:
            async for record in records:
                yield record
        if reached is not None:
            reached.update({tp.partition: ends[tp] for tp in tps})
    finally:
        await consumer.stop()


async def read_ranges(
    consumer: AIOKafkaConsumer,
    starts: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
) -> AsyncGenerator[ConsumerRecord, None]:
    """The records at start ≤ offset < end of each partition in `starts`, read by a started
    group-less `consumer` (assigned here: only the partitions with something to read)."""
    pending = {tp for tp in starts if starts[tp] < ends[tp]}
    if not pending:
        return
    consumer.assign(sorted(pending, key=lambda t: (t.topic, t.partition)))
    for tp in pending:
        consumer.seek(tp, starts[tp])
    while pending:
        batch = await consumer.getmany(*pending, timeout_ms=1000)
        for tp, records in batch.items():
            for record in records:
                if record.offset >= ends[tp]:
                    break
                yield record
        # The position, not the last record, says a partition is done: transaction markers
        # (commits, aborts) sit below the end offset without being records.
        pending = {tp for tp in pending if await consumer.position(tp) < ends[tp]}
