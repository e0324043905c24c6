"""Barge-in on real Kafka: a cancel stops a long request's audio at once, frees the worker,
and the result says what was spoken; a cancel that races completion, or comes from another
tenant, changes nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultTimeout, ResultWaiter
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk, TTSRequest
from streamtts.sinks.subscriber import AudioSubscriber

pytestmark = [pytest.mark.integration, pytest.mark.model]

LONG = " ".join(
    f"This is sentence number {i} of a long answer that the caller will interrupt." for i in range(14)
)


async def test_a_cancel_stops_the_audio_and_reports_what_was_spoken(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    request = TTSRequest.new(LONG, voice="en_joe", format="pcm", tenant="acme", timestamps=True)
    nxt = TTSRequest.new(
        "And the next caller is served at once.", voice="en_joe", format="pcm", tenant="acme"
    )
    chunks: list[AudioChunk] = []
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=[request.request_id]) as sub,
    ):
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(request)
            await sub.wait_first_chunk(request.request_id, timeout_s=120)
            cancelled_at = datetime.now(UTC)
            await producer.cancel(request.request_id, "acme")
            await producer.submit(nxt)
        [audio] = [a async for a in sub.completed(timeout_s=120)]
        results = await waiter.wait([request.request_id, nxt.request_id], timeout_s=120)
    chunks = audio.chunks
    spoken = [c for c in chunks if not c.cancelled]
    markers = [c for c in chunks if c.cancelled]
    # The stream still ends properly: every segment is there, the rest as empty markers.
    assert [c.seq for c in chunks if c.last_part] == list(range(chunks[0].total)) and chunks[-1].last
    assert markers and all(c.audio == b"" for c in markers)
    assert len(spoken) < chunks[0].total, "the cancel skipped the remaining segments"
    # No audio left the pipeline more than 300 ms after the cancel.
    late = [
        (c.seq, (c.encoded_at - cancelled_at).total_seconds()) for c in spoken if c.encoded_at > cancelled_at
    ]
    assert all(delay <= 0.3 for _, delay in late), late
    result = results[request.request_id]
    print(f"spoken chunks {len(spoken)}, markers {len(markers)}, published after the cancel {late}")
    assert result.status == "cancelled"
    heard_ms = sum(c.duration_ms for c in spoken)
    assert result.spoken_ms == pytest.approx(heard_ms, abs=1.0) and result.duration_ms == pytest.approx(
        heard_ms, abs=1.0
    )
    assert result.words_spoken and all(w.start_ms < heard_ms for w in result.words_spoken)
    assert [w.text for w in result.words_spoken][:4] == ["This", "is", "sentence", "number"]
    assert result.storage is not None  # keep_on_cancel (default): what was spoken is stored
    # The worker went on with the next request.
    assert results[nxt.request_id].status == "completed"


async def test_a_cancel_after_completion_or_from_another_tenant_changes_nothing(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    done = TTSRequest.new("Short and finished.", voice="en_joe", format="pcm", tenant="acme")
    other = TTSRequest.new(
        "Two sentences here. Nobody else may stop them.", voice="en_joe", format="pcm", tenant="acme"
    )
    async with ResultWaiter(kafka_settings) as waiter:
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(done)
            first = (await waiter.wait([done.request_id], timeout_s=120))[done.request_id]
            assert first.status == "completed"
            # Racing completion: the request is finished; the cancel is a no-op.
            await producer.cancel(done.request_id, "acme")
            # Another tenant's cancel for a request in flight matches nothing.
            await producer.submit(other)
            await producer.cancel(other.request_id, "globex")
            second = (await waiter.wait([other.request_id], timeout_s=120))[other.request_id]
        assert second.status == "completed" and second.spoken_ms is None
        with pytest.raises(ResultTimeout):  # no second result for the finished request
            await waiter.wait([done.request_id], timeout_s=3)
