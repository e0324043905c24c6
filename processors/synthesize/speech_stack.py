"""Build the synthesize stage's speech core once per process: registry → synthesizer → renderer."""

from __future__ import annotations

import logging
import os
import time

from streamtts.processors.synthesize.breaker import CircuitBreaker
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.renderer import Budgets, SegmentRenderer
from streamtts.processors.synthesize.synthesizer import Synthesizer
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.settings import PipelineSettings

log = logging.getLogger("streamtts.synthesize")


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask, which containers' cpusets set), not
    the host's count: more inference threads than usable CPUs only oversubscribe them."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 2


def build_renderer(pipeline: PipelineSettings) -> SegmentRenderer:
    """Load and warm the engines (blocking: call it in a thread at start-up)."""
    started = time.perf_counter()
    threads = pipeline.synth_threads or usable_cpus()
    registry = VoiceRegistry(threads=threads, spin=pipeline.synth_spin)
    log_event(
        log, "model_loading", voices=list(pipeline.warm_voices), threads=threads, spin=pipeline.synth_spin
    )
    # Every phonemizer is warmed: a cold one (jieba, OpenJTalk) would blow the G2P budget.
    registry.warm_up(pipeline.warm_voices, langs=("zh", "en", "ja", "ko"))
    renderer = SegmentRenderer(
        Synthesizer(registry),
        breaker=CircuitBreaker(pipeline.breaker_threshold, pipeline.breaker_open_s),
        budgets=Budgets(g2p_s=pipeline.g2p_budget_ms / 1000, inference_base_s=pipeline.inference_budget_s),
    )
    renderer.prerender_please_wait()
    log_event(
        log,
        "model_ready",
        duration_ms=round((time.perf_counter() - started) * 1000, 1),
        engines=sorted(registry.loaded_engines()),
    )
    return renderer
