"""The render cache on real Kafka and real MinIO: repeated speech is served without inference,
identical to the first render; workers share renders through object storage; a cached first
span leaves while the synthesize worker is busy with another request's inference."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from streamtts.processors.synthesize.blob_tier import BlobTier
from streamtts.processors.synthesize.render_cache import MemoryTier, RenderCache
from streamtts.processors.synthesize.renderer import SegmentRenderer
from streamtts.processors.synthesize.synthesizer import Synthesizer
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.sinks.subscriber import AudioSubscriber
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]


@pytest.fixture
def cache_prefix() -> str:
    return f"render-cache-test-{uuid.uuid4().hex[:8]}/"


@pytest.fixture
async def cached_pipeline(kafka_settings, services, speech_renderer, cache_prefix):  # type: ignore[no-untyped-def]
    """All stages in this process, the synthesize stage with a two-tier render cache."""
    from streamtts.worker import Worker

    cache = RenderCache(MemoryTier(64 << 20), BlobTier(services.s3, prefix=cache_prefix))
    renderer = SegmentRenderer(Synthesizer(speech_renderer.synth.registry, cache=cache))
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=services.s3),
        PipelineSettings.of(synth_threads=2, session_timeout_s=6.0),
        renderer=renderer,
    )
    await worker.start()
    try:
        yield cache
    finally:
        await worker.stop()
        renderer.close()


async def _run(kafka: KafkaSettings, topics: TopicNames, *requests: TTSRequest) -> dict:  # type: ignore[type-arg]
    async with AudioSubscriber(kafka, topics.audio, request_ids=[r.request_id for r in requests]) as sub:
        async with RequestProducer(kafka) as producer:
            for r in requests:
                await producer.submit(r)
        return {a.request_id: a async for a in sub.completed(timeout_s=180)}


async def test_repeated_speech_is_served_from_the_cache_byte_identical(
    cached_pipeline: RenderCache,
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    cache_prefix: str,
) -> None:
    text = "您好，请问有什么可以帮您？感谢您的耐心等待。"
    first = TTSRequest.new(text, voice="jm_kumo", format="pcm")
    [cold] = (await _run(kafka_settings, topics, first)).values()
    again = TTSRequest.new(text, voice="jm_kumo", format="pcm")
    bypass = TTSRequest.new(text, voice="jm_kumo", format="pcm", cache=False)
    done = await _run(kafka_settings, topics, again, bypass)
    warm, off = done[again.request_id], done[bypass.request_id]
    assert {c.cache for c in cold.chunks} == {"miss"}
    assert {c.cache for c in warm.chunks} == {"hit"}
    assert {c.cache for c in off.chunks} == {"off"}
    assert warm.data == cold.data  # the same bytes, without running the model again
    assert off.data == cold.data  # Kokoro is deterministic: the cache changes nothing
    # Another worker (its own memory tier) finds the renders in the shared tier.
    cached_pipeline.flush()
    other = RenderCache(MemoryTier(64 << 20), BlobTier(services.s3, prefix=cache_prefix))
    loaded = other.preload(100)
    assert loaded == len(cold.chunks) and other.stats["hits"]["memory"] == 0
    assert cached_pipeline.stats["bytes"]["shared"] > 0


async def test_a_cached_first_span_leaves_while_the_worker_is_busy(
    cached_pipeline: RenderCache, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    greeting = "Thank you for calling, how can I help you today?"
    await _run(kafka_settings, topics, TTSRequest.new(greeting, voice="jm_kumo", format="mp3"))  # warm it
    long = TTSRequest.new(
        " ".join(
            f"This is sentence number {i} of a long answer that keeps the model busy." for i in range(6)
        ),
        voice="jm_kumo",
        format="mp3",
        priority="interactive",  # the short pool: the same synthesize worker and queue
    )
    cached = TTSRequest.new(greeting + " I will look that up for you.", voice="jm_kumo", format="mp3")
    ids = [long.request_id, cached.request_id]
    async with AudioSubscriber(kafka_settings, topics.audio, request_ids=ids) as sub:
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(long)
            await sub.wait_first_chunk(long.request_id, timeout_s=120)  # the model is on sentence 2 now
            submitted = datetime.now(UTC)
            await producer.submit(cached)
            first_cached = await sub.wait_first_chunk(cached.request_id, timeout_s=60)
        done = {a.request_id: a async for a in sub.completed(timeout_s=240)}
    assert set(done) == set(ids)
    hit = done[cached.request_id].chunks[0]
    assert hit.cache == "hit"
    # The cached span did not wait for the inference that was running when it came in: it
    # was encoded before the long request's next chunk (the output of that inference).
    next_long = min(c.encoded_at for c in done[long.request_id].chunks if c.encoded_at > submitted)
    assert hit.encoded_at < next_long
    assert first_cached < done[long.request_id].completed_at
