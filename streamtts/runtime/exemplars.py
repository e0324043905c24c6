"""Prometheus exemplars: a latency observed inside a sampled span carries that span's trace id,
so a slow bucket on a dashboard leads to the trace of a request that fell in it.

Exemplars exist only in the OpenMetrics exposition format, so /metrics negotiates: a scraper
that asks for `application/openmetrics-text` (Prometheus does, with exemplar storage on) gets
OpenMetrics with the exemplars; anyone else gets the Prometheus text format as before.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Histogram
from prometheus_client.exposition import choose_encoder

from streamtts.runtime.tracing import Tracing

EXEMPLAR_LABEL = "trace_id"


def trace_exemplar() -> dict[str, str] | None:
    """`{"trace_id": …}` of the current span when it is recorded and sampled, else None."""
    trace_id = Tracing.sampled_trace_id()
    return {EXEMPLAR_LABEL: trace_id} if trace_id is not None else None


def observe_with_trace(histogram: Histogram, value: float) -> None:
    """Observe `value` (on a histogram or one of its label children) with the current span's
    trace id as its exemplar. For a histogram that is not a `TracedHistogram`."""
    histogram.observe(value, exemplar=trace_exemplar())


class TracedHistogram(Histogram):
    """A histogram whose observations made inside a sampled span carry its trace id as their
    exemplar, with no change at the call site (its `.labels(…)` children are of this class
    too). An exemplar given explicitly wins: a caller that observes after its span ended
    passes the one it took inside."""

    def observe(self, amount: float, exemplar: dict[str, str] | None = None) -> None:
        super().observe(amount, exemplar if exemplar is not None else trace_exemplar())


def negotiated(registry: CollectorRegistry, accept: str | None) -> tuple[bytes, str]:
    """`registry`'s exposition in the format the `Accept` header asks for, and its content
    type: OpenMetrics (with exemplars) for `application/openmetrics-text`, else Prometheus text."""
    encode, content_type = choose_encoder(accept or "")
    return encode(registry), content_type
