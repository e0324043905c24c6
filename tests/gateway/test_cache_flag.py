"""The gateway passes a request's render-cache choice through to the pipeline."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from streamtts.runtime.kafka import make_consumer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from tests.gateway.conftest import ACME

pytestmark = [pytest.mark.integration]


async def test_cache_false_reaches_the_request_topic(
    gateway_url: str, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    async with httpx.AsyncClient(base_url=gateway_url, headers=ACME, timeout=30) as client:
        plain = await client.post("/v1/speech", json={"text": "Hello there."})
        bypass = await client.post("/v1/speech", json={"text": "Hello there.", "cache": False})
        wrong = await client.post("/v1/speech", json={"text": "Hello there.", "cache": "sometimes"})
    assert plain.status_code == bypass.status_code == 202 and wrong.status_code == 400
    ids = {plain.json()["id"]: True, bypass.json()["id"]: False}
    consumer = make_consumer(kafka_settings, topics.requests, group_id=None, auto_offset_reset="earliest")
    await consumer.start()
    seen: dict[str, bool] = {}
    try:
        async with asyncio.timeout(30):
            while set(seen) != set(ids):
                for records in (await consumer.getmany(timeout_ms=1000)).values():
                    for record in records:
                        request = TTSRequest.from_bytes(record.value)
                        seen[request.request_id] = request.cache
    finally:
        await consumer.stop()
    assert seen == ids
