"""The chaos runs' independent subscriber: results and dead letters as a plain aiokafka
read_committed client sees them (no code path shared with the pipeline's own clients), and
whether the sink has committed everything it could still turn into a result."""

from __future__ import annotations

import asyncio
import time

import orjson
from aiokafka import TopicPartition

from streamtts.runtime.faust_app import group_id
from streamtts.runtime.kafka import describe_partitions, make_consumer, started_admin
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import STAGES, stage_spec


class ResultObserver:
    """The independent subscriber: results and dead letters as a read_committed client sees them."""

    def __init__(self, kafka: KafkaSettings, topics: TopicNames) -> None:
        self.results: dict[str, list[tuple[str, float]]] = {}
        self.dead_letters: dict[str, int] = {}
        self._consumer = make_consumer(
            kafka, topics.results, *(topics.dlq(s) for s in STAGES), group_id=None, request_timeout_ms=10_000
        )
        self._topics = topics
        self._task: asyncio.Task[None] | None = None
        self._fetched = asyncio.Event()
        """Set after every fetch (records or none: at least every 0.5 s while the broker is up)."""

    async def start(self) -> None:
        await self._consumer.start()
        self._task = asyncio.create_task(self._run())

    async def _run(self) -> None:
        while True:
            try:
                batch = await self._consumer.getmany(timeout_ms=500)
            except Exception:  # the broker is down: this client reconnects by itself
                await asyncio.sleep(0.5)
                continue
            now = time.monotonic()
            for tp, records in batch.items():
                for r in records:
                    key = (r.key or b"").decode(errors="replace")
                    if tp.topic == self._topics.results:
                        status = orjson.loads(r.value or b"{}").get("status", "?")
                        self.results.setdefault(key, []).append((status, now))
                    else:
                        self.dead_letters[key] = self.dead_letters.get(key, 0) + 1
            self._fetched.set()

    async def read_to_end(self) -> None:
        """Until this subscriber has read every record committed before the call (its position
        at each partition's last stable offset, as a read_committed client sees the end): a
        result or a duplicate the sink committed by then is counted when this returns."""
        parts = list(self._consumer.assignment())
        ends = await self._consumer.end_offsets(parts)
        while True:
            self._fetched.clear()
            positions = {tp: await self._consumer.position(tp) for tp in ends}
            if all(positions[tp] >= end for tp, end in ends.items()):
                return
            await self._fetched.wait()

    async def stop(self) -> None:
        if self._task:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self._consumer.stop()


async def sink_caught_up(kafka: KafkaSettings, topics: TopicNames) -> bool:
    """The sink group has committed everything on its sources (tts.file.parts): no result can
    still be on its way."""
    sources = stage_spec("sink").sources(topics)
    consumer = make_consumer(kafka, group_id=None)
    async with started_admin(kafka) as admin:
        await consumer.start()
        try:
            committed = await admin.list_consumer_group_offsets(group_id(kafka, "sink"))
            described = await describe_partitions(admin, sources)
            parts = [TopicPartition(t, p) for t in sources for p in sorted(described.get(t, set()))]
            ends = await consumer.end_offsets(parts)
            done = [ends[tp] == 0 or (tp in committed and committed[tp].offset >= ends[tp]) for tp in parts]
            return all(done)
        finally:
            await consumer.stop()
