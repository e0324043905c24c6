"""Start-up's pieces without a broker: the backoff, a client's own cancellation told apart from
a real cancel, liveness past the start-up bound, and the bound's settings."""

from __future__ import annotations

import asyncio
import itertools
import random
import time

import httpx
import pytest

from streamtts.errors import ConfigError
from streamtts.runtime.lifecycle import CancelledInside, unless_cancelled_inside
from streamtts.runtime.ops_server import OpsServer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.readiness import STARTUP_EXIT_GRACE_S, Readiness
from streamtts.runtime.startup import StartupPolicy, describe
from streamtts.runtime.telemetry import Telemetry


def test_backoff_doubles_to_its_cap_with_jitter() -> None:
    policy = StartupPolicy(first_backoff_s=0.5, max_backoff_s=2.0)
    delays = list(itertools.islice(policy.backoffs(random.Random(7)), 8))
    assert 0.25 <= delays[0] <= 0.5 and 0.5 <= delays[1] <= 1.0
    assert all(1.0 <= d <= 2.0 for d in delays[2:]), delays
    assert len(set(delays)) == len(delays), "jittered: a fleet does not retry in step"


async def test_a_cancelled_error_from_inside_a_client_becomes_an_ordinary_error() -> None:
    async def client_that_cancels_itself() -> None:
        inner = asyncio.create_task(asyncio.sleep(10))
        await asyncio.sleep(0)
        inner.cancel()
        await inner  # as aiokafka's fetcher close does: its own task's CancelledError escapes

    with pytest.raises(CancelledInside):
        await unless_cancelled_inside(client_that_cancels_itself())


async def test_a_real_cancel_still_cancels() -> None:
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(unless_cancelled_inside(waits()))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_healthz_fails_once_start_up_overruns_its_bound() -> None:
    readiness = Readiness(startup_deadline=time.monotonic() + 60)
    ops = OpsServer(readiness, Telemetry(), host="127.0.0.1")
    port = await ops.start()
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            assert (await client.get("/healthz")).status_code == 200, "starting within the bound: alive"
            readiness.startup_deadline = time.monotonic() - STARTUP_EXIT_GRACE_S - 1
            late = await client.get("/healthz")
            assert late.status_code == 503 and late.json()["status"] == "startup_overdue"
            readiness.startup_deadline = None  # started (or stopped): the bound no longer applies
            assert (await client.get("/healthz")).status_code == 200
    finally:
        await ops.stop()


def test_the_step_bound_must_fit_in_the_start_up_bound() -> None:
    with pytest.raises(ConfigError, match="STREAMTTS_STARTUP_TIMEOUT_S"):
        PipelineSettings.of(startup_timeout_s=5, startup_step_timeout_s=10)
    with pytest.raises(ConfigError, match="STARTUP_STEP_TIMEOUT_S"):
        PipelineSettings.of(startup_step_timeout_s=0)
    assert (
        PipelineSettings.from_env({"STREAMTTS_STARTUP_TIMEOUT_S": "300"}).operations.startup_timeout_s == 300
    )


def test_errors_are_described_in_one_line() -> None:
    assert describe(TimeoutError()) == "TimeoutError"
    assert describe(OSError("refused\nsecond line")) == "OSError: refused"
