"""The completion sink fails a request visibly when its audio stops coming (real Kafka + MinIO)."""

from __future__ import annotations

import numpy as np
import pytest
from minio import Minio

from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.sinks.completion_sink import CompletionSink
from tests.factories import file_part
from tests.services import Services

pytestmark = pytest.mark.integration


TONE = np.sin(np.arange(2400) * 2 * np.pi * 440 / 24000) * 8000


async def test_a_request_whose_audio_stops_coming_fails_visibly(
    kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    # Two requests of three segments each: one gets all its audio, the other loses segment 1.
    whole, broken = (
        TTSRequest.new("One. Two. Three.", language="en", format="wav", tenant="stale") for _ in range(2)
    )
    sink = CompletionSink(kafka_settings, services.s3, PipelineSettings.of(sink_stale_s=1.0), topics)
    async with ResultWaiter(kafka_settings) as waiter:
        await sink.start()
        producer = make_producer(kafka_settings)
        await producer.start()
        try:
            for request, seqs in ((whole, (0, 1, 2)), (broken, (0, 2))):
                for seq in seqs:
                    chunk = file_part(request, seq, 3, pcm=TONE)
                    await producer.send_and_wait(
                        topics.file_parts, key=request.request_id.encode(), value=chunk.to_bytes()
                    )
            results = await waiter.wait([whole.request_id, broken.request_id], timeout_s=60)
        finally:
            await producer.stop()
            await sink.stop()

    done, failed = results[whole.request_id], results[broken.request_id]
    assert done.status == "completed" and done.duration_ms == pytest.approx(300.0)
    assert failed.status == "failed" and failed.error is not None
    assert "no audio for segments [1]" in failed.error, failed.error
    client = Minio(
        services.s3.endpoint,
        access_key=services.s3.access_key,
        secret_key=services.s3.secret_key,
        secure=False,
    )
    stored = [o.object_name for o in client.list_objects(services.s3.bucket, prefix="stale/", recursive=True)]
    assert any(whole.request_id in name for name in stored)
    assert not any(broken.request_id in name for name in stored), "nothing half-written in storage"
