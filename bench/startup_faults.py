"""Start-up as a fault window, step by step: a worker's broker is SIGKILLed at each of its
start-up steps in turn (restarted after `down_s`), and the worker must become ready within
`READY_WITHIN_S` of the broker's return, then complete a request; its /healthz is asked all
along and must never fail while the start-up is within its bound.

The steps are not listed here: a clean start of the same worker is watched first and its
`start_step` events, in order, are the steps swept. The verdict comes from outside the
worker: its probes over HTTP and a result read off tts.results by a plain consumer.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Iterator
from dataclasses import KW_ONLY, dataclass, field
from typing import ClassVar

import aiohttp

from streamtts.bench.tables import markdown_rows
from streamtts.infra.local.stack import LocalStack
from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import TTSRequest
from streamtts.worker import Worker

READY_WITHIN_S = 30.0
"""A worker becomes ready within this of its broker's return (the issue's bound)."""
Say = Callable[[str], None]


@dataclass
class StepOutcome:
    step: str
    ready_after_return_s: float | None = None
    """Seconds from the broker's return to /readyz 200 (None: never, within the wait)."""
    retries: int = 0
    """Failed start-up tries the worker retried (its `start_retry` events)."""
    completed: bool = False
    """A request submitted after it was ready completed."""
    failed_steps: list[str] = field(default_factory=list)
    """Each failed attempt: its step and error (the first few)."""
    healthz_failures: list[str] = field(default_factory=list)
    """/healthz answers other than 200 while it started (must stay empty within the bound)."""
    error: str = ""

    @property
    def ok(self) -> bool:
        ready = self.ready_after_return_s is not None and self.ready_after_return_s <= READY_WITHIN_S
        return ready and self.completed and not self.healthz_failures and not self.error

    def row(self) -> dict[str, object]:
        ready = self.ready_after_return_s
        return {
            "killed at step": self.step,
            "ready after return s": "never" if ready is None else round(ready, 1),
            "retries": self.retries,
            "request completed": self.completed,
            "healthz failures": len(self.healthz_failures),
            "ok": self.ok,
            "first failures": "; ".join(dict.fromkeys(self.failed_steps)),
        }


class _StepWatch(logging.Handler):
    """Watches the worker's `start_step` events; SIGKILLs the broker as step `target` begins.
    Runs on the event loop's thread (log calls are synchronous), so the kill lands before the
    step's first request to the broker."""

    def __init__(self, target: str | None, kill: Callable[[], None]) -> None:
        super().__init__(logging.INFO)
        self.target = target
        self.kill = kill
        self.steps: list[str] = []
        self.retries = 0
        self.failed_steps: list[str] = []
        """Each failed attempt's step and error, as the worker logged them."""
        self.killed = asyncio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        event = record.getMessage()
        if event == "start_retry":
            self.retries += 1
            self.failed_steps.append(f"{getattr(record, 'step', '')}: {getattr(record, 'error', '')}"[:160])
        if event != "start_step":
            return
        step = str(getattr(record, "step", ""))
        self.steps.append(step)
        if step == self.target and not self.killed.is_set():
            self.kill()
            self.killed.set()


