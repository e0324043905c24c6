"""The worker's start-up steps without a broker (stand-in stages and side services): a step
that fails, hangs, or whose client raises its own CancelledError is unwound — what that try
started is stopped — and tried again; the steps done before it are not restarted; past the
start-up bound the worker stops everything and raises one `StartupFailed` line."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from aiokafka.errors import InvalidSessionTimeoutError, KafkaConnectionError

from streamtts.errors import ConfigError
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.runtime.startup import StartupFailed
from streamtts.runtime.topology import StageSpec
from streamtts.worker import SIDE_SERVICE_STARTERS, Worker

STAGES = ["encode", "sink"]


class Flaky:
    """A stand-in stage whose first `fails` starts fail the way `how` says."""

    def __init__(self, group: str, events: list[str], how: str, fails: int, tries: dict[str, int]) -> None:
        self.name = self.group = group
        self.sources: list[str] = []
        self.assigned = True
        self.events, self.how, self.fails, self.tries = events, how, fails, tries

    async def start(self) -> None:
        self.tries[self.group] = self.tries.get(self.group, 0) + 1
        self.events.append(f"start {self.group}")
        if self.tries[self.group] > self.fails:
            return
        if self.how == "refused":
            raise KafkaConnectionError("Unable to bootstrap from [('127.0.0.1', 1)]")
        if self.how == "hangs":
            await asyncio.Event().wait()
        if self.how == "cancelled-inside":
            inner = asyncio.create_task(asyncio.sleep(10))
            await asyncio.sleep(0)
            inner.cancel()
            await inner  # the client's own task: CancelledError escapes, as faust's does
        if self.how == "session-refused":
            raise InvalidSessionTimeoutError()
        if self.how == "config":
            raise ConfigError("voice 'x' is not known")

    async def stop(self) -> None:
        self.events.append(f"stop {self.group}")

    def failure(self) -> None:
        return None


@pytest.fixture
def events(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    out: list[str] = []
    for svc in SIDE_SERVICE_STARTERS:

        async def start(worker: Worker, svc: str = svc) -> None:
            out.append(f"start {svc}")

        monkeypatch.setitem(SIDE_SERVICE_STARTERS, svc, start)
    return out


def _worker(
    monkeypatch: pytest.MonkeyPatch, events: list[str], how: str, fails: int, bound_s: float
) -> Worker:
    tries: dict[str, int] = {}

    # The sink starts first (downstream first); the encode stage is the one that fails.
    def flaky(self: StageSpec) -> Any:
        name = self.name
        return lambda parts, spec, g: Flaky(name, events, how if name == "encode" else "ok", fails, tries)

    monkeypatch.setattr(StageSpec, "factory", flaky)
    pipe = PipelineSettings.of(startup_timeout_s=bound_s, startup_step_timeout_s=0.3)
    settings = Settings(kafka=KafkaSettings(bootstrap_servers="127.0.0.1:1"), s3=S3Settings())
    return Worker(STAGES, settings, pipe, ops=False)


@pytest.mark.parametrize("how", ["refused", "hangs", "cancelled-inside"])
async def test_a_failing_step_is_unwound_and_retried_alone(
    monkeypatch: pytest.MonkeyPatch, events: list[str], how: str
) -> None:
    worker = _worker(monkeypatch, events, how, fails=2, bound_s=30)
    await worker.start()
    try:
        assert events == [
            "start sink",
            "start encode",
            "stop encode",
            "start encode",
            "stop encode",
            "start encode",
        ], "only the failed step's stage is stopped and started again; the sink is left running"
        assert [s.group for s in worker.services] == ["sink", "encode"]
        assert worker.readiness.stages_started and worker.readiness.startup_deadline is None
    finally:
        await worker.stop()
    assert events[-2:] == ["stop encode", "stop sink"]


async def test_past_the_bound_everything_stops_and_one_line_names_the_step(
    monkeypatch: pytest.MonkeyPatch, events: list[str]
) -> None:
    worker = _worker(monkeypatch, events, "refused", fails=10**6, bound_s=1.5)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises(StartupFailed) as failed:
        await worker.start()
    assert loop.time() - started < 1.5 + 0.5
    message = str(failed.value)
    assert "\n" not in message and "'stage encode'" in message and "KafkaConnectionError" in message
    assert "127.0.0.1:1" in message and "STREAMTTS_STARTUP_TIMEOUT_S" in message
    assert events.count("start encode") >= 3, "retried with backoff before giving up"
    assert events[-1] == "stop sink" and worker.services == [], "nothing left running"


async def test_a_configuration_error_is_not_retried(
    monkeypatch: pytest.MonkeyPatch, events: list[str]
) -> None:
    worker = _worker(monkeypatch, events, "config", fails=1, bound_s=30)
    with pytest.raises(ConfigError):
        await worker.start()
    assert events.count("start encode") == 1


async def test_a_setting_the_brokers_refuse_ends_start_up_at_once_naming_it(
    monkeypatch: pytest.MonkeyPatch, events: list[str]
) -> None:
    worker = _worker(monkeypatch, events, "session-refused", fails=1, bound_s=30)
    with pytest.raises(ConfigError) as refused:
        await worker.start()
    assert "STREAMTTS_SESSION_TIMEOUT_S" in str(refused.value) and "\n" not in str(refused.value)
    assert events.count("start encode") == 1, "a refused setting is not retried for 30 s"
    assert worker.services == []
