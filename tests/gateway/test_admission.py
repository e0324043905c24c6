"""Admission at the gateway, on real Kafka: it reads the workers' reports on tts.load and refuses
(429 `overloaded`) a request whose deadline the owning worker cannot meet, while requests without
a deadline, or with one it can meet, are queued as before; past saturation every request gets
audio or that refusal."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime

import httpx

from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import LoadReport, wire
from tests.gateway.conftest import ACME


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
