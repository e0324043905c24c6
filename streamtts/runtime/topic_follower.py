"""One topic read whole by every process and followed live: the shape shared by the cancel
watch (`tts.control`), the lexicon book (`tts.lexicons`) and the release watch (`tts.config`).

No consumer group, so every process sees every record. `caught_up` is set once everything
up to the end offsets at start has been read; then the topic is followed, one poll at a
time. Kafka trouble is logged and retried: whatever was read last stays in use meanwhile.
A record the subclass cannot take (any exception) is logged and skipped; the follow goes on.
Subclasses say where to start (`_seek`, default: the beginning) and what a batch means
(`_take_batch`).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import KW_ONLY, dataclass, field
from typing import ClassVar

from aiokafka import AIOKafkaConsumer, ConsumerRecord, TopicPartition

from streamtts.runtime.jsonlog import log_event, record_position
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.lifecycle import AsyncLifecycle, cancel_and_wait
from streamtts.runtime.settings import KafkaSettings

FOLLOW_FETCH_WAIT_MS = 5000
"""How long the broker may hold a follower's fetch when there is nothing new. A record that
arrives answers the fetch at once, so this costs no latency; what it sets is how often an idle
follower asks again. At aiokafka's 500 ms default, every process's three or four followers
were ~8 fetches a second of idle broker and client work (~0.9 ms of broker CPU each, measured).
Safe because a follower seeks only before it follows and never pauses a partition: a fetch
in flight holds back only those (aiokafka sends one fetch per broker at a time)."""


@dataclass(eq=False)
class TopicFollower(AsyncLifecycle):
    what: ClassVar[str] = "topic"
    """Names the log events: `{what}_topic_missing`, `{what}_read_failed`."""

    kafka: KafkaSettings
    topic: str
    _: KW_ONLY
    poll_ms: int
    log: logging.Logger
    name: str
    """The follow task's name."""
    _consumer: AIOKafkaConsumer = field(init=False, repr=False)
    _task: asyncio.Task[None] | None = field(default=None, init=False, repr=False)
    caught_up: asyncio.Event = field(default_factory=asyncio.Event, init=False, repr=False)
    """Set once the topic was read up to its end offsets at start."""

    def __post_init__(self) -> None:
        self._consumer = make_consumer(
            self.kafka, group_id=None, max_poll_records=500, fetch_max_wait_ms=FOLLOW_FETCH_WAIT_MS
        )

    async def start(self) -> None:
        partitions = sorted(await topic_partitions(self.kafka, self.topic))
        await self._consumer.start()
        if not partitions:  # an older deployment without the topic: nothing to follow
            log_event(self.log, f"{self.what}_topic_missing", logging.WARNING, topic=self.topic)
            self.caught_up.set()
            return
        tps = [TopicPartition(self.topic, p) for p in partitions]
        self._consumer.assign(tps)
        ends = await self._consumer.end_offsets(tps)
        await self._seek(tps, ends)
        self._task = asyncio.create_task(self._follow(ends), name=self.name)

    async def _seek(self, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> None:
        await self._consumer.seek_to_beginning(*tps)

    def _caught_up(self) -> None:
        """Called once, when the topic has been read up to its end offsets at start."""
        self.caught_up.set()

    async def _take_batch(self, records: list[ConsumerRecord]) -> None:
        raise NotImplementedError

    async def _follow(self, ends: dict[TopicPartition, int]) -> None:
        pending = set(ends)
        while True:
            try:
                for tp in list(pending):
                    if await self._consumer.position(tp) >= ends[tp]:
                        pending.discard(tp)
                if not pending and not self.caught_up.is_set():
                    self._caught_up()
                batch = await self._consumer.getmany(timeout_ms=self.poll_ms)
            except Exception as err:  # Kafka trouble: keep following; what was read stays in use
                log_event(self.log, f"{self.what}_read_failed", logging.WARNING, error=str(err)[:200])
                await asyncio.sleep(1.0)
                continue
            records = [r for rs in batch.values() for r in rs]
            if records:
                await self._take_guarded(records)

    async def _take_guarded(self, records: list[ConsumerRecord]) -> None:
        """`_take_batch`, with no exception ending the follow: a batch that raises is taken
        again one record at a time, so only the records that raise are skipped (logged with
        their offsets). `_take_batch` must therefore tolerate seeing a record twice."""
        try:
            await self._take_batch(records)
            return
        except Exception as err:
            log_event(
                self.log,
                f"{self.what}_batch_failed",
                logging.WARNING,
                records=len(records),
                error=f"{type(err).__name__}: {err}"[:200],
            )
        for record in records:
            try:
                await self._take_batch([record])
            except Exception as err:
                log_event(
                    self.log,
                    f"{self.what}_record_skipped",
                    logging.ERROR,
                    **record_position(record),
                    error=f"{type(err).__name__}: {err}"[:200],
                )

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        await self._consumer.stop()
