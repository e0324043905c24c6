"""Spans that explain a request (#43): on real Kafka, the whole pipeline in one worker whose
spans go to an in-memory exporter (the OpenTelemetry SDK's own). One request is one trace with
the caller's trace id; each stage's span is a child of the record it handled, so the trace is
the chain of hops the request took; each span says its topic, partition, offset and group."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamtts.producers.request_producer import RequestProducer
from streamtts.producers.result_waiter import ResultWaiter
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas import TTSRequest
from streamtts.schemas.trace import parse_traceparent
from streamtts.worker import Worker

pytestmark = [pytest.mark.integration, pytest.mark.model]

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def test_a_request_is_one_trace_of_chained_stage_spans(
    kafka_settings: KafkaSettings, topics: TopicNames, services, speech_renderer, pipeline_settings
) -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(Tracing.to(TracingSettings(), "worker", exporter=exporter))
    worker = Worker(
        ["segment", "synthesize", "encode", "sink"],
        Settings(kafka=kafka_settings, s3=services.s3),
        pipeline_settings,
        renderer=speech_renderer,
        telemetry=telemetry,
    )
    caller = parse_traceparent(CALLER)
    assert caller is not None
    request = TTSRequest.new(
        "第一句话。第二句话说得长一点。", language="zh", voice="jm_kumo", format="mp3", cache=False
    )
    await worker.start()
    try:
        async with ResultWaiter(kafka_settings) as waiter:
            async with RequestProducer(kafka_settings) as producer:
                await producer.submit(request, trace=caller)
            result = (await waiter.wait([request.request_id], timeout_s=120))[request.request_id]
    finally:
        await worker.stop()
    assert result.status == "completed"

    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == int(caller.trace_id, 16)]
    by_id = {s.context.span_id: s for s in spans}
    names = sorted(s.name for s in spans)
    segments = [s for s in spans if s.name == "process synthesize"]
    assert names.count("process segment") == 1, names
    assert len(segments) >= 2, "two sentences: two spans at least"
    assert {"process encode", "sink finish", "sink upload", "sink result"} <= set(names), names
    assert not [
        s
        for s in exporter.get_finished_spans()
        if s.context.trace_id != int(caller.trace_id, 16) and s.name.startswith(("process", "sink"))
    ], "nothing of this request in another trace"

    def parent(span):  # type: ignore[no-untyped-def]
        return by_id.get(span.parent.span_id) if span.parent else None

    (segment,) = [s for s in spans if s.name == "process segment"]
    assert segment.parent.span_id == int(caller.span_id, 16), "the caller's span is segment's parent"
    assert segment.attributes["messaging.destination.name"] == topics.requests
    assert segment.attributes["messaging.system"] == "kafka"
    assert "messaging.kafka.offset" in segment.attributes
    assert segment.attributes["messaging.consumer.group.name"] == "segment"
    for synth in segments:
        assert parent(synth) is segment, "each segment record was written inside segment's span"
        assert synth.attributes["messaging.destination.name"] == topics.segments
        assert synth.attributes["streamtts.voice"]
        assert "streamtts.queue_wait_ms" in synth.attributes
    for encode in (s for s in spans if s.name == "process encode"):
        assert parent(encode) in segments, "a chunk's encode is a child of its span's synthesis"
    finish = next(s for s in spans if s.name == "sink finish")
    assert parent(finish) in segments, "the sink's work hangs off the first chunk's synthesis"
    for inner in ("sink upload", "sink result"):
        assert parent(next(s for s in spans if s.name == inner)) is finish
    # The spans are the request's time: segment starts first, the result is the last thing done.
    first, last = min(spans, key=lambda s: s.start_time), max(spans, key=lambda s: s.end_time)
    assert first is segment and last.name in ("sink result", "sink finish")
