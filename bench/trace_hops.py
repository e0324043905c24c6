"""A request's first audio, hop by hop, from its trace: where the milliseconds between the
caller's send and the first chunk at the subscriber went (Kafka hops, each stage's record).

The path of a first chunk is: send → `process segment` → `process synthesize` (the first span,
seq 0) → `process encode` (its first part) → the subscriber. A hop is the gap between one
span's end and the next one's start (its record's trip through Kafka, and any wait for the
consumer's loop); a stage is its span's duration (for synthesize, the render of the first
span). The last hop ends at the subscriber's first chunk: it is negative when encode's span
ends after the chunk was already readable (it waits for the broker's acknowledgement)."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from streamtts.runtime.trace_query import SpanRow

STEPS = (
    "send → segment",
    "segment",
    "segment → synthesize",
    "synthesize (first span)",
    "synthesize → encode",
    "encode (first chunk)",
    "encode → subscriber",
)


@dataclass(frozen=True)
class Hops:
    """One request's first audio split into `STEPS`, in ms (they add up to `total_ms`)."""

    steps: Mapping[str, float]
    total_ms: float


def first_audio_hops(spans: Sequence[SpanRow], sent_us: int, first_chunk_us: int) -> Hops | None:
    """The steps of one request's first audio: `sent_us` when the caller began to send,
    `first_chunk_us` when its first chunk reached the subscriber (wall clock, µs). None when
    the trace lacks a span of the path (not yet indexed, or not recorded)."""
    segment = _first(s for s in spans if s.name == "process segment")
    synth = _first(
        s
        for s in spans
        if s.name == "process synthesize"
        and str(s.tags.get("streamtts.seq")) == "0"
        and (segment is None or s.parent_id == segment.span_id)
    )
    encode = _first(
        s for s in spans if s.name == "process encode" and synth is not None and s.parent_id == synth.span_id
    )
    if segment is None or synth is None or encode is None:
        return None
    marks = [
        sent_us,
        segment.start_us,
        segment.end_us,
        synth.start_us,
        synth.end_us,
        encode.start_us,
        encode.end_us,
        first_chunk_us,
    ]
    steps = {name: (b - a) / 1000 for name, a, b in zip(STEPS, marks[:-1], marks[1:], strict=True)}
    return Hops(steps, (first_chunk_us - sent_us) / 1000)


def _first(spans: Iterable[SpanRow]) -> SpanRow | None:
    return min(spans, key=lambda s: s.start_us, default=None)


def medians(hops: Sequence[Hops]) -> dict[str, float]:
    """Each step's median over requests, and the total's (`"first audio"`)."""
    out = {name: statistics.median(h.steps[name] for h in hops) for name in STEPS}
    out["first audio"] = statistics.median(h.total_ms for h in hops)
    return out
