"""Run pipeline stages in this process: all of them (local default) or a chosen few.

Several processes running the same stage share its work through the stage's consumer group.
The worker also owns the process's operations surface: /healthz, /readyz, /metrics, the
canary (on synthesize workers), consumer-lag metrics, and a bounded graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any

from streamtts.errors import ConfigError, StreamTTSError
from streamtts.features.control.cancel_watch import CancelWatch
from streamtts.features.lexicons.book import LexiconBook
from streamtts.features.releases.watch import ReleaseWatch
from streamtts.runtime.faust_app import group_id
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.lifecycle import AsyncLifecycle, unless_cancelled_inside
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.readiness import Readiness
from streamtts.runtime.settings import Settings
from streamtts.runtime.stage import Stage
from streamtts.runtime.startup import (
    StartupClock,
    StartupFailed,
    StartupPolicy,
    StepTimedOut,
    describe,
    refusal,
)
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import STAGES, GroupSpec, StageSpec, select, services_for
from streamtts.runtime.tracing import Tracing
from streamtts.schemas.names import POOLS
from streamtts.worker_services import SIDE_SERVICE_STARTERS, stage_parts

if TYPE_CHECKING:  # the speech stack is heavy: imported only by workers that synthesize
    from streamtts.processors.synthesize.renderer import SegmentRenderer

log = logging.getLogger("streamtts.worker")

Stop = Callable[[], Awaitable[None]]
StepStart = Callable[["Worker"], Awaitable[None]]
"""A start-up step: starts something of the worker's (and lists how to stop it)."""


