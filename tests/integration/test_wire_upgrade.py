"""A rolling upgrade of the wire format on real Kafka + MinIO, and the audio as kcat sees it.

v1 (JSON envelope) and CloudEvents binary-mode records go through the same topics and the same
stages mid-stream, as a rolling restart would leave them: the PCM of one request arrives in
both formats, and the encode stage is restarted from `wire_format = v1` to `cloudevents`
between a request's segments. Every request completes, its chunks reach the subscriber once
each, in order, and its result has the audio's full duration. Requests written entirely in
the new format are read off their reply topic the way `kcat -C -t TOPIC -f '%s'` reads it
(the values back to back, nothing else), and that file decodes with ffmpeg to the result's
duration (FFmpeg's demuxers, through PyAV): mp3, opus, headerless PCM at its rate, and mu-law.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from aiokafka.admin import NewTopic
from cloudevents.core.bindings.kafka import KafkaMessage, from_binary
from cloudevents.core.formats.json import JSONFormat

from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_admin, make_producer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import PcmChunk, RequestContext, TTSRequest, wire
from streamtts.sinks.subscriber import AudioSubscriber
from streamtts.worker import Worker
from tests.factories import pcm_chunk
from tests.helpers import decoded_seconds, topic_records
from tests.services import Services

pytestmark = pytest.mark.integration

FORMATS = ("mp3", "opus", "pcm", "mulaw")
SEGMENTS = 3


def _pcm(request: TTSRequest, seq: int) -> PcmChunk:
    rate = RequestContext.of(request).sample_rate
    n = int(rate * (0.6 + 0.2 * seq))  # 0.6, 0.8, 1.0 s: each segment its own length
    tone = np.sin(np.arange(n) * 2 * np.pi * 330 / rate) * 8000
    return pcm_chunk(request, seq, SEGMENTS, pcm=tone, sample_rate=rate)


async def _send(producer, topic: str, chunk: PcmChunk, fmt: wire.WireFormat) -> None:  # type: ignore[no-untyped-def]
    record = wire.encode(chunk, fmt)
    await producer.send_and_wait(topic, record.value, key=chunk.request_id.encode(), headers=record.headers)


def _worker(kafka: KafkaSettings, services: Services, fmt: wire.WireFormat) -> Worker:
    pipeline = PipelineSettings.of(
        wire_format=fmt, session_timeout_s=6.0, storage_retries=2, render_cache=False
    )
    return Worker(["encode", "sink"], Settings(kafka=kafka, s3=services.s3), pipeline, ops=False)


async def _audio_records(kafka: KafkaSettings, topic: str, count: int) -> list:  # type: ignore[type-arg]
    """The first `count` records of `topic` (waits for them)."""
    return await topic_records(kafka, topic, count, timeout_s=60)


async def test_mixed_formats_mid_stream_lose_nothing_and_reply_topics_are_playable_raw(
    kafka_settings: KafkaSettings, topics: TopicNames, services: Services, tmp_path: Path
) -> None:
    reply = f"{kafka_settings.topic_prefix}tts.reply.wire"
    admin = make_admin(kafka_settings)
    await admin.start()
    try:
        await admin.create_topics([NewTopic(reply, num_partitions=1, replication_factor=1)])
    finally:
        await admin.close()

    def request(fmt: str, **delivery: object) -> TTSRequest:
        return TTSRequest.new("One. Two. Three.", language="en", format=fmt, tenant="wire", delivery=delivery)

    mixed = [request(fmt) for fmt in FORMATS]
    raw = [request(fmt, reply_topic=reply, chunks=False) for fmt in FORMATS]
    ids = [r.request_id for r in mixed + raw]
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        async with (
            ResultWaiter(kafka_settings) as waiter,
            AudioSubscriber(kafka_settings, topics.audio, request_ids=[r.request_id for r in mixed]) as sub,
        ):
            # 1. An old encode stage (v1) takes each mixed request's first segment (v1 PCM).
            old = _worker(kafka_settings, services, "v1")
            await old.start()
            try:
                for req in mixed:
                    await _send(producer, topics.pcm, _pcm(req, 0), "v1")
                first = await _audio_records(kafka_settings, topics.audio, len(mixed))
            finally:
                await old.stop()
            assert all(not wire.is_binary(r.headers) for r in first), "the old stage wrote v1"
            # 2. The upgraded stage (cloudevents) takes the rest; an old synthesize worker is
            #    still writing v1 PCM beside a new one.
            new = _worker(kafka_settings, services, "cloudevents")
            await new.start()
            try:
                for req in mixed:
                    await _send(producer, topics.pcm, _pcm(req, 1), "cloudevents")
                    await _send(producer, topics.pcm, _pcm(req, 2), "v1")
                for i, req in enumerate(raw):
                    for seq in range(SEGMENTS):
                        await _send(
                            producer, topics.pcm, _pcm(req, seq), ("v1", "cloudevents")[(i + seq) % 2]
                        )
                received = {a.request_id: a async for a in sub.completed(timeout_s=90)}
                results = await waiter.wait(ids, timeout_s=90)
                # Read while the stage still runs: results come from the sink, which reads the
                # PCM itself, so on a loaded machine encode may still owe the raw replies.
                replies = await _audio_records(kafka_settings, reply, len(raw) * SEGMENTS)
            finally:
                await new.stop()
        audio_topic = await _audio_records(kafka_settings, topics.audio, len(mixed) * SEGMENTS)
    finally:
        await producer.stop()

    # Nothing lost, nothing duplicated, every result complete with all of its audio.
    expected_ms = sum(600 + 200 * s for s in range(SEGMENTS))
    for req in mixed + raw:
        result = results[req.request_id]
        assert result.status == "completed", (req.format, result.error)
        assert result.duration_ms == pytest.approx(expected_ms, abs=1), req.format
        assert result.chunks == SEGMENTS
    assert set(received) == {r.request_id for r in mixed}
    for req in mixed:
        chunks = received[req.request_id].chunks
        assert [(c.seq, c.part) for c in chunks] == [(s, 0) for s in range(SEGMENTS)], req.format
    formats = [wire.is_binary(r.headers) for r in audio_topic]
    assert formats.count(False) == len(mixed) and formats.count(True) == len(mixed) * (SEGMENTS - 1)

    # The new records are CloudEvents to the SDK, not only to our reader.
    for record in replies:
        event = from_binary(
            KafkaMessage(headers=dict(record.headers), key=record.key, value=record.value), JSONFormat()
        )
        assert event.get_type() == "dev.streamtts.audio_chunk.v1"  # type: ignore[attr-defined]
        assert event.get_subject() == record.key.decode()  # type: ignore[attr-defined]

    # kcat -C -t REPLY -f '%s' (one request's values, back to back) is a playable file.
    for req in raw:
        path = tmp_path / f"{req.request_id}.{req.format}"
        path.write_bytes(b"".join(r.value for r in replies if r.key == req.request_id.encode()))
        rate = RequestContext.of(req).sample_rate
        seconds = decoded_seconds(path, req.format, rate)
        # mp3: one stream, so one encoder delay (1105 samples) and < 1 frame (576) of padding
        # however many chunks (chunks encoded alone add both at every boundary); opus: each
        # chunk is its own Ogg link.
        tolerance = {"mp3": (1105 + 576) / rate, "opus": 0.03 + 0.06 * SEGMENTS}.get(req.format, 0.03)
        extra = seconds - results[req.request_id].duration_ms / 1000
        assert (0 <= extra <= tolerance) if req.format == "mp3" else abs(extra) <= tolerance, (
            req.format,
            seconds,
        )
