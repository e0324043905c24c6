"""Fault injection against real Kafka and MinIO: nothing lost, nothing duplicated, nothing stuck.

Tests that stop a server get servers of their own (same binaries as the shared stack, own
ports and data), so stopping them cannot disturb other tests.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

import pytest
from minio import Minio

from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import apply_spec, load_spec
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.kafka import make_admin, make_consumer, make_producer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import DeadLetter, TTSRequest
from streamtts.worker import Worker
from tests.services import TEST_S3_SECRET, TEST_S3_USER, Services

pytestmark = [pytest.mark.integration, pytest.mark.model]


async def _topics(kafka: KafkaSettings) -> None:
    admin = make_admin(kafka)
    await admin.start()
    try:
        await apply_spec(admin, load_spec(prefix=kafka.topic_prefix))
    finally:
        await admin.close()


async def _run_requests(
    kafka: KafkaSettings, requests: list[TTSRequest], during=None, timeout_s: float = 240
):  # type: ignore[no-untyped-def]
    ids = [r.request_id for r in requests]
    async with ResultWaiter(kafka) as waiter:
        async with RequestProducer(kafka) as producer:
            await producer.submit_many(requests)
        if during is not None:
            await during()
        return await waiter.wait(ids, timeout_s=timeout_s)


def _objects(s3: S3Settings, prefix: str) -> list[str]:
    client = Minio(s3.endpoint, access_key=s3.access_key, secret_key=s3.secret_key, secure=False)
    return [o.object_name for o in client.list_objects(s3.bucket, prefix=prefix, recursive=True)]


def _requests(n: int, tenant: str, voice: str = "en_joe") -> list[TTSRequest]:
    return [
        TTSRequest.new(
            f"Message {i}. Thanks for waiting.", language="en", voice=voice, format="mp3", tenant=tenant
        )
        for i in range(n)
    ]


async def test_object_storage_down_for_10s_then_back(
    own_stack: LocalStack, kafka_settings: KafkaSettings, speech_renderer, pipeline_settings: PipelineSettings
) -> None:
    own_stack.minio.paths.ensure()
    own_stack.minio.start(say=lambda _m: None)
    s3 = S3Settings(endpoint=own_stack.minio.endpoint, access_key=TEST_S3_USER, secret_key=TEST_S3_SECRET)
    pipe = pipeline_settings.replace(storage_retries=8)
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=s3),
        pipe,
        renderer=speech_renderer,
    )
    await worker.start()
    try:

        async def outage() -> None:
            own_stack.minio.stop()
            await asyncio.sleep(10)  # the fault itself: storage is down for 10 s
            own_stack.minio.start(say=lambda _m: None)

        results = await _run_requests(kafka_settings, _requests(6, "outage"), during=outage)
    finally:
        await worker.stop()
        own_stack.minio.stop()
    assert len(results) == 6 and all(r.status == "completed" and r.storage for r in results.values())
    own_stack.minio.start(say=lambda _m: None)
    try:
        await asyncio.to_thread(own_stack.minio.wait_ready)
        keys = await asyncio.to_thread(_objects, s3, "outage/")
    finally:
        own_stack.minio.stop()
    assert sorted(keys) == sorted(r.storage.key for r in results.values()), (
        "one object per request, no extras"
    )


async def test_kafka_broker_restart_mid_run(
    own_stack: LocalStack, services: Services, speech_renderer, pipeline_settings: PipelineSettings
) -> None:
    await asyncio.to_thread(own_stack.up, lambda _m: None)
    kafka = KafkaSettings(bootstrap_servers=own_stack.kafka.bootstrap, topic_prefix="r.")
    await _topics(kafka)
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka, s3=services.s3),
        pipeline_settings,
        renderer=speech_renderer,
    )
    await worker.start()
    try:

        async def restart() -> None:
            first = make_consumer(kafka, TopicNames("r.").results, group_id=None)
            await first.start()
            try:  # wait for the first completed result: we are mid-run
                async with asyncio.timeout(120):
                    while not any((await first.getmany(timeout_ms=500)).values()):
                        pass
            finally:
                await first.stop()
            await asyncio.to_thread(own_stack.kafka.stop)
            await asyncio.to_thread(own_stack.kafka.start, lambda _m: None)
            restarted_at.append(datetime.now(UTC))

        restarted_at: list[datetime] = []
        requests = _requests(8, "restart", voice="jm_kumo")  # ~1.5 s each: the run spans the restart
        results = await _run_requests(kafka, requests, during=restart, timeout_s=300)
    finally:
        await worker.stop()
        own_stack.down(say=lambda _m: None)
    assert set(results) == {r.request_id for r in requests}
    assert all(r.status == "completed" for r in results.values())
    assert any(r.completed_at > restarted_at[0] for r in results.values()), "work went on after the restart"


async def test_poison_batch_twenty_percent(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    good = _requests(12, "mix")
    poison: list[tuple[bytes, bytes, str]] = [
        (b"p-json", b"{not json", "invalid_json"),
        (
            b"p-version",
            b'{"schema_version":9,"request_id":"p-version","text":"x","created_at":"2026-01-01T00:00:00Z"}',
            "unsupported_version",
        ),
        (b"p-missing", b'{"request_id":"p-missing","created_at":"2026-01-01T00:00:00Z"}', "missing"),
        (
            b"p-utf8",
            b'{"request_id":"p-utf8","text":"\xff\xfe","created_at":"2026-01-01T00:00:00Z"}',
            "invalid_utf8",
        ),
        (
            b"p-format",
            b'{"request_id":"p-format","text":"hi","format":"aac","created_at":"2026-01-01T00:00:00Z"}',
            "literal_error",
        ),
        (b"p-voice", TTSRequest.new("hi", request_id="p-voice", voice="nobody").to_bytes(), "unknown_voice"),
        (b"p-long", TTSRequest.new("x" * 25_000, request_id="p-long").to_bytes(), "text_too_long"),
        (
            b"p-markup",
            TTSRequest.new(
                '<speak><audio src="http://x/evil.mp3"/>hi</speak>', request_id="p-markup"
            ).to_bytes(),
            "markup_not_allowed",
        ),
        (
            b"p-ctrl",
            TTSRequest.new("hello\x00\x1b[31m world", request_id="p-ctrl").to_bytes(),
            "control_characters",
        ),
        (b"p-empty", TTSRequest.new("!!! 🙂 ???", request_id="p-empty").to_bytes(), "nothing_speakable"),
    ]
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        # Interleave: 12 valid + ~3 poison per 15, in one partition order per key.
        for i, req in enumerate(good):
            await producer.send(topics.requests, key=req.request_id.encode(), value=req.to_bytes())
            if i < len(poison):
                key, value, _ = poison[i]
                await producer.send(topics.requests, key=key, value=value)
        await producer.flush()
    finally:
        await producer.stop()
    results = {}
    consumer = make_consumer(kafka_settings, topics.results, group_id=None)
    await consumer.start()
    letters: dict[str, DeadLetter] = {}
    dlq = make_consumer(kafka_settings, topics.dlq("segment"), group_id=None)
    await dlq.start()
    try:
        async with asyncio.timeout(240):
            while len(results) < len(good) or len(letters) < len(poison):
                for records in (await consumer.getmany(timeout_ms=200)).values():
                    for r in records:
                        results[r.key.decode()] = r
                for records in (await dlq.getmany(timeout_ms=200)).values():
                    for r in records:
                        letters[r.key.decode()] = DeadLetter.from_record(r.key, r.value, r.headers)
    finally:
        await consumer.stop()
        await dlq.stop()
    assert set(results) == {r.request_id for r in good}, "every valid request completes"
    assert {k: d.reason for k, d in letters.items()} == {k.decode(): reason for k, _, reason in poison}
    for key, value, _ in poison:
        assert letters[key.decode()].payload == value, "the DLQ keeps the original bytes"


async def test_exactly_once_mode_end_to_end(
    kafka_settings: KafkaSettings, services: Services, speech_renderer, pipeline_settings: PipelineSettings
) -> None:
    """faust stages in transactions + the sink's result/offset transactions on the real broker."""
    pipe = pipeline_settings.replace(processing_guarantee="exactly_once")
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipe,
        renderer=speech_renderer,
    )
    await worker.start()
    try:
        requests = _requests(5, "eos")
        results = await _run_requests(kafka_settings, requests, timeout_s=180)
    finally:
        await worker.stop()
    assert set(results) == {r.request_id for r in requests}
    assert all(r.status == "completed" for r in results.values())
    # Exactly one result record per request on the topic (read_committed).
    consumer = make_consumer(kafka_settings, TopicNames(kafka_settings.topic_prefix).results, group_id=None)
    await consumer.start()
    keys: list[str] = []
    try:
        async with asyncio.timeout(20):
            while len(keys) < 5:
                for records in (await consumer.getmany(timeout_ms=300)).values():
                    keys += [r.key.decode() for r in records]
        extra = await consumer.getmany(timeout_ms=1000)
    finally:
        await consumer.stop()
    assert sorted(keys) == sorted(results) and not any(extra.values())