@dataclass(eq=False)
class StartupFaultSweep:
    """Kill the broker of `stack` at a worker's start-up steps, one run per step."""

    stack: LocalStack
    kafka: KafkaSettings
    make_worker: Callable[[], Worker]
    _: KW_ONLY
    down_s: float = 2.0
    say: Say = lambda _m: None
    _log: ClassVar[logging.Logger] = logging.getLogger("streamtts.worker")
    """The worker's logger (one per name: the same object the worker logs to)."""

    async def steps(self) -> list[str]:
        """The start-up steps of a clean start, in the order the worker began them."""
        watch = _StepWatch(None, lambda: None)
        worker = self.make_worker()
        with self._watching(watch):
            try:
                await worker.start()
            finally:
                await worker.stop()
        return watch.steps

    @contextlib.contextmanager
    def _watching(self, watch: _StepWatch) -> Iterator[None]:
        """`watch` sees the worker's INFO events for the block, whatever the log level."""
        level = self._log.level
        self._log.setLevel(logging.INFO)
        self._log.addHandler(watch)
        try:
            yield
        finally:
            self._log.removeHandler(watch)
            self._log.setLevel(level)

    async def run(self, steps: list[str]) -> list[StepOutcome]:
        outcomes = []
        for step in steps:
            outcome = await self.kill_at(step)
            self.say(f"[startup] killed at {step!r}: {outcome.row()}")
            outcomes.append(outcome)
        return outcomes

    async def kill_at(self, step: str) -> StepOutcome:
        outcome = StepOutcome(step)
        watch = _StepWatch(step, self._kill_broker)
        returned: list[float] = []
        worker = self.make_worker()
        with self._watching(watch):
            restart = asyncio.create_task(self._restart_after_kill(watch, returned))
            probe: asyncio.Task[None] | None = None
            try:
                starting = asyncio.create_task(worker.start())
                await worker.ops_started.wait()
                assert worker.ops_port is not None, "the sweep asks the worker's own probes"
                probe = asyncio.create_task(self._probe_healthz(worker.ops_port, outcome))
                bound = worker.pipeline.operations.startup_timeout_s + 60
                await asyncio.wait_for(starting, bound)
                await restart  # a step the kill did not fail still waits for the broker's return
                outcome.ready_after_return_s = await self._ready_after(worker.ops_port, returned[0])
                outcome.retries = watch.retries
                outcome.failed_steps = watch.failed_steps[:3]
                outcome.completed = await self._one_request()
            except Exception as err:  # the outcome says what failed; the sweep goes on
                outcome.error = f"{type(err).__name__}: {err}"[:300]
            finally:
                if probe is not None:
                    probe.cancel()
                restart.cancel()
                await asyncio.gather(restart, *(p for p in [probe] if p), return_exceptions=True)
                await worker.stop()
        if self.stack.kafka.pid() is None:  # a run that failed before the restart
            await asyncio.to_thread(self.stack.up, lambda _m: None, with_minio=False)
        return outcome

    def _kill_broker(self) -> None:
        pid = self.stack.kafka.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)

    async def _restart_after_kill(self, watch: _StepWatch, returned: list[float]) -> None:
        await watch.killed.wait()
        async with asyncio.timeout(30):
            while self.stack.kafka.pid() is not None:  # noqa: ASYNC110 - a foreign pid has no event
                await asyncio.sleep(0.05)
        await asyncio.sleep(self.down_s)  # the outage itself
        await asyncio.to_thread(self.stack.up, lambda _m: None, with_minio=False)
        returned.append(time.monotonic())

    async def _probe_healthz(self, port: int, outcome: StepOutcome) -> None:
        """/healthz every 0.25 s while the worker starts (its liveness, as a kubelet sees it)."""
        async with aiohttp.ClientSession() as session:
            while True:
                try:
                    async with session.get(f"http://127.0.0.1:{port}/healthz") as resp:
                        if resp.status != 200:
                            outcome.healthz_failures.append(f"{resp.status} {await resp.text()}"[:200])
                except aiohttp.ClientError as err:
                    outcome.healthz_failures.append(f"{type(err).__name__}")
                await asyncio.sleep(0.25)  # a probe's period

    async def _ready_after(self, port: int, returned_at: float) -> float | None:
        async with aiohttp.ClientSession() as session:
            deadline = returned_at + READY_WITHIN_S + 30
            while time.monotonic() < deadline:
                async with session.get(f"http://127.0.0.1:{port}/readyz") as resp:
                    if resp.status == 200:
                        return time.monotonic() - returned_at
                await asyncio.sleep(0.1)  # a probe's period: readiness has no event outside
        return None

    async def _one_request(self) -> bool:
        request = TTSRequest.new("The line is back. Thanks for waiting.", language="en", voice="en_joe")
        async with ResultWaiter(self.kafka) as waiter:
            async with RequestProducer(self.kafka) as producer:
                await producer.submit(request)
            results = await waiter.wait([request.request_id], timeout_s=60)
        return results[request.request_id].status == "completed"


def markdown(outcomes: list[StepOutcome]) -> str:
    return markdown_rows([o.row() for o in outcomes])
