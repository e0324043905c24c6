"""Admission on real Kafka: a synthesize worker reports its queue on tts.load, the gateway reads
the reports and refuses (429 `overloaded`) a request whose deadline the owning worker cannot
meet, while requests without a deadline, or with one it can meet, are queued as before."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from datetime import UTC, datetime

import httpx
from aiokafka import AIOKafkaConsumer, TopicPartition

from streamtts.features.admission.reporter import LoadReporter
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.kafka import client_kwargs, make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import LoadReport, TTSRequest, wire
from tests.gateway.conftest import ACME


async def _reports(
    kafka: KafkaSettings, topic: str, until: Callable[[bytes, LoadReport | None], bool]
) -> None:
    """Read `topic` from the beginning until `until(key, report)` holds (None: a tombstone)."""
    consumer = AIOKafkaConsumer(**client_kwargs(kafka), enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    report = None if r.value is None else wire.decode(LoadReport, r.value, r.headers)
                    if until(r.key or b"", report):
                        return
        raise AssertionError(f"no matching load report on {topic} within 40 s")
    finally:
        await consumer.stop()


async def test_a_synthesize_worker_reports_its_lanes_and_partitions(
    running_pipeline, kafka_settings, topics
) -> None:  # type: ignore[no-untyped-def]
    """After one Kokoro request, the worker's report names every partition it owns, its
    lanes' prediction, and the Kokoro cost line fitted from that run."""
    async with RequestProducer(kafka_settings) as producer:
        await producer.submit(TTSRequest.new("Your order has shipped.", voice="jm_kumo", language="en"))
    seen: list[LoadReport] = []

    def fitted(key: bytes, report: LoadReport | None) -> bool:
        if report is None or key != report.worker.encode():
            return False
        seen.append(report)
        line = report.cost.get("kokoro")
        return (
            report.partitions.get(topics.segments) == list(range(6)) and line is not None and line.runs >= 1
        )

    await _reports(kafka_settings, topics.load, fitted)
    report = seen[-1]
    # One worker owns every partition of both pools and predicts with its lanes.
    assert report.partitions[topics.segments_long] == list(range(6))
    assert report.first_wait_ms is not None and report.first_wait_ms >= 0
    assert report.cost["kokoro"].ms_per_phoneme > 0
    assert report.slots >= 1 and report.release == "stable"


async def test_a_stopped_reporter_leaves_a_tombstone(kafka_settings, topics) -> None:  # type: ignore[no-untyped-def]
    def snapshot(worker: str, interval_s: float) -> LoadReport:
        return LoadReport(worker=worker, release="stable", interval_s=interval_s, at=datetime.now(UTC))

    reporter = LoadReporter(kafka_settings, topics.load, snapshot, interval_s=0.2, worker="w-test:1")
    await reporter.start()
    await _reports(kafka_settings, topics.load, lambda key, r: r is not None and r.worker == "w-test:1")
    await reporter.stop()
    await _reports(kafka_settings, topics.load, lambda key, r: key == b"w-test:1" and r is None)


async def _say(kafka: KafkaSettings, topics: TopicNames, wait_ms: float) -> None:
    """A worker owning every partition reports `wait_ms` (what a synthesize worker publishes)."""
    report = LoadReport.from_obj(
        {
            "worker": "busy:1",
            "release": "stable",
            "partitions": {topics.segments: list(range(6)), topics.segments_long: list(range(6))},
            "first_wait_ms": wait_ms,
            "cost": {"kokoro": {"intercept_ms": 60, "ms_per_phoneme": 9, "phonemes_per_char": 1, "runs": 3}},
            "interval_s": 30.0,
            "at": datetime.now(UTC),
        }
    )
    producer = make_producer(kafka)
    await producer.start()
    try:
        record = wire.encode(report)
        await producer.send_and_wait(topics.load, record.value, key=b"busy:1", headers=record.headers)
    finally:
        await producer.stop()


async def _post_until(client: httpx.AsyncClient, body: dict[str, object], status: int) -> httpx.Response:
    """POST until the gateway answers `status` (its view of tts.load follows within ~200 ms)."""
    deadline = time.monotonic() + 20
    while True:
        response = await client.post("/v1/speech", json=body, headers=ACME)
        if response.status_code == status or time.monotonic() > deadline:
            return response
        await asyncio.sleep(0.1)


async def test_the_gateway_refuses_what_the_queue_cannot_serve_in_time(
    gateway_url, kafka_settings, topics
) -> None:  # type: ignore[no-untyped-def]
    body = {"text": "Your order has shipped.", "voice": "jm_kumo", "deadline_ms": 2000}
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as client:
        await _say(kafka_settings, topics, 60_000.0)
        refused = await _post_until(client, body, 429)
        assert refused.status_code == 429, refused.text
        error = refused.json()["error"]
        assert error["code"] == "overloaded" and "2000 ms" in error["message"]
        assert int(refused.headers["Retry-After"]) >= 58  # the queue ahead drains in ~a minute
        # Without a deadline the same request is queued: admission only refuses what asks.
        queued = await client.post("/v1/speech", json={**body, "deadline_ms": None}, headers=ACME)
        assert queued.status_code == 202, queued.text
        # The worker catches up: the same deadline is admitted.
        await _say(kafka_settings, topics, 0.0)
        admitted = await _post_until(client, body, 202)
        assert admitted.status_code == 202, admitted.text


async def test_past_saturation_every_request_gets_audio_or_a_clear_refusal(live_gateway_url) -> None:  # type: ignore[no-untyped-def]
    """A burst of Kokoro requests with a first-audio deadline at a worker with one lane: the
    gateway admits what the worker can start in time (counting what it admitted since the last
    report) and refuses the rest at once; every admitted request completes with audio."""
    text = "Thank you for waiting. Your parcel left our warehouse this morning and arrives on Friday."
    async with httpx.AsyncClient(base_url=live_gateway_url, timeout=60) as client:
        # The gateway has the worker's report once a 1 ms deadline is refused.
        probe = await _post_until(client, {"text": "Hi.", "voice": "jm_kumo", "deadline_ms": 1}, 429)
        assert probe.status_code == 429, probe.text
        body = {"text": text, "voice": "jm_kumo", "deadline_ms": 2500}
        answers = await asyncio.gather(
            *(client.post("/v1/speech", json=body, headers=ACME) for _ in range(8))
        )
        admitted = [a.json()["id"] for a in answers if a.status_code == 202]
        refused = [a for a in answers if a.status_code == 429]
        assert len(admitted) + len(refused) == 8, [a.status_code for a in answers]
        assert admitted and refused, [a.status_code for a in answers]
        assert all(r.json()["error"]["code"] == "overloaded" for r in refused)
        for rid in admitted:
            deadline = time.monotonic() + 180
            while True:
                state = (await client.get(f"/v1/speech/{rid}?wait=30", headers=ACME)).json()
                if state["status"] in ("completed", "failed", "cancelled") or time.monotonic() > deadline:
                    break
            assert state["status"] == "completed", state
            assert state["duration_ms"] > 2000  # the whole sentence was spoken
