"""A stage that joined while its source topic was missing (a broker still recovering) does not
sit idle until Kafka's 5-minute metadata refresh: it is not ready meanwhile, and it picks the
topic up by itself within seconds."""

from __future__ import annotations

import asyncio
import time

import pytest

from streamtts.infra.topics import apply_spec, load_spec
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.kafka import make_admin, make_consumer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.worker import Worker
from tests.services import Services

pytestmark = pytest.mark.integration


async def test_a_stage_without_its_source_topic_recovers_within_seconds(
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    pipeline_settings: PipelineSettings,
) -> None:
    admin = make_admin(kafka_settings)
    await admin.start()
    try:
        await admin.delete_topics([topics.requests])
        async with asyncio.timeout(30):
            while topics.requests in await admin.list_topics():  # noqa: ASYNC110 - deletion has no event
                await asyncio.sleep(0.2)
        worker = Worker(["segment"], Settings(kafka=kafka_settings, s3=services.s3), pipeline_settings)
        await worker.start()
        try:
            stage = worker.service("segment")
            async with asyncio.timeout(60):  # the group formed without its topic
                while stage.rebalances == 0:  # noqa: ASYNC110 - faust's signal may fire during start
                    await asyncio.sleep(0.1)
            assert not stage.assigned
            assert any("segment: no partition" in p for p in worker.readiness.problems())

            # The topic comes back (the broker finished recovering); a request is waiting.
            await apply_spec(
                admin, [s for s in load_spec(prefix=kafka_settings.topic_prefix) if s.name == topics.requests]
            )
            created = time.monotonic()
            request = TTSRequest.new("Hello after the outage.", voice="en_joe")
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit(request)
            segments = make_consumer(kafka_settings, topics.segments, group_id=None)
            await segments.start()
            try:
                async with asyncio.timeout(30):  # far below the 5-minute default refresh
                    got = None
                    while got is None:
                        for records in (await segments.getmany(timeout_ms=500)).values():
                            got = next((r for r in records if r.key == request.request_id.encode()), got)
            finally:
                await segments.stop()
            assert stage.assigned and not worker.readiness.problems()
            assert time.monotonic() - created < 30
        finally:
            await worker.stop()
    finally:
        await admin.close()
