"""Build the synthesize stage's speech core once per process: registry → synthesizer → renderer."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable

from streamtts.processors.synthesize.blob_tier import BlobTier
from streamtts.processors.synthesize.breaker import CircuitBreaker
from streamtts.processors.synthesize.lanes import InferenceLanes
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.render_cache import MemoryTier, RenderCache
from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
from streamtts.processors.synthesize.synthesizer import Synthesizer
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import S3Settings
from streamtts.schemas.languages import NEURAL_TAGS

WARM_G2P_LANGS: tuple[str, ...] = ("zh", "en", "ja", "ko", *sorted(NEURAL_TAGS - {"zh", "en", "ja", "ko"}))
"""Every neural language's phonemizer is warmed at start: a cold one (jieba ~1 s, OpenJTalk
~0.8 s, espeak-ng's first voice ~0.6 s) would blow the G2P budget (0.5 s) of the first request
in that language and degrade it."""
log = logging.getLogger("streamtts.synthesize")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers' cpusets set), not
    the host's count: more inference threads than usable CPUs only oversubscribe them."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 2


def build_cache(
    pipeline: PipelineSettings,
    s3: S3Settings | None,
    on_count: Callable[[str, str, int], None] | None = None,
) -> RenderCache | None:
    """The render cache the settings ask for (None when it is off)."""
    if not pipeline.render_cache.enabled:
        return None
    shared = None
    if s3 is not None and pipeline.render_cache.shared:
        shared = BlobTier(s3, prefix=pipeline.render_cache.prefix)
    return RenderCache(MemoryTier(pipeline.render_cache.mb * 1024 * 1024), shared, on_count)


def inference_threads(pipeline: PipelineSettings) -> int:
    """Intra-op threads per model run: with lanes each lane is one core's worth of work."""
    synth = pipeline.synthesis
    return synth.threads or (1 if synth.scheduler == "lanes" else usable_cpus())


def build_lanes(pipeline: PipelineSettings) -> InferenceLanes | None:
    """The process's inference lanes (None with `scheduler = "fifo"`)."""
    synth = pipeline.synthesis
    if synth.scheduler != "lanes":
        return None
    slots = synth.lanes or max(1, usable_cpus() // inference_threads(pipeline))
    first = slots if synth.first_lanes < 0 else synth.first_lanes
    return InferenceLanes(
        slots,
        priority_slots=first,
        bulk_nice=synth.bulk_nice if first else 0,
        preempt_after_ms=synth.preempt_after_ms,
        piece_ms=synth.piece_ms,
    )


BUDGET_THREADS = 2
"""The intra-op threads the inference budget settings were measured with."""


def budgets_of(pipeline: PipelineSettings) -> Budgets:
    """The time budgets the settings give a span (G2P, inference). The inference budget was
    set for a run on two intra-op threads; a run on one (a lane on this 2-core class) takes
    ~2× as long, and a long zh span under load otherwise timed out and was degraded (bench
    --tail). Scaled by the threads it lacks, never past 2×: more cores than that a run never
    had, and a stalled run must still be caught."""
    scale = min(2.0, max(1.0, BUDGET_THREADS / inference_threads(pipeline)))
    return Budgets(
        g2p_s=pipeline.degradation.g2p_budget_ms / 1000,
        inference_base_s=pipeline.degradation.inference_budget_s * scale,
        inference_per_char_s=pipeline.degradation.inference_budget_per_char_s * scale,
    )


def build_renderer(
    pipeline: PipelineSettings,
    s3: S3Settings | None = None,
    on_cache_count: Callable[[str, str, int], None] | None = None,
) -> SegmentRenderer:
    """Load and warm the engines (blocking: call it in a thread at start-up); with `s3`, the
    render cache's shared tier lives there and its newest entries are preloaded."""
    started = time.perf_counter()
    threads = inference_threads(pipeline)
    registry = VoiceRegistry(threads=threads, spin=pipeline.synthesis.spin)
    log_event(
        log,
        "model_loading",
        voices=list(pipeline.synthesis.warm_voices),
        threads=threads,
        spin=pipeline.synthesis.spin,
    )
    registry.warm_up(pipeline.synthesis.warm_voices, langs=WARM_G2P_LANGS)
    cache = build_cache(pipeline, s3, on_cache_count)
    preloaded = cache.preload(pipeline.render_cache.preload) if cache is not None else 0
    renderer = SegmentRenderer(
        Synthesizer(registry, cache=cache),
        breaker=CircuitBreaker(pipeline.degradation.breaker_threshold, pipeline.degradation.breaker_open_s),
        budgets=budgets_of(pipeline),
    )
    renderer.prerender_please_wait()
    log_event(
        log,
        "model_ready",
        duration_ms=round((time.perf_counter() - started) * 1000, 1),
        engines=sorted(registry.loaded_engines()),
        render_cache="off" if cache is None else ("shared" if cache.shared else "memory"),
        cache_preloaded=preloaded,
    )
    return renderer
