"""The sink's records for the one stage loop (`runtime.stage_loop`): an aiokafka consumer
polled in batches, each batch ended by the sink's checkpoint (stale requests failed, then the
offsets acked so far committed — with the outputs, in one transaction per input partition,
under exactly-once). Why aiokafka here and faust for the other stages: docs/architecture.md,
"One stage runtime".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Protocol

from aiokafka import AIOKafkaConsumer, ConsumerRecord

from streamtts.runtime.loop_record import LoopEvent, LoopRecord
from streamtts.schemas.headers import header_pairs
from streamtts.sinks.checkpoint import SinkCheckpoint, TopicPart

POLL_TIMEOUT_MS = 300
MAX_RECORDS = 200


def sink_event(record: ConsumerRecord[bytes, bytes], epoch: int) -> LoopEvent:
    stamp = record.timestamp / 1000 if record.timestamp is not None else None
    return LoopEvent(
        LoopRecord(
            record.topic,
            record.partition,
            record.offset,
            record.key,
            record.value or b"",
            header_pairs(record.headers),
            stamp,
            epoch,
        )
    )


class BatchOwner(Protocol):
    """What the sink gives its source: when to stop, and what to do around a batch."""

    consumer: AIOKafkaConsumer | None
    checkpoint: SinkCheckpoint

    def stopping(self) -> bool: ...

    async def may_read(self, part: TopicPart, offset: int, epoch: int) -> bool:
        """Whether the partition's records may be handled from `offset` on (False: the rest
        of its batch is left, for a later fetch or for its next owner)."""
        ...

    async def end_batch(self) -> None:
        """Fail stale requests, then commit what is done."""
        ...

    def batch_started(self) -> None: ...


class SinkSource:
    """A `RecordSource` (see `runtime.stage_loop`): acks become committable offsets."""

    def __init__(self, owner: BatchOwner, done: Callable[[TopicPart, int, int], None]) -> None:
        """done(partition, offset, epoch): a record acked, in offset order (it may be committed)."""
        self.owner = owner
        self._done = done

    async def events(self) -> AsyncIterator[LoopEvent]:
        owner, checkpoint, consumer = self.owner, self.owner.checkpoint, self.owner.consumer
        assert consumer is not None, "the sink reads once started"
        while not owner.stopping():
            # 1. Poll a batch.
            batch = await consumer.getmany(timeout_ms=POLL_TIMEOUT_MS, max_records=MAX_RECORDS)
            # The assignment each partition's records were fetched under: a rebalance while
            # the batch is handled may revoke a partition and give it back.
            epochs = {(tp.topic, tp.partition): checkpoint.epoch((tp.topic, tp.partition)) for tp in batch}
            owner.batch_started()
            # 2. Hand its records to the loop in order; a request they complete is finished
            #    (stored, its result sent in its partition's transaction).
            for tp, records in batch.items():
                part = (tp.topic, tp.partition)
                epoch = epochs[part]
                for record in records:
                    if owner.stopping() or checkpoint.epoch(part) != epoch or part not in checkpoint.owned:
                        break  # revoked since the fetch: unhandled records stay uncommitted
                    if not await owner.may_read(part, record.offset, epoch):
                        break
                    yield sink_event(record, epoch)
            # 3. Fail stale requests, 4. commit (see `CompletionSink.end_batch`).
            await owner.end_batch()

    async def ack(self, event: LoopEvent) -> None:
        msg = event.message
        self._done(msg.tp, msg.offset, msg.generation_id)

    def generation(self) -> int:
        return 0  # the sink reads no records ahead, so none goes stale in a queue
