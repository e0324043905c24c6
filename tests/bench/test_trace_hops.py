"""A first audio split hop by hop from a request's spans: the steps cover send → first chunk
with no gap and no overlap, follow the first span's own chain, and say when a span is missing."""

from __future__ import annotations

from streamtts.bench.trace_hops import STEPS, first_audio_hops, medians
from streamtts.runtime.trace_query import SpanRow


def _span(
    span_id: str, parent: str | None, name: str, start_ms: float, dur_ms: float, **tags: object
) -> SpanRow:
    return SpanRow(
        span_id, parent, name, "streamtts-worker", int(start_ms * 1000), int(dur_ms * 1000), dict(tags)
    )


def _trace() -> list[SpanRow]:
    return [
        _span("seg", "caller", "process segment", 10, 2),
        _span("syn1", "seg", "process synthesize", 40, 300, **{"streamtts.seq": 1}),  # a later span
        _span("syn0", "seg", "process synthesize", 16, 100, **{"streamtts.seq": 0}),
        _span("enc1", "syn0", "process encode", 130, 5),  # the first span's second part
        _span("enc0", "syn0", "process encode", 122, 24),
        _span("encx", "syn1", "process encode", 345, 20),
        _span("sink", "enc0", "sink finish", 150, 14),
    ]


def test_the_steps_follow_the_first_spans_chain_and_add_up_to_the_first_audio() -> None:
    hops = first_audio_hops(_trace(), sent_us=0, first_chunk_us=145_000)
    assert hops is not None
    assert dict(hops.steps) == {
        "send → segment": 10.0,
        "segment": 2.0,
        "segment → synthesize": 4.0,
        "synthesize (first span)": 100.0,
        "synthesize → encode": 6.0,
        "encode (first chunk)": 24.0,
        "encode → subscriber": -1.0,  # readable before encode's span (waiting for the ack) ended
    }
    assert hops.total_ms == 145.0 == sum(hops.steps.values())


def test_a_trace_missing_a_span_of_the_path_gives_none() -> None:
    for missing in ("seg", "syn0", "enc0"):
        spans = [
            s for s in _trace() if s.span_id != missing and not (missing == "enc0" and s.span_id == "enc1")
        ]
        assert first_audio_hops(spans, 0, 145_000) is None, missing


def test_medians_per_step_and_of_the_total() -> None:
    a = first_audio_hops(_trace(), 0, 145_000)
    b = first_audio_hops(_trace(), -20_000, 155_000)
    c = first_audio_hops(_trace(), -2_000, 146_000)
    assert a and b and c
    med = medians([a, b, c])
    assert med["send → segment"] == 12.0 and med["encode → subscriber"] == 0.0
    assert med["first audio"] == 148.0 and set(med) == {*STEPS, "first audio"}
