"""OpenTelemetry spans of one process, owned by it (no global tracer provider is set).

Every record a stage handles is a span (`consume`), a child of the trace context the record
carries (`schemas.trace`): one request is one trace, whatever processes it crossed. What a
stage writes inside that span carries the span as its parent (`outgoing`), so the trace reads
as the chain of hops it was. Spans follow the OpenTelemetry messaging conventions (system,
destination, partition, offset, consumer group). Export is OTLP over HTTP to any collector
(`TracingSettings.endpoint`); without one, spans are not recorded but trace context still
travels on every record.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import socket
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor, SpanExporter
from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased
from opentelemetry.trace import Link, NonRecordingSpan, Span, SpanContext, SpanKind, TraceFlags, TraceState

from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX
from streamtts.schemas.headers import REPLAY_TRACE, TRACEPARENT, TRACESTATE, header, header_pairs
from streamtts.schemas.trace import TraceContext, parse_traceparent, trace_of

SERVICE_NAMESPACE = "streamtts"


@dataclass(frozen=True)
class TracingSettings:
    """Where spans go (STREAMTTS_OTLP_ENDPOINT, or OpenTelemetry's own
    OTEL_EXPORTER_OTLP_ENDPOINT), how many traces are sampled at their root
    (STREAMTTS_TRACE_SAMPLE_RATIO; a caller's sampled flag decides for its traces: parent
    based), and extra resource attributes (STREAMTTS_TRACE_RESOURCE, "k=v,k2=v2")."""

    endpoint: str | None = None
    """OTLP/HTTP base URL, e.g. http://127.0.0.1:4318 (spans go to <endpoint>/v1/traces)."""
    sample_ratio: float = 1.0
    resource: Mapping[str, str] = field(default_factory=dict)

    @classmethod
    def from_env(cls) -> TracingSettings:
        env = os.environ
        endpoint = env.get(ENV_PREFIX + "OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or None
        raw_ratio = env.get(ENV_PREFIX + "TRACE_SAMPLE_RATIO", "1.0")
        try:
            ratio = float(raw_ratio)
        except ValueError:
            ratio = -1.0
        if not 0.0 <= ratio <= 1.0:
            raise ConfigError(
                f"{ENV_PREFIX}TRACE_SAMPLE_RATIO must be a number from 0 to 1, not {raw_ratio!r}"
            )
        resource: dict[str, str] = {}
        for item in filter(None, (p.strip() for p in env.get(ENV_PREFIX + "TRACE_RESOURCE", "").split(","))):
            key, sep, value = item.partition("=")
            if not sep or not key.strip():
                raise ConfigError(f"{ENV_PREFIX}TRACE_RESOURCE: {item!r} is not key=value")
            resource[key.strip()] = value.strip()
        return cls(endpoint.rstrip("/") if endpoint else None, ratio, resource)


class Tracing:
    """A process's tracer. `Tracing.off()` records nothing (trace context still travels)."""

    def __init__(self, provider: TracerProvider | None, service: str = "worker") -> None:
        self.provider = provider
        self.service = service
        self._tracer = (provider or trace.NoOpTracerProvider()).get_tracer("streamtts")

    @classmethod
    def off(cls) -> Tracing:
        return cls(None)

    @classmethod
    def to(
        cls,
        settings: TracingSettings,
        service: str,
        *,
        exporter: SpanExporter | None = None,
    ) -> Tracing:
        """Spans of `service` ("worker", "gateway", …) exported as `settings` say; `exporter`
        (a test's in-memory one) instead of OTLP, each span exported as it ends."""
        if exporter is None and settings.endpoint is None:
            return cls(None, service)
        resource = Resource.create(
            {
                "service.name": f"{SERVICE_NAMESPACE}-{service}",
                "service.namespace": SERVICE_NAMESPACE,
                "service.instance.id": f"{socket.gethostname()}:{os.getpid()}",
                **settings.resource,
            }
        )
        sampler = ParentBased(TraceIdRatioBased(settings.sample_ratio))
        provider = TracerProvider(resource=resource, sampler=sampler)
        processor: SpanProcessor
        if exporter is not None:
            processor = SimpleSpanProcessor(exporter)
        else:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

            processor = BatchSpanProcessor(OTLPSpanExporter(endpoint=f"{settings.endpoint}/v1/traces"))
        provider.add_span_processor(processor)
        return cls(provider, service)

    @property
    def recording(self) -> bool:
        return self.provider is not None

    @contextlib.contextmanager
    def consume(
        self,
        stage: str,
        message: Any,
        *,
        group: str,
        redelivery: str | None = None,
        attributes: Mapping[str, Any] | None = None,
    ) -> Iterator[Span]:
        """The span of a stage handling one record (`message`: faust's or the in-memory
        one: topic, partition, offset, headers), a child of the record's trace context;
        `redelivery`: why the record may have been handled before (`runtime.redelivery`)."""
        headers = getattr(message, "headers", None)
        attrs: dict[str, Any] = {
            "messaging.system": "kafka",
            "messaging.operation.type": "process",
            "messaging.operation.name": "process",
            "messaging.destination.name": message.topic,
            "messaging.destination.partition.id": str(message.partition),
            "messaging.kafka.offset": message.offset,
            "messaging.consumer.group.name": group,
            "streamtts.stage": stage,
        }
        key = getattr(message, "key", None)
        if key:
            attrs["messaging.kafka.message.key"] = key.decode("utf-8", "replace")[:128]
        if redelivery:
            attrs["streamtts.redelivered"] = True
            attrs["streamtts.redelivery"] = redelivery
        attrs.update(attributes or {})
        links = _replay_link(headers)
        with self._tracer.start_as_current_span(
            f"process {stage}",
            context=_parent(headers),
            kind=SpanKind.CONSUMER,
            attributes=attrs,
            links=links,
        ) as span:
            yield span

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        *,
        parent_headers: object = None,
        kind: SpanKind = SpanKind.INTERNAL,
        attributes: Mapping[str, Any] | None = None,
    ) -> Iterator[Span]:
        """A span inside the current one, or (with `parent_headers`) in a record's trace."""
        context = _parent(parent_headers) if parent_headers is not None else None
        with self._tracer.start_as_current_span(
            name, context=context, kind=kind, attributes=dict(attributes or {})
        ) as span:
            yield span

    def record(
        self,
        name: str,
        start_ns: int,
        end_ns: int,
        *,
        parent: TraceContext,
        attributes: Mapping[str, Any] | None = None,
    ) -> None:
        """A span measured elsewhere (e.g. the gateway's submit → first audio chunk), as a
        child of `parent`."""
        context = trace.set_span_in_context(NonRecordingSpan(_span_context(parent)))
        attrs = dict(attributes or {})
        span = self._tracer.start_span(name, context=context, start_time=start_ns, attributes=attrs)
        span.end(end_time=end_ns)

    @staticmethod
    def current() -> TraceContext | None:
        """The current span as a trace context (None outside a recording span)."""
        ctx = trace.get_current_span().get_span_context()
        if not ctx.is_valid:
            return None
        state = ctx.trace_state.to_header() if ctx.trace_state else ""
        return TraceContext(
            f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}", f"{int(ctx.trace_flags):02x}", state
        )

    @staticmethod
    def sampled_trace_id() -> str | None:
        """The current span's trace id if that span is recorded and sampled (its trace reaches
        the backend), else None: with tracing off, the span carried from a record's headers is
        current but recorded nowhere, and a link to it would lead nowhere."""
        span = trace.get_current_span()
        ctx = span.get_span_context()
        if not (span.is_recording() and ctx.is_valid and ctx.trace_flags.sampled):
            return None
        return f"{ctx.trace_id:032x}"

    def shutdown(self) -> None:
        """Export what is buffered, then stop (at process stop)."""
        if self.provider is not None:
            self.provider.shutdown()


