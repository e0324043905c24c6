"""A streamed utterance (an LLM's reply, token by token) is one request downstream: spoken
from its first clause on, before the text is complete; one run of seqs ending in `last`; word
timestamps continuous over the whole text and mapped back to it; bounded and closed when its
writer vanishes. In memory (the real stages' handlers and model) and on the real broker."""

from __future__ import annotations

import asyncio
import io
import itertools
import re
import sys
import uuid
from collections.abc import Callable
from typing import Literal

import av
import numpy as np
import pytest
from aiokafka import AIOKafkaConsumer
from minio import Minio

from streamtts.bench.asr import WhisperASR
from streamtts.bench.speech_scoring import score
from streamtts.processors.in_memory import InMemoryTopology
from streamtts.processors.segment.utterances import Utterance
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import attach_at_end, make_consumer, partitions_of
from streamtts.runtime.loop_record import LoopRecord
from streamtts.runtime.pipeline_settings import DeliverySettings, PipelineSettings, TextSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, PcmChunk, Segment, TextDelta, TTSRequest, wire
from streamtts.schemas.dead_letter import DeadLetter
from streamtts.schemas.headers import header_pairs
from streamtts.schemas.request import MAX_SEGMENTS
from streamtts.sinks.subscriber import AudioSubscriber
from streamtts.worker import Worker
from tests.helpers import cli_env

pytestmark = [pytest.mark.model]

REPLY = (
    "Thanks for calling, I can help with that. Your order shipped on Monday, "
    "and it should arrive by Thursday. Is there anything else?"
)


IDLE_S = 3.0


@pytest.fixture
def pipeline_settings() -> PipelineSettings:
    """The suite's settings, with a short idle time (an abandoned utterance ends in seconds)."""
    return PipelineSettings.of(
        synth_threads=2, session_timeout_s=6.0, storage_retries=2, stream_idle_s=IDLE_S
    )


def tokens(text: str) -> list[str]:
    """Roughly as an LLM streams English: a word with its leading space, punctuation apart."""
    return re.findall(r"\s*[\w']+|\s*[^\w\s]", text)


def opener(rid: str, **kw: object) -> TTSRequest:
    fields: dict[str, object] = {
        "request_id": rid,
        "voice": "en_joe",
        "language": "en",
        "format": "pcm",
        "cache": False,
        "timestamps": True,
        "stream": {"max_buffer_delay_ms": 0},
    }
    fields.update(kw)
    return TTSRequest.new("", **fields)


def segments_of(memory: InMemoryTopology, rid: str) -> list[Segment]:
    return [
        wire.decode(Segment, r.value, header_pairs(r.headers))
        for r in memory.records(memory.topics.segments, rid)
    ]


async def test_an_utterance_streamed_token_by_token_is_one_request_spoken_early(speech_renderer) -> None:
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    async with InMemoryTopology(speech_renderer) as memory:
        await memory.submit(opener(rid))
        await memory.run()
        sent = ""
        first_spoken_at: int | None = None
        for token in tokens(REPLY):
            await memory.submit_delta(TextDelta(request_id=rid, delta=token))
            sent += token
            await memory.run()
            if first_spoken_at is None and memory.pcm(rid):
                first_spoken_at = len(sent)
        assert first_spoken_at is not None, "nothing was spoken before the end"
        # The first clause ("Thanks for calling,") is spoken once the next word shows the
        # comma is one, long before the first sentence ends.
        assert first_spoken_at <= len("Thanks for calling, I"), sent[:first_spoken_at]
        await memory.submit_delta(TextDelta(request_id=rid, end=True))
        await memory.run()

        segments = segments_of(memory, rid)
        pcm: list[PcmChunk] = memory.pcm(rid)
        utterance_segments = memory.records(memory.topics.utterances, rid)
        dead = [r for stage in memory.stages for r in memory.records(memory.topics.dlq(stage.name), rid)]
    assert not dead, [DeadLetter.from_record(r.key, r.value, r.headers).reason for r in dead]
    # One request downstream: seqs 0..n-1, `last` only on the final one, which knows the total.
    seqs = [s.seq for s in segments]
    assert seqs == list(range(len(segments))) and len(segments) >= 3
    assert [s.last for s in segments] == [False] * (len(segments) - 1) + [True]
    assert segments[-1].total == len(segments)
    assert all(s.total == MAX_SEGMENTS for s in segments[:-1])
    # Every word of the text is spoken, once, in order: the spans' texts rebuild the reply.
    spoken = " ".join(s.text for s in segments if s.text)
    assert re.sub(r"\s+", " ", spoken).strip() == REPLY
    # Word timestamps are continuous over the whole utterance and mapped back to its text.
    words = [w for c in pcm for w in (c.words or [])]
    assert len(words) >= 20
    for w in words:
        assert REPLY[w.char_start : w.char_end] == w.text, w
    assert [w.char_start for w in words] == sorted(w.char_start for w in words)
    assert all(b.start_ms >= a.start_ms for a, b in itertools.pairwise(words))
    assert sum(len(c.pcm) for c in pcm) / 2 / 22050 > 4.0  # real speech, seconds of it
    # The state was kept on the changelog after every change; its last says it ended.
    last_state = Utterance.from_bytes(utterance_segments[-1].value)
    assert last_state.ended == "client" and not last_state.held and last_state.seq == len(segments)


