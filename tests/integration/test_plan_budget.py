"""The segment stage's planning budget on real Kafka: a 20,000-character adversarial request
costs the stage at most its budget (dead-lettered too_costly) and a normal request sent
right behind it, on the same partition, is segmented meanwhile; a `streamtts run --stage
segment` busy with such a request stops on SIGTERM within a bound."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from dataclasses import replace

import orjson
import pytest

from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.runtime.kafka import make_consumer, make_producer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import DeadLetter, Segment, TTSRequest
from streamtts.worker import Worker
from tests.helpers import cli_env
from tests.services import Services

pytestmark = [pytest.mark.integration]

# 2,500 sentences of Chinese with numbers to read: ~0.7–1.4 s to plan on the 2-core CI machine.
ADVERSARIAL_20K = ("价格是123元。" * 2500)[:20_000]
BUDGET_S = 0.2
ADVERSARIAL = ADVERSARIAL_20K * 3
"""60,000 characters: its whole plan costs well over twice the budget even on a fast, quiet
machine (20,000 took 0.3 s on one CI run, which left no margin)."""
LIMITS = SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000)


async def _send_on_one_partition(kafka: KafkaSettings, topic: str, *requests: TTSRequest) -> float:
    """Send in this order to partition 0 (one behind the other); returns when the first was sent."""
    producer = make_producer(kafka)
    await producer.start()
    try:
        sent = time.perf_counter()
        for r in requests:
            await producer.send_and_wait(topic, r.to_bytes(), key=r.request_id.encode(), partition=0)
    finally:
        await producer.stop()
    return sent


async def test_an_adversarial_request_costs_the_stage_at_most_its_budget(
    kafka_settings: KafkaSettings, services: Services, topics: TopicNames, pipeline_settings: PipelineSettings
) -> None:
    worker = Worker(
        ["segment"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings.replace(plan_budget_s=BUDGET_S, max_text_chars=len(ADVERSARIAL)),
    )
    segments = make_consumer(kafka_settings, topics.segments, group_id=None)
    dlq = make_consumer(kafka_settings, topics.dlq("segment"), group_id=None)
    hostile = TTSRequest.new(ADVERSARIAL, language="zh", priority="interactive")
    normal = TTSRequest.new("Hello there.", language="en", priority="interactive")
    seen: dict[str, float] = {}
    letter: DeadLetter | None = None
    started = time.perf_counter()
    plan_segments(hostile, limits=replace(LIMITS, max_text_chars=len(ADVERSARIAL)))
    whole_s = time.perf_counter() - started  # what it costs unbounded, on this machine now
    assert whole_s > 2 * BUDGET_S, "the adversarial text must cost more than the budget here"
    await worker.start()
    await segments.start()
    await dlq.start()
    try:
        async with asyncio.timeout(60):
            while not worker.service("segment").assigned:  # noqa: ASYNC110 - the group join has no event
                await asyncio.sleep(0.1)
        sent = await _send_on_one_partition(kafka_settings, topics.requests, hostile, normal)
        async with asyncio.timeout(30):
            while normal.request_id not in seen or letter is None:
                for consumer in (segments, dlq):
                    for records in (await consumer.getmany(timeout_ms=100)).values():
                        for rec in records:
                            if consumer is dlq:
                                letter = DeadLetter.from_record(rec.key, rec.value, rec.headers)
                                seen[letter.request_id or ""] = time.perf_counter() - sent
                            else:
                                rid = Segment.from_bytes(rec.value).request_id
                                seen.setdefault(rid, time.perf_counter() - sent)
    finally:
        await dlq.stop()
        await segments.stop()
        await worker.stop()
    print(
        f"{len(ADVERSARIAL):,}-char request dead-lettered {seen[hostile.request_id]:.2f} s after it was sent; "
        f"the request behind it segmented after {seen[normal.request_id]:.2f} s (budget {BUDGET_S} s; "
        f"the whole plan costs {whole_s:.2f} s)"
    )
    assert letter.reason == "too_costly" and letter.request_id == hostile.request_id
    assert "stopped at character" in letter.error_message
    # The stage spent at most its budget on it: the request behind it was served within the
    # budget plus Kafka's round trips, sooner than the whole plan alone would have taken.
    assert seen[normal.request_id] < min(whole_s, BUDGET_S + 1.0)


async def test_a_segment_worker_busy_planning_stops_on_sigterm(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    # The longest text the contract allows, and a budget that lets its plan run (~4-14 s).
    costly = TTSRequest.new((ADVERSARIAL_20K * 10)[:200_000], language="zh")
    started = time.perf_counter()
    plan_segments(TTSRequest.new(ADVERSARIAL_20K, language="zh"), limits=LIMITS)
    whole_s = 10 * (time.perf_counter() - started)  # planning is linear: the 200,000's cost here
    env = dict(
        cli_env(kafka_settings),
        STREAMTTS_PLAN_BUDGET_S="60",
        STREAMTTS_MAX_TEXT_CHARS="200000",
        STREAMTTS_SESSION_TIMEOUT_S="6",
    )
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamtts.cli.main", "run", "--stage", "segment",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    events: list[dict] = []
    after: list[str] = []  # what the worker said while stopping (in the failure message)

    async def wait_for(name: str) -> dict:
        assert proc.stderr is not None
        async for line in proc.stderr:
            try:
                event = orjson.loads(line)
            except orjson.JSONDecodeError:
                continue
            events.append(event)
            if event.get("event") == name:
                return event
        raise AssertionError(f"the worker exited before {name!r}: {events[-5:]}")

    try:
        async with asyncio.timeout(90):
            await wait_for("partitions_assigned")
        first = TTSRequest.new("Hello there.", language="en")
        await _send_on_one_partition(kafka_settings, topics.requests, first, costly)
        async with asyncio.timeout(60):
            await wait_for("segmented")  # the first is done: the stage is planning the costly one
        signalled = time.perf_counter()
        proc.send_signal(signal.SIGTERM)
        async with asyncio.timeout(60):
            while (line := await proc.stderr.readline()) != b"":
                after.append(line.decode(errors="replace").strip())
            await proc.wait()
        stopped_s = time.perf_counter() - signalled
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    print(
        f"segment worker stopped {stopped_s:.2f} s after SIGTERM while planning (the plan: ~{whole_s:.1f} s)"
    )
    assert proc.returncode in (0, -signal.SIGTERM)
    # Planning on the loop, the signal waited for the whole plan (15 s measured so).
    assert stopped_s < min(10.0, whole_s / 2), "\n".join(after[-30:])