def outgoing(headers: list[tuple[str, bytes]] | None) -> list[tuple[str, bytes]] | None:
    """`headers` of a record written inside a span: the span becomes its parent (the carried
    traceparent is replaced). Outside a recording span, `headers` as they are."""
    mine = Tracing.current()
    if mine is None or headers is None:
        return headers
    carried = trace_of(headers)  # its tracestate is the record's, passed on as it came
    mine = dataclasses.replace(mine, state=carried.state if carried is not None else "")
    kept = [(k, v) for k, v in header_pairs(headers) if k not in (TRACEPARENT, TRACESTATE)]
    return [*kept, *mine.headers()]


def _span_context(ctx: TraceContext, remote: bool = True) -> SpanContext:
    state = TraceState([tuple(m.split("=", 1)) for m in ctx.state.split(",")]) if ctx.state else None  # type: ignore[misc]
    return SpanContext(
        int(ctx.trace_id, 16),
        int(ctx.span_id, 16),
        is_remote=remote,
        trace_flags=TraceFlags(int(ctx.flags, 16)),
        trace_state=state,
    )


def _parent(headers: object) -> Any:
    """The OpenTelemetry context whose span is the record's traceparent (none: a new trace)."""
    ctx = trace_of(headers) if headers is not None else None
    if ctx is None:
        return None
    return trace.set_span_in_context(NonRecordingSpan(_span_context(ctx)))


def _replay_link(headers: object) -> list[Link]:
    """A replay's link to the trace it re-renders (`streamtts.replay.traceparent`)."""
    was = parse_traceparent(header(headers, REPLAY_TRACE)) if headers is not None else None
    return [Link(_span_context(was), {"streamtts.link": "replay_of"})] if was is not None else []


def annotate(fields: Mapping[str, Any]) -> None:
    """Add `fields` (a stage's log line: voice, lane, cache, …) to the current span as
    `streamtts.<name>` attributes; values a span cannot hold are written as text."""
    span = trace.get_current_span()
    if not span.is_recording():
        return
    # One call: the SDK takes the span's lock once per call, and every record is annotated.
    span.set_attributes(
        {
            f"streamtts.{name}": value if isinstance(value, str | bool | int | float) else str(value)
            for name, value in fields.items()
            if value is not None
        }
    )
