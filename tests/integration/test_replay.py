"""Replay tooling on the real broker: DLQ re-drive exactly once, dry runs, windows, bad args."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from datetime import UTC, datetime

import pytest
from aiokafka import TopicPartition
from minio import Minio

from streamtts.producers.replay import DlqFilter, ReplayOptions, replay_dlq, replay_requests, replay_window
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, TextDelta, TTSRequest
from streamtts.schemas.utterance import StreamOptions
from streamtts.worker import Worker
from tests.services import TEST_S3_SECRET, TEST_S3_USER, Services

pytestmark = [pytest.mark.integration, pytest.mark.model]


class Results:
    """Every completion result published on the topic since start(), in order."""

    def __init__(self, kafka: KafkaSettings) -> None:
        self.kafka = kafka
        self.seen: list[CompletionResult] = []
        self._consumer = make_consumer(kafka, group_id=None, auto_offset_reset="earliest")

    async def start(self) -> None:
        await self._consumer.start()
        topic = TopicNames(self.kafka.topic_prefix).results
        self._consumer.assign([TopicPartition(topic, p) for p in await topic_partitions(self.kafka, topic)])

    async def stop(self) -> None:
        await self._consumer.stop()

    async def until(self, predicate, timeout_s: float = 180) -> None:  # type: ignore[no-untyped-def]
        async with asyncio.timeout(timeout_s):
            while not predicate(self.seen):
                for records in (await self._consumer.getmany(timeout_ms=300)).values():
                    self.seen += [CompletionResult.from_bytes(r.value) for r in records]

    def completed(self) -> Counter[str]:
        return Counter(r.request_id for r in self.seen if r.status == "completed")


async def _end_offsets(kafka: KafkaSettings, topic: str) -> dict[int, int]:
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await topic_partitions(kafka, topic)]
        return {tp.partition: off for tp, off in (await consumer.end_offsets(tps)).items()}
    finally:
        await consumer.stop()


def _requests(n: int, tenant: str) -> list[TTSRequest]:
    return [
        TTSRequest.new(f"Replay test {i}.", language="en", voice="en_joe", format="mp3", tenant=tenant)
        for i in range(n)
    ]


async def test_storage_outage_dead_letters_then_replay_completes_each_exactly_once(
    own_stack, kafka_settings: KafkaSettings, speech_renderer, pipeline_settings: PipelineSettings
) -> None:
    s3 = S3Settings(endpoint=own_stack.minio.endpoint, access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET)
    topics = TopicNames(kafka_settings.topic_prefix)
    # Storage is down from the start and the sink gives up after one attempt: dead letters.
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=s3),
        pipeline_settings.replace(storage_retries=1),
        renderer=speech_renderer,
    )
    results = Results(kafka_settings)
    await results.start()
    await worker.start()
    try:
        requests = _requests(4, "dlq")
        ids = {r.request_id for r in requests}
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit_many(requests)
        await results.until(lambda seen: {r.request_id for r in seen if r.status == "failed"} >= ids)
        dlq_ends = await _end_offsets(kafka_settings, topics.dlq("sink"))
        assert sum(dlq_ends.values()) >= 4, "every failed request's chunks are dead-lettered"

        # The fix: storage comes back. A dry run first: it changes nothing.
        await asyncio.to_thread(own_stack.minio.start, lambda _m: None)
        await asyncio.to_thread(own_stack.minio.wait_ready)  # the fix is in place before the replay
        pcm_before = await _end_offsets(kafka_settings, topics.pcm)
        dry = await replay_dlq(
            kafka_settings, "sink", DlqFilter(tenant="dlq"), options=ReplayOptions(dry_run=True)
        )
        assert dry.redriven == sum(dlq_ends.values()) and len(dry.planned) == dry.redriven
        assert await _end_offsets(kafka_settings, topics.pcm) == pcm_before

        done = await replay_dlq(kafka_settings, "sink", DlqFilter(tenant="dlq"))
        assert done.redriven == sum(dlq_ends.values()) and done.failed == 0
        await results.until(
            lambda seen: set(Counter(r.request_id for r in seen if r.status == "completed")) >= ids
        )

        # Replaying again moves nothing: the ledger remembers.
        pcm_after = await _end_offsets(kafka_settings, topics.pcm)
        again = await replay_dlq(kafka_settings, "sink", DlqFilter(tenant="dlq"))
        assert again.redriven == 0 and again.skipped["already_replayed"] == done.redriven
        assert await _end_offsets(kafka_settings, topics.pcm) == pcm_after
    finally:
        await worker.stop()
        await results.stop()
    assert all(results.completed()[i] == 1 for i in ids), "each request completed exactly once"
    client = Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key, secure=False)
    keys = await asyncio.to_thread(
        lambda: [o.object_name for o in client.list_objects(s3.bucket, prefix="dlq/", recursive=True)]
    )
    own_stack.minio.stop()
    assert len(keys) == 4


async def test_window_replay_into_a_namespace_covers_exactly_the_window(
    running_pipeline, kafka_settings: KafkaSettings, services: Services
) -> None:
    results = Results(kafka_settings)
    await results.start()
    batches: list[list[TTSRequest]] = []
    marks: list[datetime] = []
    tenant = f"w{uuid.uuid4().hex[:8]}"  # the shared bucket outlives test runs: own key space
    try:
        async with RequestProducer(kafka_settings) as producer:
            for n in (2, 3, 2):
                marks.append(datetime.now(UTC))
                batch = _requests(n, tenant)
                await producer.submit_many(batch)
                batches.append(batch)
                ids = {r.request_id for r in batch}
                await results.until(lambda seen, ids=ids: {r.request_id for r in seen} >= ids)
        marks.append(datetime.now(UTC))
        inside = {r.request_id for r in batches[1]}
        summary = await replay_window(kafka_settings, marks[1], marks[2], namespace="cmp")
        assert summary.redriven == 3 and summary.read == 3
        await results.until(
            lambda seen: (
                {r.request_id for r in seen if r.storage and r.storage.key.startswith("cmp/")} >= inside
            )
        )
        dry = await replay_window(
            kafka_settings, marks[1], marks[2], namespace="cmp", options=ReplayOptions(dry_run=True)
        )
        assert dry.redriven == 0 and dry.skipped["already_replayed"] == 3
    finally:
        await results.stop()
    s3 = services.s3
    client = Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key, secure=s3.secure)
    keys = await asyncio.to_thread(
        lambda: [
            o.object_name for o in client.list_objects(s3.bucket, prefix=f"cmp/{tenant}/", recursive=True)
        ]
    )
    assert {k.rsplit("/", 1)[1].removesuffix(".mp3") for k in keys} == inside


async def test_replay_request_with_another_voice(running_pipeline, kafka_settings: KafkaSettings) -> None:
    results = Results(kafka_settings)
    await results.start()
    try:
        original = TTSRequest.new("Say it again, differently.", language="en", voice="en_joe", format="mp3")
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(original)
        await results.until(lambda seen: any(r.request_id == original.request_id for r in seen))
        summary, mapping = await replay_requests(
            kafka_settings, [original.request_id, "no-such-id"], voice="jm_kumo", fmt="opus"
        )
        assert summary.redriven == 1 and summary.skipped["not_found"] == 1
        new_id = mapping[original.request_id]
        assert new_id != original.request_id
        await results.until(lambda seen: any(r.request_id == new_id for r in seen))
    finally:
        await results.stop()
    replayed = next(r for r in results.seen if r.request_id == new_id)
    assert replayed.status == "completed" and replayed.format == "opus"


async def test_replay_request_keeps_to_its_rate(running_pipeline, kafka_settings: KafkaSettings) -> None:
    originals = [TTSRequest.new(f"Number {i}.", language="en", voice="en_joe") for i in range(3)]
    async with RequestProducer(kafka_settings) as producer:
        for request in originals:
            await producer.submit(request)
    started = time.monotonic()
    summary, _ = await replay_requests(
        kafka_settings, [r.request_id for r in originals], options=ReplayOptions(rate=4.0)
    )
    elapsed = time.monotonic() - started
    assert summary.redriven == 3
    # Three sends at 4 a second: two intervals of 0.25 s at least (unpaced: a few ms).
    assert elapsed >= 0.5, f"three replays took {elapsed:.3f} s at --rate 4"


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (("replay", "dlq", "--stage", "frobnicate"), "invalid choice: 'frobnicate'"),
        (
            ("replay", "window", "--from", "2026-01-02T00:00:00Z", "--to", "2026-01-01T00:00:00Z"),
            "must be before --to",
        ),
        # Replay runs are audited: without the audit topic nothing runs (nor can be recorded).
        (("replay", "dlq", "--stage", "sink"), "audit topic 'nope.tts.audit' does not exist"),
        (("replay", "window", "--from", "soon", "--to", "-1h"), "not a time: 'soon'"),
    ],
)
def test_bad_replay_arguments_give_one_line(services: Services, args: tuple[str, ...], expected: str) -> None:
    env = dict(
        os.environ, STREAMTTS_KAFKA_BOOTSTRAP=services.kafka.bootstrap_servers, STREAMTTS_TOPIC_PREFIX="nope."
    )
    proc = subprocess.run(
        [sys.executable, "-m", "streamtts.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert proc.returncode != 0
    assert expected in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr


async def test_replay_of_a_streamed_utterance_renders_the_text_its_deltas_assembled(
    running_pipeline, kafka_settings: KafkaSettings
) -> None:
    """`replay request` of an utterance says what its deltas said, whole; a window that holds
    its opening but not its end replays it whole too (its text read on past the window)."""
    results = Results(kafka_settings)
    await results.start()
    tokens = ["Your order ", "shipped on ", "Monday, and ", "it should arrive ", "by Thursday."]
    try:
        opener = TTSRequest.new("", voice="en_joe", format="mp3", timestamps=True, stream=StreamOptions())
        async with RequestProducer(kafka_settings) as producer:
            before = datetime.now(UTC)
            await producer.submit(opener)
            await producer.send_delta(TextDelta(request_id=opener.request_id, delta=tokens[0]))
            after_first = datetime.now(UTC)
            for token in tokens[1:]:
                await producer.send_delta(TextDelta(request_id=opener.request_id, delta=token), wait=False)
            await producer.send_delta(TextDelta(request_id=opener.request_id, end=True))
        await results.until(lambda seen: opener.request_id in results.completed())
        # The window holds the opener and the first delta only: the rest is read past it.
        window = await replay_window(kafka_settings, before, after_first, namespace="cmp")
        assert window.redriven == 1, window.lines()

        def in_cmp(seen: list[CompletionResult]) -> bool:
            return any(
                r.request_id == opener.request_id and r.storage and r.storage.key.startswith("cmp/")
                for r in seen
            )

        await results.until(in_cmp)
        summary, mapping = await replay_requests(kafka_settings, [opener.request_id])
        assert summary.redriven == 1, summary.lines()
        new_id = mapping[opener.request_id]
        await results.until(lambda seen: new_id in results.completed())
    finally:
        await results.stop()
    original = next(r for r in results.seen if r.request_id == opener.request_id)
    replayed = next(r for r in results.seen if r.request_id == new_id)
    windowed = next(r for r in results.seen if r.storage and r.storage.key.startswith("cmp/"))
    assert replayed.status == "completed" and replayed.ended is None  # a whole request now
    # The replays' words are the utterance's words: the assembled text, said whole.
    said = [w.strip(",.") for w in " ".join(tokens).split()]
    assert [w.text.strip(",.") for w in replayed.words or []] == said
    assert [w.text.strip(",.") for w in windowed.words or []] == said
    assert replayed.duration_ms and original.duration_ms
    assert 0.7 < replayed.duration_ms / original.duration_ms < 1.4, (
        replayed.duration_ms,
        original.duration_ms,
    )