async def test_deltas_for_no_open_utterance_and_past_the_bounds_are_dead_lettered(speech_renderer) -> None:
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    async with InMemoryTopology(speech_renderer) as memory:
        await memory.submit_delta(TextDelta(request_id=rid, delta="Hello there. "))
        await memory.run()
        letters = [
            DeadLetter.from_record(r.key, r.value, r.headers).reason
            for r in memory.records(memory.topics.dlq("segment"), rid)
        ]
        assert letters == ["unknown_utterance"]


async def _first_audio(kafka: KafkaSettings, topic: str, rid: str, consumer: AIOKafkaConsumer) -> float:
    """When (loop time) the first audio chunk of `rid` is readable on `topic`."""
    key = rid.encode()
    loop = asyncio.get_running_loop()
    while True:
        batch = await consumer.getmany(timeout_ms=200)
        for records in batch.values():
            if any(r.key == key for r in records):
                return loop.time()


@pytest.mark.integration
async def test_on_kafka_the_first_clause_is_heard_before_the_reply_is_written(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames, services
) -> None:
    """Tokens as an LLM writes them: audio arrives while the first sentence is still being
    written (its words come slowly, 4/s, so a stalled CI machine cannot pass or fail this by
    timing; the rest at 25/s), and the whole reply is one result, one stored file, one caption
    track."""
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    reply = REPLY + " We are open every day from nine to five, and our team is happy to help you."
    consumer = make_consumer(kafka_settings, group_id=None)
    await consumer.start()
    try:
        await attach_at_end(consumer, await partitions_of(kafka_settings, [topics.audio]))
        async with (
            ResultWaiter(kafka_settings, topics) as waiter,
            RequestProducer(kafka_settings, topics) as producer,
        ):
            heard = asyncio.create_task(_first_audio(kafka_settings, topics.audio, rid, consumer))
            await producer.submit(opener(rid, format="mp3", stream={"max_buffer_delay_ms": 300}))
            first_sentence = len(tokens(REPLY.split(". ")[0] + "."))
            heard_after: int | None = None
            for i, token in enumerate(tokens(reply)):
                await producer.send_delta(TextDelta(request_id=rid, delta=token), wait=False)
                await asyncio.sleep(0.25 if i < first_sentence else 0.04)  # the writer's pace
                if heard_after is None and heard.done():
                    heard_after = i + 1
            await producer.send_delta(TextDelta(request_id=rid, end=True))
            await asyncio.wait_for(heard, 60)
            results = await waiter.wait([rid], timeout_s=120)
    finally:
        await consumer.stop()
    result = results[rid]
    assert heard_after is not None and heard_after < first_sentence, (
        f"first audio after token {heard_after}; the first sentence has {first_sentence}"
    )
    assert result.status == "completed", result.error
    assert result.ended == "client"  # the writer's `end` closed it (not the idle timer)
    assert result.words is not None
    assert [w.text for w in result.words][:3] == ["Thanks", "for", "calling"]
    for w in result.words:
        assert reply[w.char_start : w.char_end] == w.text
    assert result.captions is not None and result.storage is not None
    # The stored file is one mp3 of the whole reply: decoded by FFmpeg to the result's length.
    s3 = Minio(
        services.s3.endpoint, services.s3.access_key, services.s3.secret_key, secure=services.s3.secure
    )
    body = s3.get_object(result.storage.bucket, result.storage.key).read()
    with av.open(io.BytesIO(body), mode="r") as container:
        samples = sum(int(f.samples) for f in container.decode(audio=0))
    assert abs(samples / result.sample_rate * 1000 - result.duration_ms) < 30
    assert result.duration_ms > 8000  # the whole reply, not its first sentence


