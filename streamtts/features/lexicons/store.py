"""Tenant lexicons on `tts.lexicons` (aiokafka): read the current one, write a new version,
delete. Writing keeps every version under its own key (`TENANT@vN`) before the current one
moves, so a worker that sees version N can always find it again, and then tombstones the
versions older than the kept history, so compaction can remove them (see `schemas.lexicon`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from aiokafka import TopicPartition

from streamtts.runtime.kafka import make_consumer, make_producer, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import wire
from streamtts.schemas.lexicon import (
    HISTORY_VERSIONS,
    MAX_LEXICON_BYTES,
    Lexicon,
    LexiconEntry,
    lexicon_key,
    version_key,
)

__all__ = ["MAX_LEXICON_BYTES", "LexiconStore", "LexiconTooLarge", "superseded"]


class LexiconTooLarge(ValueError):
    """The encoded lexicon is over `MAX_LEXICON_BYTES`."""


class LexiconStore:
    """Reads and writes one topic of lexicons."""

    def __init__(self, kafka: KafkaSettings, topic: str, *, keep: int = HISTORY_VERSIONS) -> None:
        """keep: versions kept per tenant for replays (older ones are tombstoned by `put`)."""
        self.kafka = kafka
        self.topic = topic
        self.keep = keep

    async def read(self) -> dict[str, bytes | None]:
        """Every key's latest value, from the beginning to the end offsets at call time."""
        partitions = sorted(await topic_partitions(self.kafka, self.topic))
        latest: dict[str, bytes | None] = {}
        if not partitions:
            return latest
        consumer = make_consumer(self.kafka, group_id=None, max_poll_records=500)
        await consumer.start()
        try:
            tps = [TopicPartition(self.topic, p) for p in partitions]
            consumer.assign(tps)
            await consumer.seek_to_beginning(*tps)
            ends = await consumer.end_offsets(tps)
            while await _behind(consumer, tps, ends):
                batch = await consumer.getmany(timeout_ms=1000)
                for records in batch.values():
                    for r in records:
                        if r.key is not None:
                            latest[r.key.decode("utf-8", "replace")] = r.value
        finally:
            await consumer.stop()
        return latest

    async def current(self, tenant: str) -> Lexicon | None:
        value = (await self.read()).get(lexicon_key(tenant))
        return Lexicon.from_bytes(value) if value is not None else None

    async def put(self, tenant: str, entries: list[LexiconEntry]) -> Lexicon:
        """Write `entries` as the tenant's next version (current + 1; versions never repeat,
        even after a delete).

        Raises:
            LexiconTooLarge: over `MAX_LEXICON_BYTES` encoded.
        """
        latest = await self.read()
        versions = _versions(latest, tenant)
        lexicon = Lexicon(
            tenant=tenant, version=max(versions, default=0) + 1, entries=entries, updated_at=datetime.now(UTC)
        )
        value = lexicon.to_bytes()
        if len(value) > MAX_LEXICON_BYTES:
            raise LexiconTooLarge(
                f"the lexicon is {len(value)} bytes encoded; the limit is {MAX_LEXICON_BYTES}"
            )
        producer = make_producer(self.kafka, max_request_size=4 * 1024 * 1024)
        await producer.start()
        try:
            # 1. the version, kept for good; 2. the current pointer (what workers apply).
            headers = wire.encode(lexicon, source=wire.SOURCE_PREFIX + "/lexicons").headers
            await producer.send_and_wait(
                self.topic, key=version_key(tenant, lexicon.version).encode(), value=value, headers=headers
            )
            await producer.send_and_wait(
                self.topic, key=lexicon_key(tenant).encode(), value=value, headers=headers
            )
            # 3. tombstones for versions past the kept history (and any left by an older
            #    writer that kept them all): compaction removes them, workers stop re-reading them.
            live = [v for v in versions if latest.get(version_key(tenant, v)) is not None]
            for old in superseded([*live, lexicon.version], self.keep):
                await producer.send(self.topic, key=version_key(tenant, old).encode(), value=None)
            await producer.flush()
        finally:
            await producer.stop()
        return lexicon

    async def delete(self, tenant: str) -> bool:
        """Remove the tenant's current lexicon (kept versions stay for replays). False: none."""
        if (await self.read()).get(lexicon_key(tenant)) is None:
            return False
        producer = make_producer(self.kafka)
        await producer.start()
        try:
            await producer.send_and_wait(self.topic, key=lexicon_key(tenant).encode(), value=None)
        finally:
            await producer.stop()
        return True


def superseded(versions: list[int], keep: int = HISTORY_VERSIONS) -> list[int]:
    """The versions past the newest `keep`: the ones to tombstone."""
    return sorted(versions)[:-keep] if len(versions) > keep else []


def _versions(latest: dict[str, bytes | None], tenant: str) -> list[int]:
    """Every version number written for `tenant` (tombstoned ones too: numbers never repeat)."""
    prefix = f"{tenant}@v"
    return [int(k[len(prefix) :]) for k in latest if k.startswith(prefix) and k[len(prefix) :].isdigit()]


async def _behind(consumer: Any, tps: list[TopicPartition], ends: dict[TopicPartition, int]) -> bool:
    for tp in tps:
        if await consumer.position(tp) < ends[tp]:
            return True
    return False
