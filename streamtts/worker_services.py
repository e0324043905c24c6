"""How a worker starts each side service the topology names (`SIDE_SERVICES`): the model
and its canary, the cancels, the release rule and its guard, the lexicons, the load reports,
each held by the worker under its name (`Worker.side`) from its start until its stop; and
what its stages are built from (`stage_parts`: each stage builds itself, `StageSpec.build`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from streamtts.features.control.cancel_watch import CancelWatch
from streamtts.features.lexicons.book import LexiconBook
from streamtts.features.releases.profile import ReleaseProfile
from streamtts.features.releases.watch import ReleaseWatch
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.pipeline_settings import voice_map
from streamtts.runtime.stage import ReportsLoad
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.topology import SideService
from streamtts.schemas import LoadReport
from streamtts.schemas.load import CostLine
from streamtts.schemas.release import BASE_RELEASE

if TYPE_CHECKING:
    from streamtts.worker import Worker

log = logging.getLogger("streamtts.worker")


def stage_parts(worker: Worker) -> StageParts:
    """What `worker`'s stages are built from (`StageSpec.build`): its settings, and its
    model, lanes and side services as they are when a stage asks."""
    pieces: dict[str, Callable[[], Any]] = {
        name: partial(worker.side.get, name) for name in ("cancels", "lexicons", "releases")
    }
    return StageParts(
        worker.settings.kafka,
        worker.pipeline,
        worker.topics,
        worker.telemetry,
        s3=worker.settings.s3,
        namespace=worker._sink_namespace,
        pieces={
            **pieces,
            "model": lambda: worker.renderer,
            "voices": partial(_voices, worker),
            "lanes": lambda: worker.lanes,
            "release_profile": lambda: ReleaseProfile(
                worker.pipeline.release.name, voice_map(worker.pipeline.release.voices)
            ),
        },
    )


def _voices(worker: Worker) -> Any:
    """The model's registry where the process loaded one (voice packs load once); else one
    that only resolves names (engines load lazily, never in the segment stage)."""
    from streamtts.processors.synthesize.registry import VoiceRegistry

    if worker.renderer is not None:
        return worker.renderer.synth.registry
    if worker._name_registry is None:
        worker._name_registry = VoiceRegistry(threads=1)
    return worker._name_registry


async def start_model(worker: Worker) -> None:
    """The model (CPU-bound load + warm-up, off the loop) and the canary's reference."""
    from streamtts.processors.in_memory import InMemoryTopology
    from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
    from streamtts.processors.synthesize.speech_stack import build_lanes, build_renderer
    from streamtts.runtime.canary import Canary
    from streamtts.schemas import TTSRequest
    from streamtts.sinks.memory_store import MemoryObjectStore

    worker.telemetry.release_info.labels(worker.pipeline.release.name).set(1)
    renderer = worker._renderer
    if renderer is None:
        counters = worker.telemetry.render_cache

        def count(kind: str, tier: str, n: int) -> None:
            counters[kind].labels(tier).inc(n)

        renderer = worker._renderer = await asyncio.to_thread(
            build_renderer, worker.pipeline, worker.settings.s3, count
        )
    worker.lanes = build_lanes(worker.pipeline)
    worker._on_stop("model", partial(close_model, worker))
    for rendered in voice_map(worker.pipeline.release.voices).values():
        renderer.synth.registry.spec(rendered)  # a release mapping to an unknown voice fails at start
    voice = worker.pipeline.synthesis.warm_voices[0] if worker.pipeline.synthesis.warm_voices else "jm_kumo"
    spec = renderer.synth.registry.spec(voice)
    lang = "en" if "en" in spec.languages else sorted(spec.languages)[0]
    # The canary's request takes the path real requests take: the stages' own handlers,
    # in memory (their own telemetry: the canary is not counted as traffic). Its renderer
    # shares the model but has no time budgets and its own breaker: a budget overrun on a
    # busy worker would make it speak the fallback voice, a false "output changed".
    canary_renderer = SegmentRenderer(renderer.synth, budgets=Budgets.unbounded())
    # No lanes of its own: its one sentence is a first span, never cut into pieces.
    # Its stages log as the canary, warnings only: a render every minute is not traffic (a
    # test and an operator counting "synthesized" lines read it as a request).
    quiet = logging.getLogger("streamtts.canary.stages")
    quiet.setLevel(logging.WARNING)
    # Not warmed (`InMemoryTopology.warm`): its request names its language, so no detection.
    # The sink too, storing in memory what it would store in object storage (then forgotten).
    canary_path = worker._canary_path = InMemoryTopology(
        canary_renderer,
        worker.pipeline,
        worker.topics,
        lanes=False,
        log=quiet,
        object_store=MemoryObjectStore(),
    )

    async def speak(text: str) -> Any:
        import numpy as np

        request = TTSRequest.new(
            text, language=lang, voice=voice, format="pcm", sample_rate=spec.sample_rate, cache=False
        )
        chunks = await canary_path.render(request)
        return np.frombuffer(b"".join(c.pcm for c in chunks), dtype="<i2").astype(np.float32) / 32768

    def on_result(result: Any) -> None:
        if worker.canary_reports is not None:
            worker.canary_reports.report(result.ok, result.reason)
        worker.readiness.canary_ok = result.ok
        worker.readiness.canary_reason = result.reason
        worker.telemetry.canary_ok.set(1 if result.ok else 0)
        worker.telemetry.canary_runs.labels("ok" if result.ok else "failed").inc()

    worker.canary = Canary(
        speak,
        spec.sample_rate,
        interval_s=worker.pipeline.operations.canary_interval_s,
        on_result=on_result,
    )
    # Measured once per model, settings, voice and language: workers of one process that
    # share a model (a test session's, `streamtts chaos`'s) do not render it again each.
    reference = await renderer.synth.canary_references.establish(
        worker.canary, (worker.pipeline, voice, lang)
    )
    on_result(reference)
    worker.readiness.model_ready = True
    worker.telemetry.model_ready.set(1)


