"""What on-call relies on: probes, metrics, JSON logs, canary, config, SIGTERM, pools."""

from __future__ import annotations

import asyncio
import io
import logging
import signal
import sys

import aiohttp
import numpy as np
import orjson
import pytest

from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.jsonlog import JsonFormatter
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import TTSRequest
from streamtts.sinks.subscriber import AudioSubscriber
from streamtts.worker import Worker
from tests.helpers import cli_env, metric
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]


async def _get(port: int, path: str) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}{path}") as resp:
        return resp.status, await resp.read()


async def test_probes_follow_warm_up_and_canary(
    kafka_settings: KafkaSettings,
    services: Services,
    speech_renderer,
    pipeline_settings: PipelineSettings,
    monkeypatch,
) -> None:  # type: ignore[no-untyped-def]
    worker = Worker(
        ["synthesize"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings.replace(canary_interval_s=0),
        renderer=speech_renderer,
    )
    starting = asyncio.create_task(worker.start())
    try:
        await asyncio.wait_for(worker.ops_started.wait(), 30)  # the probes come up first
        status, body = await _get(worker.ops_port, "/readyz")
        assert status == 503, "not ready before the model is warmed and stages joined"
        assert orjson.loads(body)["problems"]
        health, _ = await _get(worker.ops_port, "/healthz")
        assert health == 200, "alive while still warming up"
        await starting
        async with asyncio.timeout(30):
            while (await _get(worker.ops_port, "/readyz"))[0] != 200:  # noqa: ASYNC110 - probing, as k8s does
                await asyncio.sleep(0.2)  # waiting for the group assignment (polling the probe)
        # A corrupted engine: the canary sees changed output and readiness flips.
        engine = speech_renderer.synth.registry.engine(speech_renderer.synth.registry.spec("jm_kumo"))
        real = engine.synthesize_phonemes

        def corrupted(*a, **kw):  # type: ignore[no-untyped-def]
            for chunk in real(*a, **kw):
                chunk.samples = (chunk.samples * 0.5).astype(np.float32)
                yield chunk

        monkeypatch.setattr(engine, "synthesize_phonemes", corrupted)
        result = await worker.canary.run_once()
        assert not result.ok and "output changed" in result.reason
        status, body = await _get(worker.ops_port, "/readyz")
        assert status == 503 and any("canary failing" in p for p in orjson.loads(body)["problems"])
        monkeypatch.setattr(engine, "synthesize_phonemes", real)
        assert (await worker.canary.run_once()).ok
        assert (await _get(worker.ops_port, "/readyz"))[0] == 200
        _, metrics = await _get(worker.ops_port, "/metrics")
        assert metric(metrics.decode(), "streamtts_canary_runs_total", outcome="failed") == 1
    finally:
        if not starting.done():
            starting.cancel()
        await worker.stop()


async def test_metrics_count_a_known_workload_and_logs_are_json(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    buf = io.StringIO()
    handler = logging.StreamHandler(buf)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("streamtts")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    requests = [
        TTSRequest.new(
            f"Metric check {i}, with a clause. " + "And a long tail sentence here. " * i,
            language="en",
            voice="en_joe",
            format="mp3",
            tenant="ops",
        )
        for i in range(5)
    ]
    try:
        async with ResultWaiter(kafka_settings) as waiter:
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit_many(requests)
            await waiter.wait([r.request_id for r in requests], timeout_s=180)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    _, body = await _get(running_pipeline.ops_port, "/metrics")
    text = body.decode()
    assert metric(text, "streamtts_requests_completed_total", status="completed") == 5
    assert metric(text, "streamtts_records_total", stage="segment", outcome="ok") == 5
    assert metric(text, "streamtts_time_to_first_audio_seconds_count", format="mp3") == 5
    assert metric(text, "streamtts_request_latency_seconds_count", format="mp3") == 5
    synthesized = metric(text, "streamtts_records_total", stage="synthesize", outcome="ok")
    events = [orjson.loads(line) for line in buf.getvalue().splitlines()]
    segs = [e for e in events if e["event"] == "synthesized"]
    assert synthesized == len(segs) > 5, "every segment is counted once"
    assert metric(text, "streamtts_audio_seconds_total", voice="en_joe") == pytest.approx(
        sum(e["audio_s"] for e in segs), rel=1e-3
    )
    for name in ("segmented", "synthesized", "encoded", "completed"):
        event = next(e for e in events if e["event"] == name)
        for field in ("ts", "level", "request_id", "tenant", "stage", "voice", "duration_ms"):
            assert field in event, (name, field)
    seg = next(e for e in events if e["event"] == "segmented")
    assert len(seg["text"]) <= 40 and seg["lang"] == "en", "text is truncated in logs"


async def test_short_request_overtakes_a_long_one_through_its_pool(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    chapter = " ".join(
        f"This is sentence number {i} of a long audiobook chapter that keeps going." for i in range(12)
    )
    long_req = TTSRequest.new(chapter, language="en", voice="jm_kumo", format="mp3")
    short_req = TTSRequest.new("Your code is 42.", language="en", voice="jm_kumo", format="mp3")
    assert len(chapter) > PipelineSettings().text.long_text_chars
    async with (
        ResultWaiter(kafka_settings) as waiter,
        AudioSubscriber(kafka_settings, topics.audio, request_ids=[long_req.request_id]) as sub,
    ):
        async with RequestProducer(kafka_settings) as producer:
            await producer.submit(long_req)
            # The long request is in flight (its first audio is out) before the short one is sent.
            await sub.wait_first_chunk(long_req.request_id, timeout_s=120)
            await producer.submit(short_req)
        order: list[str] = []
        results = await waiter.wait([short_req.request_id], timeout_s=120)
        order.append(short_req.request_id)
        rest = await waiter.wait([long_req.request_id], timeout_s=300)
        order.append(long_req.request_id)
    assert order == [short_req.request_id, long_req.request_id]
    assert results[short_req.request_id].completed_at < rest[long_req.request_id].completed_at


async def test_sigterm_mid_request_loses_nothing(kafka_settings: KafkaSettings, services: Services) -> None:
    env = cli_env(
        kafka_settings, services.s3, warm_voices="jm_kumo", session_timeout_s="6", shutdown_timeout_s="20"
    )

    pumps: list[asyncio.Task[None]] = []

    async def start_worker() -> tuple[asyncio.subprocess.Process, asyncio.Queue[dict]]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "streamtts.cli.main",
            "run",
            env=env,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE,
        )
        events: asyncio.Queue[dict] = asyncio.Queue()

        async def pump() -> None:
            assert proc.stderr
            async for line in proc.stderr:
                try:
                    await events.put(orjson.loads(line))
                except orjson.JSONDecodeError:
                    pass

        pumps.append(asyncio.create_task(pump()))
        return proc, events

    async def until(events: asyncio.Queue[dict], name: str, timeout: float = 120) -> dict:
        async with asyncio.timeout(timeout):
            while (e := await events.get())["event"] != name:
                pass
        return e

    text = " ".join(
        f"Sentence {i} of a request that is still being spoken when the worker is told to stop."
        for i in range(6)
    )
    req = TTSRequest.new(text, language="en", voice="jm_kumo", format="opus", priority="interactive")
    first, events = await start_worker()
    try:
        await until(events, "worker_started")
        async with ResultWaiter(kafka_settings) as waiter:
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit(req)
            await until(events, "synthesized")  # mid-request
            first.send_signal(signal.SIGTERM)
            stopped = await until(events, "worker_stopped", timeout=30)
            assert stopped["stages"] == ["segment", "synthesize", "encode", "sink"]
            assert await asyncio.wait_for(first.wait(), 30) == 0
            second, _ = await start_worker()
            try:
                results = await waiter.wait([req.request_id], timeout_s=240)
            finally:
                second.send_signal(signal.SIGTERM)
                await asyncio.wait_for(second.wait(), 60)
    finally:
        if first.returncode is None:
            first.kill()
            await first.wait()
    result = results[req.request_id]
    assert result.status == "completed" and result.chunks >= 6
    assert result.duration_ms > 15_000, "every sentence made it into the stored file"
