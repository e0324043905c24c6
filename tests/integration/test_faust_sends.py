"""A faust stage's records written one after another leave in one produce request.

faust awaits a stampede guard on every send, and that guard gave the loop three turns per
send: the producer's sender took the first record alone, so a chunk's audio and its file part
were always two requests to the broker (measured under load: 120 and 120 in 15 s, never one).
Counted here on the real broker by wrapping aiokafka's connection `send` (the requests as they
leave, nothing answered for the broker)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import conn as aiokafka_conn

from streamtts.runtime.faust_app import make_app
from streamtts.runtime.pipeline_settings import DeliverySettings, PipelineSettings
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames

pytestmark = pytest.mark.integration


@pytest.fixture
def produce_requests() -> Iterator[Counter[tuple[str, ...]]]:
    """Each produce request that leaves this process, by the topics it carries."""
    seen: Counter[tuple[str, ...]] = Counter()
    original = aiokafka_conn.AIOKafkaConnection.send

    def send(self: Any, request: Any, expect_response: bool = True) -> Any:
        if type(request).__name__ == "ProduceRequest":
            seen[tuple(sorted(topic for topic, _ in request._topics))] += 1
        return original(self, request, expect_response)

    aiokafka_conn.AIOKafkaConnection.send = send  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        aiokafka_conn.AIOKafkaConnection.send = original  # type: ignore[method-assign]


async def test_two_records_sent_in_a_row_leave_in_one_request(
    kafka_settings: KafkaSettings, topics: TopicNames, produce_requests: Counter[tuple[str, ...]]
) -> None:
    pipeline = PipelineSettings(delivery=DeliverySettings(processing_guarantee="at_least_once"))
    app = make_app("sends-probe", kafka_settings, pipeline)
    audio = app.topic(topics.audio, key_type=bytes, value_type=bytes)
    parts = app.topic(topics.file_parts, key_type=bytes, value_type=bytes)
    producer = await app.maybe_start_producer()
    try:
        # Metadata for both topics first: a send for a topic never seen waits for it.
        await asyncio.gather(
            await audio.send(key=b"k", value=b"warm"), await parts.send(key=b"k", value=b"warm")
        )
        produce_requests.clear()
        for i in range(10):
            first = await audio.send(key=b"k", value=b"audio %d" % i)
            second = await parts.send(key=b"k", value=b"part %d" % i)
            await asyncio.gather(first, second)
    finally:
        await producer.stop()
    assert produce_requests == Counter({tuple(sorted((topics.audio, topics.file_parts))): 10})
