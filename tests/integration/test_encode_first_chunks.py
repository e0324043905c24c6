"""The encode stage on real Kafka: a request's first chunk does not queue behind other
requests' later chunks, each request's chunks leave in order, and a malformed record in the
middle goes to the dead-letter topic at once without holding anything up.

Everything is on one partition of `tts.pcm` and written before the stage starts, so the
stage finds request A's six 5-second chunks ahead of B's and C's first chunks: read one at a
time (the stage before this change), B and C would be encoded after all of A's audio.
"""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings, PipelineSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk, PcmChunk, RequestContext, TTSRequest, wire
from streamtts.worker import Worker
from tests.factories import pcm_chunk
from tests.helpers import topic_records
from tests.services import Services

pytestmark = pytest.mark.integration

LONG = 6
"""Request A's chunks, 5 s of audio each (the longest chunk the synthesize stage writes)."""


def _chunk(request: TTSRequest, seq: int, total: int, seconds: float) -> PcmChunk:
    rate = RequestContext.of(request).sample_rate
    # Noise: the mp3 encoder's worst case, the longest encode.
    noise = np.random.default_rng(seq).normal(0, 3000, int(rate * seconds)).clip(-32768, 32767)
    return pcm_chunk(request, seq, total, pcm=noise, sample_rate=rate)


async def test_first_chunks_overtake_other_requests_later_chunks_and_each_request_keeps_its_order(
    kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    def request() -> TTSRequest:
        return TTSRequest.new("Hello there.", language="en", format="mp3", tenant="ahead")

    a, b, c = request(), request(), request()
    pcm = [_chunk(a, seq, LONG, 5.0) for seq in range(LONG)]
    pcm += [_chunk(b, 0, 2, 0.8), _chunk(c, 0, 1, 0.8), _chunk(b, 1, 2, 0.8)]
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        for i, chunk in enumerate(pcm):
            record = wire.encode(chunk, "cloudevents")
            key = chunk.request_id.encode()
            await producer.send_and_wait(
                topics.pcm, record.value, key=key, headers=record.headers, partition=0
            )
            if i == 2:  # a malformed record amid A's chunks
                await producer.send_and_wait(topics.pcm, b"\x00not a chunk", key=b"broken", partition=0)
    finally:
        await producer.stop()

    pipeline = PipelineSettings.of(session_timeout_s=6.0, render_cache=False)
    worker = Worker(["encode"], Settings(kafka=kafka_settings, s3=services.s3), pipeline, ops=False)
    await worker.start()
    try:
        audio = [
            wire.decode(AudioChunk, r.value, r.headers)
            for r in await topic_records(kafka_settings, topics.audio, len(pcm), timeout_s=90)
        ]
        dead = await topic_records(kafka_settings, topics.dlq("encode"), 1, timeout_s=90)
    finally:
        await worker.stop()

    order = [(chunk.request_id, chunk.seq) for chunk in sorted(audio, key=lambda ch: ch.encoded_at)]
    assert sorted(order) == sorted((ch.request_id, ch.seq) for ch in pcm), "each chunk once"
    at = {key: i for i, key in enumerate(order)}
    # B's and C's first audio left while A's audio was still being encoded, not after all of it.
    assert at[(b.request_id, 0)] < at[(a.request_id, LONG - 1)], order
    assert at[(c.request_id, 0)] < at[(a.request_id, LONG - 1)], order
    # Each request's chunks in order: what its subscriber plays.
    assert [s for rid, s in order if rid == a.request_id] == list(range(LONG))
    assert at[(b.request_id, 0)] < at[(b.request_id, 1)]
    assert dead[0].key == b"broken"
