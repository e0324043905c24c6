"""The replay ledger: a compacted topic keyed by what was replayed.

Before re-driving a record, replay tooling checks the ledger; after re-driving it, it writes
an entry. Repeating the same replay therefore skips what was done (unless --force), and the
ledger survives tool restarts because it lives in Kafka.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime

import orjson
from aiokafka import AIOKafkaProducer

from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.snapshot import snapshot


class ReplayLedger:
    def __init__(self, kafka: KafkaSettings, topic: str) -> None:
        self.kafka = kafka
        self.topic = topic
        self.done: set[str] = set()

    async def load(self) -> None:
        async for record in snapshot(self.kafka, self.topic):
            if record.key is None:
                continue
            key = record.key.decode()
            if record.value is None:
                self.done.discard(key)  # a tombstone forgets the entry
            else:
                self.done.add(key)

    def seen(self, key: str) -> bool:
        return key in self.done

    async def record(self, producer: AIOKafkaProducer, key: str, target: str) -> None:
        value = orjson.dumps({"replayed_at": datetime.now(UTC).isoformat(), "target": target})
        await producer.send_and_wait(self.topic, key=key.encode(), value=value)
        self.done.add(key)


@asynccontextmanager
async def ledger_and_producer(
    kafka: KafkaSettings, topic: str
) -> AsyncIterator[tuple[ReplayLedger, AIOKafkaProducer]]:
    """The ledger on `topic`, loaded, and a started producer for the re-driven records and
    their ledger entries; the producer is stopped on exit."""
    ledger = ReplayLedger(kafka, topic)
    await ledger.load()
    producer = make_producer(kafka)
    await producer.start()
    try:
        yield ledger, producer
    finally:
        await producer.stop()