@pytest.mark.integration
async def test_on_kafka_an_abandoned_utterance_ends_with_a_clear_result(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    """The writer vanishes mid-sentence: after `stream_idle_s` the utterance is ended, what
    it held is spoken, and its result says so (`completed`, `ended: idle`)."""
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    async with (
        ResultWaiter(kafka_settings, topics) as waiter,
        RequestProducer(kafka_settings, topics) as producer,
    ):
        await producer.submit(opener(rid, format="wav"))
        for token in tokens("Your order shipped on Monday, and it should arrive by"):
            await producer.send_delta(TextDelta(request_id=rid, delta=token), wait=False)
        await producer.flush()
        results = await waiter.wait([rid], timeout_s=IDLE_S + 60)
    result = results[rid]
    assert (result.status, result.ended) == ("completed", "idle"), result
    assert result.words is not None and [w.text for w in result.words][-2:] == ["arrive", "by"]
    assert result.duration_ms > 1500


@pytest.mark.integration
@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_segment_worker_replaced_mid_utterance_loses_no_word_and_says_none_twice(
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services,
    guarantee: Literal["at_least_once", "exactly_once"],
) -> None:
    """The open utterance's state travels on its changelog: a new segment worker that takes
    the partition mid-utterance goes on where the last one stopped (under exactly-once the
    state, the segments and the offsets commit in one transaction)."""
    pipeline_settings = PipelineSettings(delivery=DeliverySettings(processing_guarantee=guarantee))
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    words = tokens(REPLY)
    half = len(words) // 2
    settings = Settings(kafka=kafka_settings, s3=services.s3)
    consumer = make_consumer(kafka_settings, group_id=None)
    await consumer.start()
    try:
        await attach_at_end(consumer, await partitions_of(kafka_settings, [topics.segments]))
        async with RequestProducer(kafka_settings, topics) as producer:
            first = Worker(["segment"], settings, pipeline_settings, ops=False)
            await first.start()
            try:
                await producer.submit(opener(rid))
                for token in words[:half]:
                    await producer.send_delta(TextDelta(request_id=rid, delta=token))
                segments = await _segments_until(consumer, rid, lambda got: len(got) >= 1)
            finally:
                await first.stop()
            for token in words[half:]:
                await producer.send_delta(TextDelta(request_id=rid, delta=token))
            await producer.send_delta(TextDelta(request_id=rid, end=True))
            second = Worker(["segment"], settings, pipeline_settings, ops=False)
            await second.start()
            try:
                segments = await _segments_until(
                    consumer, rid, lambda got: any(s.last for s in got), segments
                )
            finally:
                await second.stop()
    finally:
        await consumer.stop()
    assert [s.seq for s in segments] == list(range(len(segments)))
    spoken = " ".join(s.text for s in segments if s.text)
    assert re.sub(r"\s+", " ", spoken).strip() == REPLY


async def _records_of(kafka: KafkaSettings, topic: str, rid: str) -> list[bytes]:
    """Every committed record of `rid` on `topic`, from its beginning to its end now."""
    from streamtts.runtime.snapshot import snapshot

    return [r.value async for r in snapshot(kafka, topic) if r.key == rid.encode()]


async def _segments_until(
    consumer: AIOKafkaConsumer,
    rid: str,
    done: Callable[[list[Segment]], bool],
    got: list[Segment] | None = None,
) -> list[Segment]:
    got = list(got or [])
    key = rid.encode()
    async with asyncio.timeout(60):
        while not done(got):
            batch = await consumer.getmany(timeout_ms=500)
            for records in batch.values():
                got += [wire.decode(Segment, r.value, r.headers) for r in records if r.key == key]
    return got


async def test_the_timer_speaks_whole_words_and_an_abandoned_utterance_is_ended(speech_renderer) -> None:
    """No boundary comes: after `max_buffer_delay_ms` what is held is spoken up to its last
    whole word; no delta comes at all: after `stream_idle_s` the utterance ends by itself."""
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    ended = asyncio.Event()
    spoken = asyncio.Event()

    def on_record(record: LoopRecord) -> None:
        if record.topic.endswith("tts.segments") and record.key == rid.encode():
            spoken.set()
            if wire.decode(Segment, record.value, header_pairs(record.headers)).last:
                ended.set()

    pipeline = PipelineSettings(text=TextSettings(stream_idle_s=1.0))
    async with InMemoryTopology(speech_renderer, pipeline, on_record=on_record) as memory:
        await memory.submit(opener(rid, stream={"max_buffer_delay_ms": 100}))
        await memory.submit_delta(TextDelta(request_id=rid, delta="hello there how are you tod"))
        await memory.run()
        assert not spoken.is_set()  # no boundary, no timer yet: held
        async with asyncio.timeout(10):
            await spoken.wait()  # the timer's cut
        first = segments_of(memory, rid)
        assert [s.text for s in first] == ["hello there how are you"], first
        async with asyncio.timeout(10):
            await ended.wait()  # the idle timer's end
        await memory.run()
        segments = segments_of(memory, rid)
        assert segments[-1].last and segments[-1].total == len(segments)
        assert " ".join(s.text for s in segments if s.text) == "hello there how are you tod"
        assert Utterance.from_bytes(memory.records(memory.topics.utterances, rid)[-1].value).ended == "idle"
        assert memory.pcm(rid)[-1].last


@pytest.mark.integration
async def test_a_sigkilled_segment_worker_mid_utterance_under_exactly_once_loses_no_word(
    kafka_settings: KafkaSettings, topics: TopicNames, services, speech_renderer
) -> None:
    """A segment worker process is SIGKILLed mid-utterance (no shutdown, no commit); the next
    owner aborts its open transaction, reads the utterance's committed state back and goes on:
    a read-committed reader sees each span once, seqs without a gap, the whole reply; the
    rest of the pipeline makes one result, and its audio, transcribed, is the reply (no word
    lost, none said twice)."""
    rid = f"utt-{uuid.uuid4().hex[:8]}"
    words = tokens(REPLY)
    half = len(words) // 2
    consumer = make_consumer(kafka_settings, group_id=None)  # read_committed
    await consumer.start()
    env = cli_env(kafka_settings, SESSION_TIMEOUT_S="6", PROCESSING_GUARANTEE="exactly_once")
    pipeline = PipelineSettings(
        delivery=DeliverySettings(processing_guarantee="exactly_once", session_timeout_s=6.0)
    )
    settings = Settings(kafka=kafka_settings, s3=services.s3)
    downstream = Worker(
        ["synthesize", "encode", "sink"], settings, pipeline, renderer=speech_renderer, ops=False
    )
    await downstream.start()
    listener = AudioSubscriber(kafka_settings, topics.audio, request_ids=[rid])
    await listener.start()
    waiter = ResultWaiter(kafka_settings, topics)
    await waiter.start()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamtts.cli.main", "run", "--stage", "segment",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    try:
        await attach_at_end(consumer, await partitions_of(kafka_settings, [topics.segments]))
        async with RequestProducer(kafka_settings, topics) as producer:
            async with asyncio.timeout(90):
                async for line in proc.stderr:
                    if b'"event":"partitions_assigned"' in line and b"tts.requests/" in line:
                        break
            await producer.submit(opener(rid))
            for token in words[:half]:
                await producer.send_delta(TextDelta(request_id=rid, delta=token))
            segments = await _segments_until(consumer, rid, lambda got: len(got) >= 1)  # committed
            for token in words[half : half + 3]:  # taken in an open transaction, then the kill
                await producer.send_delta(TextDelta(request_id=rid, delta=token))
            proc.kill()
            await proc.wait()
            for token in words[half + 3 :]:
                await producer.send_delta(TextDelta(request_id=rid, delta=token))
            await producer.send_delta(TextDelta(request_id=rid, end=True))
            worker = Worker(["segment"], settings, pipeline, ops=False)
            await worker.start()
            try:
                segments = await _segments_until(
                    consumer, rid, lambda got: any(s.last for s in got), segments
                )
                heard = [audio async for audio in listener.completed(timeout_s=90)]
                await waiter.wait([rid], timeout_s=60)  # its result is committed before the workers stop
            finally:
                await worker.stop()
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
        await consumer.stop()
        await listener.stop()
        await waiter.stop()
        await downstream.stop()
    # A span the killed worker wrote before its state was saved is written again by the next
    # owner under the same seq (its writes outside the transaction are at least once); every
    # reader keeps one copy per seq (the sink, `AudioSubscriber`): the same text, never a gap.
    by_seq: dict[int, str] = {}
    for s in segments:
        assert by_seq.setdefault(s.seq, s.text) == s.text, f"seq {s.seq} said two ways"
    assert sorted(by_seq) == list(range(len(by_seq))), "a gap"
    spoken = " ".join(by_seq[i] for i in sorted(by_seq) if by_seq[i])
    assert re.sub(r"\s+", " ", spoken).strip() == REPLY
    # One result, committed once; its audio says the reply once (a span said twice would add
    # its words again: 16 redelivered tokens are a third of the reply).
    results = await _records_of(kafka_settings, topics.results, rid)
    assert [CompletionResult.from_bytes(v).status for v in results] == ["completed"], results
    [audio] = heard
    samples = np.frombuffer(audio.data, dtype="<i2").astype(np.float32) / 32768.0
    transcript = (await asyncio.to_thread(WhisperASR().transcribe, samples, audio.sample_rate, "en")).text
    error = score(REPLY, transcript, "en")
    print(f"transcribed: {transcript!r} (word error {error.rate:.3f})")
    assert error.rate <= 0.15, (transcript, error)