async def close_model(worker: Worker) -> None:
    if worker._canary_path is not None:
        await asyncio.to_thread(worker._canary_path.close)  # joins its stages' threads
        worker._canary_path.renderer.close()
        worker._canary_path = None
    if worker.lanes is not None:
        await asyncio.to_thread(worker.lanes.close)  # joins the lanes' threads
        worker.lanes = None
    if worker._renderer is not None and worker._owns_renderer:
        worker._renderer.close()  # the budget guard's threads


async def start_cancels(worker: Worker) -> None:
    """Synthesize skips a cancelled request's segments: its markers tell encode and sink."""
    await worker._start_side("cancels", CancelWatch(worker.settings.kafka, worker.topics.control))


async def start_releases(worker: Worker) -> None:
    """Caught up before the first request: a restarted segment worker routes by the rule
    in force, never by "no rule" for a moment."""
    releases = ReleaseWatch(worker.settings.kafka, worker.topics.config)
    await worker._start_side("releases", releases)
    await releases.caught_up.wait()  # bounded by the start-up step


async def start_lexicons(worker: Worker) -> None:
    """The segment stage applies each tenant's lexicon: loaded before it takes a request."""
    lexicons = LexiconBook(worker.settings.kafka, worker.topics.lexicons)
    await worker._start_side("lexicons", lexicons)
    try:  # within the step's bound: the follow goes on catching up in the background
        await asyncio.wait_for(lexicons.caught_up.wait(), timeout=LEXICONS_CATCH_UP_S)
    except TimeoutError:
        log_event(log, "lexicons_not_caught_up", logging.WARNING, topic=worker.topics.lexicons)


async def start_canary(worker: Worker) -> None:
    """The periodic canary of the model loaded by the "model" side service; a candidate
    release's worker reports its results on tts.config, the start-up reference first."""
    if worker.canary is None:
        return
    if worker.pipeline.release.name != BASE_RELEASE:
        from streamtts.features.releases.canary_reports import CanaryReports

        reports = CanaryReports(worker.settings.kafka, worker.topics.config, worker.pipeline.release.name)
        await worker._start_side("canary_reports", reports)
        reports.report(worker.readiness.canary_ok, worker.readiness.canary_reason)
    await worker.canary.start()
    worker._on_stop("canary", worker.canary.stop)


async def start_release_guard(worker: Worker) -> None:
    """The release guard next to the router: it shares the router's view of the rule."""
    if worker.releases is None or not worker.pipeline.release.guard:
        return
    from streamtts.features.releases.auto_rollback import AutoRollback

    guard = AutoRollback(worker.settings.kafka, worker.telemetry, releases=worker.releases)
    await worker._start_side("release_guard", guard)


async def start_load_reports(worker: Worker) -> None:
    """This worker's predicted first-span wait on `tts.load`, for admission."""
    every = worker.pipeline.synthesis.load_report_s
    if every <= 0:
        return
    from streamtts.features.admission.reporter import LoadReporter

    reporter = LoadReporter(
        worker.settings.kafka, worker.topics.load, partial(load_report, worker), interval_s=every
    )
    await worker._start_side("load_reports", reporter)


def load_report(worker: Worker, name: str, interval_s: float) -> LoadReport:
    """The lanes' prediction and the partitions this worker's synthesize groups own."""
    lanes = worker.lanes
    partitions: dict[str, list[int]] = {}
    waiting_first = 0  # first spans read ahead but not yet handed to the lanes
    for stage in worker.services:
        if isinstance(stage, ReportsLoad):
            for topic, parts in stage.owned.items():
                partitions.setdefault(topic, []).extend(parts)
            waiting_first += stage.firsts_waiting()
    queued = lanes.queued() if lanes is not None else {"first": 0, "bulk": 0}
    wait = None
    if lanes is not None:
        # First lanes add threads, not cores: first spans are served at the lanes' rate.
        unreported = waiting_first * lanes.first_cost_ms
        wait = lanes.predicted_first_wait_ms() + unreported / lanes.slots
    return LoadReport(
        worker=name,
        release=worker.pipeline.release.name,
        partitions=partitions,
        first_wait_ms=round(wait, 1) if wait is not None else None,
        queued_first=queued["first"] + waiting_first,
        queued_bulk=queued["bulk"],
        slots=lanes.slots if lanes is not None else 1,
        cost={fam: CostLine(**line) for fam, line in lanes.cost.snapshot().items()} if lanes else {},
        interval_s=interval_s,
        at=datetime.now(UTC),
    )


SIDE_SERVICE_STARTERS: dict[SideService, Callable[[Worker], Awaitable[None]]] = {
    "model": start_model,
    "cancels": start_cancels,
    "releases": start_releases,
    "lexicons": start_lexicons,
    "canary": start_canary,
    "release_guard": start_release_guard,
    "load_reports": start_load_reports,
}
"""How this worker starts each side service the topology names (complete: a test checks)."""


LEXICONS_CATCH_UP_S = 10.0
"""A lexicon topic not read to its end by then is caught up in the background (logged)."""
