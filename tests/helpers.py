"""Small helpers shared by the integration tests."""

from __future__ import annotations

import asyncio
import os
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from streamtts.runtime.kafka import make_consumer
from streamtts.runtime.settings import KafkaSettings, S3Settings


def cli_env(kafka: KafkaSettings, s3: S3Settings | None = None, **extra: str) -> dict[str, str]:
    """Environment for a `streamtts` subprocess pointed at this test's broker, topics and S3."""
    env = dict(
        os.environ,
        STREAMTTS_KAFKA_BOOTSTRAP=kafka.bootstrap_servers,
        STREAMTTS_TOPIC_PREFIX=kafka.topic_prefix,
    )
    if s3 is not None:
        env.update(
            STREAMTTS_S3_ENDPOINT=s3.endpoint,
            STREAMTTS_S3_ACCESS_KEY=s3.access_key,
            STREAMTTS_S3_SECRET_KEY=s3.secret_key,
        )
    env.update({f"STREAMTTS_{k.upper()}": v for k, v in extra.items()})
    return env


def metric(text: str, sample: str, **labels: str) -> float:
    """Sum of the samples named `sample` (e.g. `x_total`, `x_count`) whose labels include
    `labels`, in a Prometheus text exposition; 0.0 when none."""
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == sample and all(s.labels.get(k) == v for k, v in labels.items())
    )


async def topic_records(kafka: KafkaSettings, topic: str, count: int, *, timeout_s: float) -> list[Any]:
    """The first `count` records of `topic`, read from the beginning by a plain consumer with no
    group (waits for them; TimeoutError past `timeout_s`)."""
    consumer = make_consumer(kafka, topic, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    out: list[Any] = []
    try:
        async with asyncio.timeout(timeout_s):
            while len(out) < count:
                for records in (await consumer.getmany(timeout_ms=500)).values():
                    out += records
    finally:
        await consumer.stop()
    return out
