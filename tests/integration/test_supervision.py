"""A stage whose consuming loop dies is not silently idle: readiness names it and the worker
process ends (non-zero through the CLI), so the orchestrator restarts it."""

from __future__ import annotations

import asyncio

import aiohttp
import orjson
import pytest

from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.worker import Worker
from streamtts.worker_run import StageFailed, run_until_signalled
from tests.services import Services

pytestmark = pytest.mark.integration


async def _readyz(port: int) -> tuple[int, dict]:
    async with aiohttp.ClientSession() as session, session.get(f"http://127.0.0.1:{port}/readyz") as resp:
        return resp.status, orjson.loads(await resp.read())


async def _until_assigned(worker: Worker) -> None:
    async with asyncio.timeout(60):
        while not all(s.assigned for s in worker.services):  # noqa: ASYNC110 - the group join has no event
            await asyncio.sleep(0.1)


def _break_the_sink_loop(worker: Worker) -> asyncio.Task[None]:
    sink = worker.service("sink")
    sink.assembler = None  # injected bug: the loop's next poll raises AttributeError
    assert sink._task is not None
    return sink._task


async def test_a_dead_sink_loop_turns_readiness_red(
    kafka_settings: KafkaSettings, services: Services, pipeline_settings: PipelineSettings
) -> None:
    worker = Worker(["sink"], Settings(kafka=kafka_settings, s3=services.s3), pipeline_settings)
    await worker.start()
    try:
        await _until_assigned(worker)
        assert worker.ops_port is not None
        assert (await _readyz(worker.ops_port))[0] == 200
        loop_task = _break_the_sink_loop(worker)
        await asyncio.wait([loop_task], timeout=30)
        status, body = await _readyz(worker.ops_port)
        assert status == 503
        assert any(p.startswith("sink: loop died (AttributeError") for p in body["problems"]), body
    finally:
        await worker.stop()


async def test_a_dead_sink_loop_ends_the_worker_run(
    kafka_settings: KafkaSettings, services: Services, pipeline_settings: PipelineSettings
) -> None:
    worker = Worker(["sink"], Settings(kafka=kafka_settings, s3=services.s3), pipeline_settings)
    run = asyncio.create_task(run_until_signalled(worker))
    await _until_assigned_started(worker)
    _break_the_sink_loop(worker)
    with pytest.raises(StageFailed, match="sink: AttributeError"):
        await asyncio.wait_for(run, 60)
    assert worker.services == [], "stopped cleanly after the failure"


async def _until_assigned_started(worker: Worker) -> None:
    async with asyncio.timeout(60):
        while not worker.services:  # noqa: ASYNC110 - run_until_signalled owns the start
            await asyncio.sleep(0.05)
    await _until_assigned(worker)