class Worker:
    """Owns the stage services of one process: the stages `runtime.topology` declares for the
    chosen names, and the side services they need; starts them downstream-first, stops them
    in the reverse order of their start."""

    def __init__(
        self,
        stages: Sequence[str],
        settings: Settings,
        pipeline: PipelineSettings,
        *,
        renderer: SegmentRenderer | None = None,
        sink_namespace: str = "",
        pools: Sequence[str] = POOLS,
        ops: bool = True,
        telemetry: Telemetry | None = None,
    ) -> None:
        """telemetry: metrics and spans (a test's, to read its spans); None: the process's own,
        its spans exported as `settings.tracing` says."""
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            raise ConfigError(f"unknown stage {unknown[0]!r}; stages are {', '.join(STAGES)}")
        bad_pool = [p for p in pools if p not in POOLS]
        if bad_pool or not pools:
            raise ConfigError(f"unknown pool {bad_pool[0] if bad_pool else ''!r}; pools are short, long")
        self.specs: list[StageSpec] = select(list(stages))
        """The stages this process runs, in data-path order."""
        self.stages = [spec.name for spec in self.specs]
        self.pools = [p for p in POOLS if p in pools]
        self.side_services = services_for(self.specs)
        """The side services those stages need, in start order."""
        self.settings = settings
        self.pipeline = pipeline
        self.topics = TopicNames(settings.kafka.topic_prefix)
        self._owns_telemetry = telemetry is None
        self.telemetry = telemetry or Telemetry(Tracing.to(settings.tracing, "worker"))
        self.readiness = Readiness(needs_model=any(s.name == "model" for s in self.side_services))
        self._renderer = renderer
        self._owns_renderer = renderer is None
        """A renderer handed in (tests, the demo) belongs to the caller: not closed here."""
        self._sink_namespace = sink_namespace
        self._ops_enabled = ops
        self._stops: list[tuple[str, Stop]] = []
        """What was started, with how to stop it; `stop` unwinds it last-in, first-out."""
        self._step_now = "start"
        """The start-up step running (or the last one run): named when start-up fails."""
        self.services: list[Stage] = []
        self.ops: Any = None
        self.canary: Any = None
        self._canary_path: Any = None
        """The canary's in-memory topology (see `_start_model`)."""
        self._lag: Any = None
        self.lanes: Any = None
        """The process's inference lanes, shared by its synthesize stages (None: "fifo")."""
        self._name_registry: Any = None
        """Resolves voice names for a segment stage in a process with no model."""
        self.side: dict[str, AsyncLifecycle] = {}
        """The side services running now, by name (`worker_services`); gone once stopped."""
        self.ops_started = asyncio.Event()
        """Set once /healthz, /readyz and /metrics answer (before the model loads)."""

    @property
    def ops_port(self) -> int | None:
        return self.ops.port if self.ops else None

    @property
    def renderer(self) -> SegmentRenderer | None:
        """The loaded model (once the "model" side service started), else the one handed in."""
        return self._renderer

    def stage_groups(self) -> list[tuple[StageSpec, GroupSpec]]:
        """The consumer groups this worker runs, in start order: downstream stages first
        (when segment emits, its consumers are already there); synthesize: one per pool."""
        return [(spec, group) for spec in reversed(self.specs) for group in spec.groups_for(self.pools)]

    @property
    def cancels(self) -> CancelWatch | None:
        """The process's view of `tts.control` (synthesize drops cancelled work)."""
        held = self.side.get("cancels")
        return held if isinstance(held, CancelWatch) else None

    @property
    def lexicons(self) -> LexiconBook | None:
        """The process's view of `tts.lexicons` (segment applies each tenant's lexicon)."""
        held = self.side.get("lexicons")
        return held if isinstance(held, LexiconBook) else None

    @property
    def releases(self) -> ReleaseWatch | None:
        """The process's view of the release routing rule (the segment stage routes by it)."""
        held = self.side.get("releases")
        return held if isinstance(held, ReleaseWatch) else None

    @property
    def release_guard(self) -> Any:
        """Automatic rollback of a failing candidate (with the segment stage, if enabled)."""
        return self.side.get("release_guard")

    @property
    def load_reports(self) -> Any:
        """The process's load reporter (synthesize workers with `load_report_s` > 0)."""
        return self.side.get("load_reports")

    @property
    def canary_reports(self) -> Any:
        """A candidate release's synthesize worker reports its canary to the release guard."""
        return self.side.get("canary_reports")

    def _on_stop(self, what: str, stop: Stop) -> None:
        self._stops.append((what, stop))

    async def start(self) -> None:
        """Start the probes, the model, then the Kafka steps: the side services, the stages
        (downstream first), the lag monitor and the watchers of running stages.

        Each Kafka step is bounded (`startup_step_timeout_s`) and retried on its own with
        backoff when it fails or overruns (its broker died mid-start), until
        `startup_timeout_s`; then `StartupFailed`, one line naming the step and the error,
        with everything started stopped. A configuration error is not retried."""
        started = time.perf_counter()
        ops = self.pipeline.operations
        policy = StartupPolicy(bound_s=ops.startup_timeout_s, step_timeout_s=ops.startup_step_timeout_s)
        try:
            # 1. Probes first: liveness answers while the model loads; readiness says why not yet.
            if self._ops_enabled:
                await self._start_ops()
            # 2. The model: CPU-bound and local, loaded once whatever Kafka does meanwhile.
            if any(svc.name == "model" for svc in self.side_services):
                await SIDE_SERVICE_STARTERS["model"](self)
            #    And what the stages load for the whole process, before any of them joins its
            #    group: a load that holds the GIL then starves no running stage's heartbeats.
            for spec in self.specs:
                if (warm := spec.warmer()) is not None:
                    await warm()
            # 3. Whether a broker answers, for readiness: a worker cut off from its brokers
            #    says so rather than look ready while it renders into the void.
            await self._start_broker_watch()
            # 4. The Kafka steps, each retried until the start-up bound.
            clock = StartupClock(policy)
            self.readiness.startup_deadline = time.monotonic() + clock.remaining()
            retries = await self._start_kafka_steps(clock, policy)
        except BaseException:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self.stop(), timeout=ops.shutdown_timeout_s)
            raise
        self.readiness.startup_deadline = None
        pooled = any(g.pool for spec in self.specs for g in spec.groups)
        log_event(
            log,
            "worker_started",
            stages=self.stages,
            pools=self.pools if pooled else None,
            release=self.pipeline.release.name if any(spec.release_lanes for spec in self.specs) else None,
            ops_port=self.ops_port,
            start_retries=retries,
            duration_ms=_ms_since(started),
        )

    async def _start_kafka_steps(self, clock: StartupClock, policy: StartupPolicy) -> int:
        """The Kafka steps in order, each retried on its own; returns how many retries it took."""
        retries = 0
        # a. The side services the stages need from their first record, in `SIDE_SERVICES`
        #    order: cancels, the release rule and lexicons, each caught up.
        for svc in self.side_services:
            if svc.before_stages and svc.name != "model":
                retries += await self._retrying(svc.name, SIDE_SERVICE_STARTERS[svc.name], clock, policy)
        # b. The stages, one service per consumer group, downstream first (`stage_groups`).
        for spec, group in self.stage_groups():
            name = f"stage {spec.group_role(group, self.pipeline.release.name)}"
            retries += await self._retrying(name, _stage_starter(spec, group), clock, policy)
        self.readiness.assignments = lambda: {s.group: bool(s.assigned) for s in self.services}
        self.readiness.failures = self.failures
        self.readiness.stages_started = True
        # c. Lag of every group this process belongs to, as metrics.
        if self._ops_enabled:
            retries += await self._retrying("lag", Worker._start_lag, clock, policy)
        # d. The side services that watch running stages: the canary, the release guard.
        for svc in self.side_services:
            if not svc.before_stages:
                retries += await self._retrying(svc.name, SIDE_SERVICE_STARTERS[svc.name], clock, policy)
        return retries

    async def _retrying(self, name: str, start: StepStart, clock: StartupClock, policy: StartupPolicy) -> int:
        """One step until it succeeds: a failed or overrunning try (its broker died mid-step)
        is unwound, what it started stopped, and tried again after a backoff. The steps
        already done stay: each rides out a broker outage as a running worker does. Past the
        start-up bound, `StartupFailed`. Returns how many retries it took."""
        backoffs = policy.backoffs()
        tries = 1
        while True:
            mark = len(self._stops)
            try:
                await self._step(name, start, clock)
                return tries - 1
            except StreamTTSError:
                raise  # a configuration error: retrying cannot help
            except Exception as err:
                why = describe(err)
                await self._unwind(mark)
                if (
                    refused := refusal(err, session_timeout_s=self.pipeline.delivery.session_timeout_s)
                ) is not None:
                    raise refused from None
                delay = next(backoffs)
                if clock.remaining() <= delay:  # no time left for another try
                    raise StartupFailed(
                        f"worker could not start within {policy.bound_s:g} s "
                        f"(STREAMTTS_STARTUP_TIMEOUT_S): step {name!r} failed {tries} times, "
                        f"last with {why}; is Kafka at {self.settings.kafka.bootstrap_servers} reachable?"
                    ) from None
                log_event(
                    log,
                    "start_retry",
                    logging.WARNING,
                    step=name,
                    attempt=tries,
                    error=why,
                    retry_in_ms=round(delay * 1000),
                    remaining_s=round(clock.remaining(), 1),
                )
                await asyncio.sleep(delay)  # backoff before the next try: nothing to await
                tries += 1

    async def _step(self, name: str, start: StepStart, clock: StartupClock) -> None:
        """One start-up step, bounded: a client waiting on a broker that died is abandoned."""
        self._step_now = name
        bound = clock.step_bound()
        log_event(log, "start_step", step=name, bound_s=round(bound, 1))
        try:
            async with asyncio.timeout(bound):
                await unless_cancelled_inside(start(self))
        except TimeoutError as err:
            raise StepTimedOut(f"did not finish within {bound:.1f} s") from err

    async def _unwind(self, mark: int) -> None:
        """Stop what a failed try started (last first), back to `mark`. Each stop is bounded;
        one that overruns leaves a client of unknown state (a consumer that may still hold
        partitions), so the process gives up and its supervisor starts a clean one."""
        while len(self._stops) > mark:
            what, stop = self._stops.pop()
            bound = self.pipeline.operations.startup_step_timeout_s
            try:
                async with asyncio.timeout(bound):
                    await unless_cancelled_inside(stop())
            except TimeoutError:
                raise StartupFailed(
                    f"worker could not undo a failed start-up step: stopping {what} took over "
                    f"{bound:g} s (STREAMTTS_STARTUP_STEP_TIMEOUT_S); exiting for a clean restart"
                ) from None
            except Exception as err:  # a half-started client may fail its stop: it is gone anyway
                log_event(log, "stop_failed", logging.WARNING, service=what, error=describe(err))

    async def stop(self) -> None:
        """Stop everything started, last started first: the release guard and the canary,
        the lag monitor, the stages upstream first (stop taking new work, let downstream drain
        what is in flight), the side services under them, the model, the probes."""
        self.readiness.stages_started = False
        self.readiness.startup_deadline = None
        stopping = time.perf_counter()
        while self._stops:
            what, stop = self._stops.pop()
            started = time.perf_counter()
            try:
                await unless_cancelled_inside(stop())
            except Exception as err:  # keep stopping the others
                log_event(log, "stop_failed", logging.ERROR, service=what, error=str(err)[:200])
            # Each step's time: a stop that overruns its bound says which step held it.
            log_event(log, "service_stopped", service=what, duration_ms=_ms_since(started))
        if self._owns_telemetry:  # the last spans out (bounded by the exporter's timeout)
            await asyncio.to_thread(self.telemetry.tracing.shutdown)
        log_event(log, "worker_stopped", stages=self.stages, duration_ms=_ms_since(stopping))

    # -- process services ------------------------------------------------------------------
    async def _start_ops(self) -> None:
        from streamtts.runtime.ops_server import OpsServer

        self.ops = OpsServer(
            self.readiness,
            self.telemetry,
            port=self.pipeline.operations.ops_port,
            metrics_token=self.settings.metrics_token,
        )
        port = await self.ops.start()
        self._on_stop("ops", self.ops.stop)
        log_event(log, "ops_listening", port=port, paths=["/healthz", "/readyz", "/metrics"])
        self.ops_started.set()

    async def _start_broker_watch(self) -> None:
        from streamtts.runtime.broker_watch import BrokerWatch

        watch = BrokerWatch(self.settings.kafka)
        await watch.start()  # never fails: it probes in the background
        self._on_stop("broker_watch", watch.stop)

        def down() -> str | None:
            if watch.reachable:
                return None
            return f"no Kafka broker reachable for {watch.down_for:.0f} s ({watch.last_error})"

        self.readiness.brokers_down = down

    async def _start_lag(self) -> None:
        from streamtts.runtime.lag import LagMonitor

        kafka = self.settings.kafka
        groups = {group_id(kafka, s.group): s.sources for s in self.services}
        self._lag = LagMonitor(kafka, groups, self.telemetry)
        await self._lag.start()
        self._on_stop("lag", self._lag.stop)

    async def _start_side(self, what: str, service: AsyncLifecycle) -> None:
        """Start side service `what`, held in `side` until it is stopped. Its stop is listed
        before its start: a start that fails half-way (a consumer started, then the broker
        went away) is stopped by the unwind too."""
        self.side[what] = service

        async def stop() -> None:
            try:
                await service.stop()
            finally:
                self.side.pop(what, None)

        self._on_stop(what, stop)
        await service.start()

    def failures(self) -> dict[str, str]:
        """Stages whose consuming loop died: group → why (readiness turns red on any)."""
        out = {}
        for s in self.services:
            err = s.failure()
            if err is not None:
                out[s.group] = f"{type(err).__name__}: {str(err)[:200]}"
        return out

    def service(self, name: str) -> Any:
        return next(s for s in self.services if s.group == name)


def _stage_starter(spec: StageSpec, group: GroupSpec) -> StepStart:
    """A stage's start as a start-up step: the service built, listed and its stop listed
    before it starts (an unwind stops one that failed half-way), then started."""

    async def start(worker: Worker) -> None:
        service = spec.factory()(stage_parts(worker), spec, group)
        worker.services.append(service)

        async def stop() -> None:
            started = time.perf_counter()
            try:
                await unless_cancelled_inside(service.stop())
            except Exception as err:
                log_event(log, "stage_stop_failed", logging.ERROR, stage=service.group, error=describe(err))
            finally:
                worker.services.remove(service)
            log_event(log, "stage_stopped", stage=service.group, duration_ms=_ms_since(started))

        worker._on_stop(f"stage {service.group}", stop)
        await service.start()
        log_event(log, "stage_started", stage=service.group)

    return start


def _ms_since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)
