"""Prometheus exemplars: a latency observed inside a sampled span carries its trace id, in the
OpenMetrics exposition only; none with tracing off or for an unsampled trace."""

from __future__ import annotations

import re

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry, Histogram

from streamtts.runtime.exemplars import negotiated, observe_with_trace
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas.trace import TraceContext

OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
EXEMPLAR = re.compile(r'# \{trace_id="([0-9a-f]{32})"\} ([0-9.e-]+)')


def _traced(ratio: float = 1.0) -> Telemetry:
    return Telemetry(
        Tracing.to(TracingSettings(sample_ratio=ratio), "worker", exporter=InMemorySpanExporter())
    )


def _exemplars(telemetry: Telemetry, family: str) -> list[tuple[str, float]]:
    body, content_type = telemetry.exposition_for(OPENMETRICS)
    assert content_type.startswith("application/openmetrics-text")
    lines = [line for line in body.decode().splitlines() if line.startswith(family + "_bucket")]
    return [(m[1], float(m[2])) for line in lines if (m := EXEMPLAR.search(line))]


def test_first_audio_observed_in_a_sampled_span_names_its_trace() -> None:
    telemetry = _traced()
    with telemetry.tracing.span("process encode"):
        trace_id = Tracing.sampled_trace_id()
        telemetry.ttfa.labels("mp3").observe(0.33)  # the call site as it is: no exemplar passed
    assert trace_id is not None
    assert _exemplars(telemetry, "streamtts_time_to_first_audio_seconds") == [(trace_id, 0.33)]
    # Exemplars are OpenMetrics only: Prometheus text has none.
    text, content_type = telemetry.exposition_for(None)
    assert content_type.startswith("text/plain") and b"streamtts_time_to_first_audio_seconds" in text
    assert b"trace_id" not in text


def test_no_exemplar_with_tracing_off_or_outside_a_span_or_unsampled() -> None:
    off = Telemetry()
    # A record's sampled context is current (as in a stage with tracing off), yet recorded nowhere.
    carried = TraceContext.start().headers()
    with off.tracing.span("process encode", parent_headers=carried):
        off.ttfa.labels("mp3").observe(0.5)
        off.stage_seconds.labels("encode").observe(0.01)
    assert _exemplars(off, "streamtts_time_to_first_audio_seconds") == []
    assert _exemplars(off, "streamtts_stage_seconds") == []

    traced = _traced()
    traced.ttfa.labels("mp3").observe(0.5)  # no span current
    assert _exemplars(traced, "streamtts_time_to_first_audio_seconds") == []

    unsampled = _traced(ratio=0.0)
    with unsampled.tracing.span("process encode"):
        unsampled.ttfa.labels("mp3").observe(0.5)
    assert _exemplars(unsampled, "streamtts_time_to_first_audio_seconds") == []


def test_observe_with_trace_on_a_plain_histogram() -> None:
    tracing = Tracing.to(TracingSettings(), "worker", exporter=InMemorySpanExporter())
    registry = CollectorRegistry()
    hist = Histogram("plain_seconds", "a histogram of another registry", ["k"], registry=registry)
    with tracing.span("work"):
        trace_id = Tracing.sampled_trace_id()
        observe_with_trace(hist.labels("a"), 0.2)
    body, _ = negotiated(registry, "application/openmetrics-text")
    assert f'# {{trace_id="{trace_id}"}} 0.2'.encode() in body
