"""Word timestamps end to end on real Kafka and MinIO: chunks carry their words, the sink
stores WebVTT/SRT/JSON next to the audio, and a worker that takes over mid-request recovers
where the request's audio stands from what was already published."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import orjson
import pytest
import webvtt
from minio import Minio

from streamtts.processors.synthesize.timeline import RequestTimeline, published_audio_ms
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import PcmChunk, RequestContext, Segment, TTSRequest, WordTiming
from streamtts.sinks.subscriber import AudioSubscriber
from tests.services import Services

TEXT = "Hello, and thank you for calling. 您好，您的订单100元已经发货。Your code is 4821."


def _s3(services: Services) -> Minio:
    s = services.s3
    return Minio(s.endpoint, access_key=s.access_key, secret_key=s.secret_key, secure=s.secure)


@pytest.mark.integration
@pytest.mark.model
async def test_chunks_carry_words_and_captions_are_stored_beside_the_audio(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    timed = TTSRequest.new(TEXT, voice="auto", format="mp3", tenant="acme", timestamps=True)
    plain = TTSRequest.new(TEXT, voice="auto", format="mp3", tenant="acme")
    ids = [timed.request_id, plain.request_id]
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=ids) as sub,
    ):
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many([timed, plain])
        received = {a.request_id: a async for a in sub.completed(timeout_s=240)}
        results = await waiter.wait(ids, timeout_s=60)
    audio, result = received[timed.request_id], results[timed.request_id]
    # The plain request's chunks and result carry nothing new.
    assert all(c.words is None and c.offset_ms is None for c in received[plain.request_id].chunks)
    assert results[plain.request_id].captions is None and results[plain.request_id].words is None
    # Chunk offsets are where each chunk starts in the request's audio, from a plain consumer.
    position = 0.0
    live: list[WordTiming] = []
    for chunk in audio.chunks:
        assert chunk.offset_ms is not None and abs(chunk.offset_ms - position) < 1.0
        assert chunk.words is not None
        for w in chunk.words:  # a chunk holds the words that start in it
            assert position - 1 <= w.start_ms < position + chunk.duration_ms + 1
        live.extend(chunk.words)
        position += chunk.duration_ms
    assert all(w.text == TEXT[w.char_start : w.char_end] for w in live)
    assert [w.text for w in live][:6] == ["Hello", "and", "thank", "you", "for", "calling"]
    assert "100元" in [w.text for w in live] and "4821" in [w.text for w in live]
    starts = [w.start_ms for w in live]
    assert starts == sorted(starts) and live[-1].end_ms <= result.duration_ms + 1
    # The result lists the words and points at the captions, stored under the audio's key.
    assert result.words == live
    assert result.captions is not None and result.storage is not None
    stem = result.storage.key.rsplit(".", 1)[0]
    assert result.captions.vtt.key == f"{stem}.vtt" and result.captions.srt.key == f"{stem}.srt"
    s3 = _s3(services)

    def read(key: str) -> bytes:
        resp = s3.get_object(result.storage.bucket, key)  # type: ignore[union-attr]
        try:
            return resp.read()
        finally:
            resp.close()

    vtt = webvtt.from_string(read(result.captions.vtt.key).decode(), strict=True)
    assert len(vtt) >= 3 and vtt[0].raw_text.startswith("Hello, and thank you for calling.")
    assert any("100元" in c.raw_text for c in vtt) and vtt[-1].raw_text.endswith("4821.")
    assert vtt[0].start == f"00:00:00.{round(live[0].start_ms):03d}"
    stored_words = [WordTiming(**w) for w in orjson.loads(read(result.captions.words.key))]
    assert stored_words == live
    assert b"-->" in read(result.captions.srt.key)
    # The subscriber library rebuilds the same words from the chunks.
    assert audio.words == live


@pytest.mark.integration
async def test_a_worker_taking_over_recovers_the_timeline_from_published_chunks(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    """Segments 0 and 1 were published by a worker that then died; its successor sees
    segment 2 first and must know that it starts after 0 and 1 (and their parts)."""
    request = TTSRequest.new("x", tenant="acme", timestamps=True, request_id=f"tl-{uuid.uuid4().hex[:8]}")
    ctx = RequestContext.of(request)
    now = datetime.now(UTC)

    def pcm(seq: int, part: int, last_part: bool, ms: int) -> PcmChunk:
        return PcmChunk(
            request_id=request.request_id,
            seq=seq,
            total=3,
            part=part,
            last_part=last_part,
            last=False,
            lang="en",
            voice_used="en_joe",
            sample_rate=16000,
            pcm=b"\0\0" * (16 * ms),
            offset_ms=0.0,
            words=[],
            request=ctx,
            synthesized_at=now,
        )

    segment = Segment(
        request_id=request.request_id,
        seq=2,
        total=3,
        last=True,
        text="x",
        lang="en",
        request=ctx,
        segmented_at=now,
    )
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        key = request.request_id.encode()
        other = b"someone-else"
        await producer.send_and_wait(topics.pcm, pcm(0, 0, False, 500).to_bytes(), key=key)
        await producer.send_and_wait(topics.pcm, pcm(0, 1, True, 300).to_bytes(), key=key)
        # Another request on the same topic, and a redelivered duplicate: neither counts.
        await producer.send_and_wait(topics.pcm, pcm(1, 0, True, 999).to_bytes(), key=other)
        # Not all of segment 1 is there yet: unknown, not a wrong number.
        assert await published_audio_ms(kafka_settings, topics.pcm, segment, request.created_at) is None
        await producer.send_and_wait(topics.pcm, pcm(1, 0, True, 700).to_bytes(), key=key)
        await producer.send_and_wait(topics.pcm, pcm(0, 1, True, 300).to_bytes(), key=key)
    finally:
        await producer.stop()
    recovered = await published_audio_ms(kafka_settings, topics.pcm, segment, request.created_at)
    assert recovered == pytest.approx(1500.0)
    # The in-memory timeline knows only what this worker published itself.
    timeline = RequestTimeline()
    assert timeline.start_of(segment) is None
    first = segment.model_copy(update={"seq": 0, "last": False})
    assert timeline.start_of(first) == 0.0
    timeline.advance(first, 0.0, 800.0)
    assert timeline.start_of(segment.model_copy(update={"seq": 1, "last": False})) == 800.0
    assert timeline.start_of(segment) is None  # seq 2 before seq 1 was seen: not guessed
