"""What rendering a segment gives back: its audio with the voice that spoke it and any
degradation (`RenderedSegment`), a span as a voice spoke it (`Spoken`), and what the render
cache's fast path found (`CacheLookup`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streamtts.processors.synthesize.render_cache import CacheStatus
from streamtts.processors.synthesize.span_plan import SpanPlan
from streamtts.processors.synthesize.word_timing import SpanWord
from streamtts.schemas import Degradation, Segment


@dataclass(frozen=True)
class RenderedSegment:
    samples: np.ndarray
    """float32 mono PCM in [-1, 1] at `sample_rate`."""
    sample_rate: int
    voice_used: str
    degradation: Degradation | None
    synth_ms: float
    cache: CacheStatus | None = None
    """Whether the render cache had it ("hit"), stored it ("miss"), or was bypassed ("off")."""
    words: list[SpanWord] | None = None
    """With timestamps: the span's words, timed from the start of `samples`."""
    marks: list[tuple[str, float]] | None = None
    """The segment's SSML marks: (name, ms from the start of `samples`)."""
    cpu_ms: float = 0.0
    """CPU time of the render in the threads that ran it (the caller's and the budget guard's):
    all of it with one intra-op thread per model run (the lanes); with more, onnxruntime's own
    pool threads are not counted."""


@dataclass(frozen=True)
class Spoken:
    """One span as a voice spoke it (before any degradation bookkeeping)."""

    samples: np.ndarray
    voice_used: str
    substituted: bool
    """The requested voice could not speak the span: `voice_used` replaced it."""
    cache: CacheStatus
    words: list[SpanWord] | None


@dataclass(frozen=True)
class CacheLookup:
    """What the cache fast path found for a segment (see `SegmentRenderer.look_up`)."""

    rendered: RenderedSegment | None
    """The segment's audio, when the cache had it."""
    plan: SpanPlan | None
    """On a miss: the plain path's plan the lookup made, for `render` to reuse (the voice
    resolved, the span phonemized); None when the lookup made none or it failed."""


NOTHING_CACHED = CacheLookup(None, None)


def mark_times(segment: Segment, rendered: RenderedSegment) -> list[tuple[str, float]]:
    """Each mark of the segment at the first word that starts at or after it, or at the end
    of the span's speech (before its pause) when no word follows."""
    rate = rendered.sample_rate
    speech_ms = max(0.0, len(rendered.samples) * 1000.0 / rate - segment.pause_after_ms)
    words = rendered.words or []
    start = segment.source_start
    out: list[tuple[str, float]] = []
    for mark in segment.marks or ():
        after = next((w for w in words if w.char_start >= mark.at), None)
        if after is not None:
            out.append((mark.name, round(after.start_ms, 1)))
        elif not words and mark.at <= start:
            out.append((mark.name, 0.0))
        else:
            out.append((mark.name, round(speech_ms, 1)))
    return out
