"""The one place Kafka clients are built, so every component gets the same safe defaults."""

from __future__ import annotations

from typing import Any

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.admin import AIOKafkaAdminClient

from streamtts.runtime.settings import KafkaSettings


def make_producer(
    kafka: KafkaSettings, *, transactional_id: str | None = None, **overrides: Any
) -> AIOKafkaProducer:
    """An idempotent, acks=all producer: retries can neither lose nor duplicate records."""
    kwargs: dict[str, Any] = dict(
        kafka.client_kwargs(),
        enable_idempotence=True,
        acks="all",
        linger_ms=5,
        max_request_size=4 * 1024 * 1024,
        request_timeout_ms=30000,
    )
    if transactional_id:
        kwargs["transactional_id"] = transactional_id
    kwargs.update(overrides)
    return AIOKafkaProducer(**kwargs)


def make_consumer(
    kafka: KafkaSettings, *topics: str, group_id: str | None, **overrides: Any
) -> AIOKafkaConsumer:
    """A consumer that commits explicitly (after its output is acknowledged)."""
    kwargs: dict[str, Any] = dict(
        kafka.client_kwargs(),
        group_id=group_id,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
        max_partition_fetch_bytes=4 * 1024 * 1024,
        fetch_max_bytes=16 * 1024 * 1024,
    )
    kwargs.update(overrides)
    return AIOKafkaConsumer(*topics, **kwargs)


def make_admin(kafka: KafkaSettings, **overrides: Any) -> AIOKafkaAdminClient:
    kwargs = dict(kafka.client_kwargs(), request_timeout_ms=15000)
    kwargs.update(overrides)
    return AIOKafkaAdminClient(**kwargs)


async def describe_partitions(admin: AIOKafkaAdminClient, topics: list[str]) -> dict[str, set[int]]:
    """Partition ids of each existing topic in `topics`, from fresh cluster metadata."""
    described = await admin.describe_topics(topics)
    return {t["topic"]: {p["partition"] for p in t["partitions"]} for t in described if t["error_code"] == 0}


async def topic_partitions(kafka: KafkaSettings, topic: str) -> set[int]:
    """Partition ids of `topic` (empty if it does not exist), with a short-lived admin client."""
    admin = make_admin(kafka)
    await admin.start()
    try:
        return (await describe_partitions(admin, [topic])).get(topic, set())
    finally:
        await admin.close()
