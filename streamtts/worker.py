"""Run pipeline stages in this process: all of them (local default) or a chosen few.

Several processes running the same stage share its work through the stage's consumer group.
The worker also owns the process's operations surface: /healthz, /readyz, /metrics, the
canary (on synthesize workers), consumer-lag metrics, and a bounded graceful shutdown.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from streamtts.errors import ConfigError, StreamTTSError
from streamtts.runtime.cancellations import CancelWatch
from streamtts.runtime.faust_app import group_id
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.lexicons import LexiconBook
from streamtts.runtime.readiness import Readiness
from streamtts.runtime.release_watch import ReleaseWatch
from streamtts.runtime.settings import PipelineSettings, Settings, voice_map
from streamtts.runtime.stage import Stage
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.schemas.names import POOLS, STAGES
from streamtts.schemas.release import BASE_RELEASE

if TYPE_CHECKING:  # the speech stack is heavy: imported only by workers that synthesize
    from streamtts.processors.synthesize.renderer import SegmentRenderer

log = logging.getLogger("streamtts.worker")


class Worker:
    """Owns the stage services of one process; starts them downstream-first, stops upstream-first."""

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
    ) -> None:
        unknown = [s for s in stages if s not in STAGES]
        if unknown:
            raise ConfigError(f"unknown stage {unknown[0]!r}; stages are {', '.join(STAGES)}")
        bad_pool = [p for p in pools if p not in POOLS]
        if bad_pool or not pools:
            raise ConfigError(f"unknown pool {bad_pool[0] if bad_pool else ''!r}; pools are short, long")
        self.stages = [s for s in STAGES if s in stages]
        self.pools = [p for p in POOLS if p in pools]
        self.settings = settings
        self.pipeline = pipeline
        self.topics = TopicNames(settings.kafka.topic_prefix)
        self.telemetry = Telemetry()
        self.readiness = Readiness(needs_model="synthesize" in self.stages)
        self._renderer = renderer
        self._owns_renderer = renderer is None
        """A renderer handed in (tests, the demo) belongs to the caller: not closed here."""
        self._sink_namespace = sink_namespace
        self._ops_enabled = ops
        self.services: list[Stage] = []
        self.ops: Any = None
        self.canary: Any = None
        self._lag: Any = None
        self.cancels: CancelWatch | None = None
        """The process's view of `tts.control` (synthesize drops cancelled work)."""
        self.lexicons: LexiconBook | None = None
        """The process's view of `tts.lexicons` (segment applies each tenant's lexicon)."""
        self.releases: ReleaseWatch | None = None
        """The process's view of the release routing rule (the segment stage routes by it)."""
        self.release_guard: Any = None
        """Automatic rollback of a failing candidate (with the segment stage, if enabled)."""
        self.canary_reports: Any = None
        """A candidate release's synthesize worker reports its canary to the release guard."""
        self.ops_started = asyncio.Event()
        """Set once /healthz, /readyz and /metrics answer (before the model loads)."""

    @property
    def ops_port(self) -> int | None:
        return self.ops.port if self.ops else None

    async def start(self) -> None:
        started = time.perf_counter()
        kafka, pipe, tel = self.settings.kafka, self.pipeline, self.telemetry
        # 1. Probes first: liveness answers while the model loads; readiness says why not yet.
        if self._ops_enabled:
            from streamtts.runtime.ops_server import OpsServer

            self.ops = OpsServer(self.readiness, tel, port=pipe.ops_port)
            port = await self.ops.start()
            log_event(log, "ops_listening", port=port, paths=["/healthz", "/readyz", "/metrics"])
            self.ops_started.set()
        # 2. The model (CPU-bound load + warm-up, off the loop) and the canary's reference.
        if "synthesize" in self.stages:
            await self._load_model()
        # 3. Cancels (synthesize skips a cancelled request's segments: its markers tell encode
        #    and sink), then the stages, downstream first: when segment emits, its consumers
        #    are already there.
        if "synthesize" in self.stages:
            self.cancels = CancelWatch(kafka, self.topics.control)
            await self.cancels.start()
            tel.release_info.labels(pipe.release).set(1)
        if "segment" in self.stages:
            # Caught up before the first request: a restarted segment worker routes by the
            # rule in force, never by "no rule" for a moment.
            self.releases = ReleaseWatch(kafka, self.topics.config)
            await self.releases.start()
            await asyncio.wait_for(self.releases.caught_up.wait(), timeout=30)
        # Lexicons: the segment stage applies each tenant's; loaded before it takes a request.
        if "segment" in self.stages:
            self.lexicons = LexiconBook(kafka, self.topics.lexicons)
            await self.lexicons.start()
            try:
                await asyncio.wait_for(self.lexicons.caught_up.wait(), timeout=30)
            except TimeoutError:
                log_event(log, "lexicons_not_caught_up", logging.WARNING, topic=self.topics.lexicons)
        for stage in reversed(self.stages):
            for service in self._build(stage):
                await service.start()
                self.services.append(service)
                log_event(log, "stage_started", stage=service.group)
        self.readiness.assignments = lambda: {s.group: bool(s.assigned) for s in self.services}
        self.readiness.failures = self.failures
        self.readiness.stages_started = True
        # 4. Lag of every group this process belongs to, as metrics.
        if self._ops_enabled:
            from streamtts.runtime.lag import LagMonitor

            groups = {group_id(kafka, s.group): s.sources for s in self.services}
            self._lag = LagMonitor(kafka, groups, tel)
            await self._lag.start()
        if self.canary:
            await self.canary.start()
        # 5. The release guard next to the router: it shares the router's view of the rule.
        if self.releases is not None and pipe.release_guard:
            from streamtts.runtime.auto_rollback import AutoRollback

            self.release_guard = AutoRollback(kafka, tel, releases=self.releases)
            await self.release_guard.start()
        log_event(
            log,
            "worker_started",
            stages=self.stages,
            pools=self.pools if "synthesize" in self.stages else None,
            release=pipe.release if "synthesize" in self.stages else None,
            ops_port=self.ops_port,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def _load_model(self) -> None:
        from streamtts.processors.synthesize.speech_stack import build_renderer
        from streamtts.runtime.canary import Canary

        renderer = self._renderer
        if renderer is None:
            counters = self.telemetry.render_cache

            def count(kind: str, tier: str, n: int) -> None:
                counters[kind].labels(tier).inc(n)

            renderer = self._renderer = await asyncio.to_thread(
                build_renderer, self.pipeline, self.settings.s3, count
            )
        for rendered in voice_map(self.pipeline.release_voices).values():
            renderer.synth.registry.spec(rendered)  # a release mapping to an unknown voice fails at start
        voice = self.pipeline.warm_voices[0] if self.pipeline.warm_voices else "jm_kumo"
        spec = renderer.synth.registry.spec(voice)
        lang = "en" if "en" in spec.languages else sorted(spec.languages)[0]

        def speak(text: str) -> Any:
            import numpy as np

            chunks = list(renderer.synth.synthesize_span(text, lang, voice, 1.0, None))
            return np.concatenate([c.samples for c in chunks])

        if self.pipeline.release != BASE_RELEASE:
            from streamtts.runtime.canary_reports import CanaryReports

            self.canary_reports = CanaryReports(
                self.settings.kafka, self.topics.config, self.pipeline.release
            )
            await self.canary_reports.start()

        def on_result(result: Any) -> None:
            if self.canary_reports is not None:
                self.canary_reports.report(result.ok, result.reason)
            self.readiness.canary_ok = result.ok
            self.readiness.canary_reason = result.reason
            self.telemetry.canary_ok.set(1 if result.ok else 0)
            self.telemetry.canary_runs.labels("ok" if result.ok else "failed").inc()

        self.canary = Canary(
            speak,
            spec.sample_rate,
            interval_s=self.pipeline.canary_interval_s,
            executor=None,
            on_result=on_result,
        )
        reference = await asyncio.to_thread(self.canary.establish)
        on_result(reference)
        self.readiness.model_ready = True
        self.telemetry.model_ready.set(1)

    def _build(self, stage: str) -> list[Stage]:
        kafka, pipe, tel = self.settings.kafka, self.pipeline, self.telemetry
        if stage == "sink":
            from streamtts.sinks.completion_sink import CompletionSink

            return [
                CompletionSink(
                    kafka,
                    self.settings.s3,
                    pipe,
                    self.topics,
                    namespace=self._sink_namespace,
                    telemetry=tel,
                )
            ]
        if stage == "encode":
            from streamtts.processors.encode.stage import EncodeStage

            return [EncodeStage(kafka, pipe, self.topics, telemetry=tel)]
        if stage == "synthesize":
            from streamtts.processors.synthesize.release_profile import ReleaseProfile
            from streamtts.processors.synthesize.stage import SynthesizeStage

            assert self._renderer is not None, "the model is loaded before the synthesize stage starts"
            profile = ReleaseProfile(pipe.release, voice_map(pipe.release_voices))
            return [
                SynthesizeStage(
                    kafka,
                    pipe,
                    self._renderer,
                    self.topics,
                    pool=p,
                    telemetry=tel,
                    cancels=self.cancels,
                    profile=profile,
                )
                for p in self.pools
            ]
        from streamtts.processors.segment.stage import SegmentStage
        from streamtts.processors.synthesize.registry import VoiceRegistry

        # Reuse the synthesizer's registry when this process has one (voice packs load once);
        # otherwise one that only resolves names (engines load lazily, never in this stage).
        voices = self._renderer.synth.registry if self._renderer is not None else VoiceRegistry(threads=1)
        return [
            SegmentStage(
                kafka,
                pipe,
                self.topics,
                voices=voices,
                telemetry=tel,
                lexicons=self.lexicons,
                releases=self.releases,
            )
        ]

    def failures(self) -> dict[str, str]:
        """Stages whose consuming loop died: group → why (readiness turns red on any)."""
        out = {}
        for s in self.services:
            err = s.failure()
            if err is not None:
                out[s.group] = f"{type(err).__name__}: {str(err)[:200]}"
        return out

    async def stop(self) -> None:
        # Upstream first: stop taking new work, let downstream drain what is in flight.
        self.readiness.stages_started = False
        if self.release_guard is not None:
            await self.release_guard.stop()
            self.release_guard = None
        if self.canary:
            await self.canary.stop()
        if self.canary_reports is not None:
            await self.canary_reports.stop()
            self.canary_reports = None
        for service in reversed(self.services):
            try:
                await service.stop()
            except Exception as err:  # keep stopping the others
                log_event(log, "stage_stop_failed", logging.ERROR, stage=service.name, error=str(err)[:200])
        self.services.clear()
        if self.cancels is not None:
            await self.cancels.stop()
            self.cancels = None
        if self.lexicons is not None:
            await self.lexicons.stop()
            self.lexicons = None
        if self.releases is not None:
            await self.releases.stop()
            self.releases = None
        if self._renderer is not None and self._owns_renderer:
            self._renderer.close()  # the budget guard's threads
        if self._lag:
            await self._lag.stop()
        if self.ops:
            await self.ops.stop()
        log_event(log, "worker_stopped", stages=self.stages)

    def service(self, name: str) -> Any:
        return next(s for s in self.services if s.group == name)


class StageFailed(StreamTTSError):
    """A stage's consuming loop died: the process must exit non-zero so it is restarted."""


SUPERVISE_INTERVAL_S = 0.5


async def run_until_signalled(worker: Worker) -> None:
    """Run until SIGTERM/SIGINT, then stop within the configured bound. A stage whose loop
    dies ends the run too (readiness is red meanwhile): `StageFailed` after the stop."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await worker.start()
    failed: dict[str, str] = {}
    try:
        # Supervision: the stages report a dead loop through failure(); poll it between
        # waits for the signal (cheap: a few attribute reads).
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=SUPERVISE_INTERVAL_S)
            failed = worker.failures()
            if failed:
                log_event(log, "stage_failed", logging.ERROR, failures=failed)
                break
    finally:
        log_event(log, "shutdown_requested", timeout_s=worker.pipeline.shutdown_timeout_s)
        try:
            # Stopping = stop fetching, finish or hand back the record in hand (uncommitted
            # records go to the next owner), flush producers, commit. Bounded: a stuck
            # inference must not keep a pod alive forever; what it held is redelivered.
            await asyncio.wait_for(worker.stop(), timeout=worker.pipeline.shutdown_timeout_s)
        except TimeoutError:
            log_event(log, "shutdown_timeout", logging.ERROR, timeout_s=worker.pipeline.shutdown_timeout_s)
    if failed:
        raise StageFailed("; ".join(f"{k}: {v}" for k, v in failed.items()))
