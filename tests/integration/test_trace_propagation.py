"""One request, one trace: the W3C trace context a caller gives (or the one its request starts)
is on every record the pipeline writes for it — its segments, PCM and audio chunks, and its
result — and on its dead letters, read back by a plain aiokafka consumer on real Kafka; and
the spans every stage records (to the OpenTelemetry SDK's in-memory exporter) are one trace
per request, each stage's span a child of the record it handled: the chain of its hops."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence

import pytest
from aiokafka import TopicPartition
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.kafka import make_consumer, make_producer, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas import TTSRequest
from streamtts.schemas.trace import parse_traceparent, trace_of

pytestmark = [pytest.mark.integration, pytest.mark.model]


class Spans(InMemorySpanExporter):
    """The SDK's in-memory exporter, saying when it got spans (they are exported as each ends,
    on the event loop's thread)."""

    def __init__(self) -> None:
        super().__init__()
        self.exported = asyncio.Event()

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        result = super().export(spans)
        self.exported.set()
        return result


CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
POISON_CALLER = "00-5cf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


async def _trace_ids(
    kafka: KafkaSettings,
    topics: TopicNames,
    wanted: set[bytes],
    expect: dict[str, int],
    sampled: dict[bytes, set[bool]] | None = None,
) -> dict[str, dict[bytes, set[str | None]]]:
    """topic → request key → the trace ids its records carry, until each topic in `expect`
    holds records of that many of the `wanted` requests; `sampled`: filled with each
    request's sampled flags, all topics together."""
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    seen: dict[str, dict[bytes, set[str | None]]] = defaultdict(lambda: defaultdict(set))
    try:
        parts = [TopicPartition(t, p) for t in expect for p in sorted(await topic_partitions(kafka, t))]
        consumer.assign(parts)
        await consumer.seek_to_beginning(*parts)
        async with asyncio.timeout(120):
            while any(len(seen[t]) < n for t, n in expect.items()):
                for tp, records in (await consumer.getmany(timeout_ms=500)).items():
                    for r in records:
                        if r.key in wanted:
                            ctx = trace_of(r.headers)
                            seen[tp.topic][r.key].add(ctx.trace_id if ctx else None)
                            if ctx is not None and sampled is not None:
                                sampled.setdefault(r.key, set()).add(ctx.sampled)
    finally:
        await consumer.stop()
    return seen


async def test_every_record_of_a_request_carries_its_trace(
    running_pipeline, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    caller, poison_caller = parse_traceparent(CALLER), parse_traceparent(POISON_CALLER)
    assert caller is not None and poison_caller is not None
    exporter = Spans()
    running_pipeline.telemetry.tracing = Tracing.to(TracingSettings(), "worker", exporter=exporter)
    traced = TTSRequest.new("第一句话。第二句话。", language="zh", voice="jm_kumo", format="mp3", cache=False)
    own = TTSRequest.new("Hello there.", language="en", format="wav", cache=False)
    foreign = TTSRequest.new("A producer that knows nothing of traces.", language="en", format="pcm")
    poison = TTSRequest.new("Unknown voice.", language="en", voice="no_such_voice")
    # A producer of a deployment that samples none of the traces it begins.
    unsampled = TTSRequest.new("Nobody records this one.", language="en", format="pcm", cache=False)
    async with RequestProducer(kafka_settings) as producer:
        await producer.submit(traced, trace=caller)
        await producer.submit(own)  # no caller: the request starts its own trace
        await producer.submit(poison, trace=poison_caller)
    async with RequestProducer(kafka_settings, sample_ratio=0.0) as producer:
        await producer.submit(unsampled)
    plain = make_producer(kafka_settings)  # a client that sets no header at all
    await plain.start()
    try:
        await plain.send_and_wait(topics.requests, key=foreign.request_id.encode(), value=foreign.to_bytes())
    finally:
        await plain.stop()

    keys = {r.request_id.encode() for r in (traced, own, foreign, poison, unsampled)}
    flags: dict[bytes, set[bool]] = {}
    seen = await _trace_ids(
        kafka_settings,
        topics,
        keys,
        # Requests: 5; segments, chunks, results: 4 (the poison has none); its dead letter.
        {
            topics.requests: 5,
            topics.segments: 4,
            topics.pcm: 4,
            topics.audio: 4,
            topics.file_parts: 4,
            topics.results: 4,
            topics.dlq("segment"): 1,
        },
        flags,
    )
    # Unsampled at the start, so on every record: no worker recorded a span of it (a
    # recording span would have written its children as sampled).
    assert flags[unsampled.request_id.encode()] == {False}
    assert flags[traced.request_id.encode()] == {True} and flags[own.request_id.encode()] == {True}
    t_key, own_key, foreign_key = (
        traced.request_id.encode(),
        own.request_id.encode(),
        foreign.request_id.encode(),
    )
    for topic in (topics.segments, topics.pcm, topics.audio, topics.file_parts, topics.results):
        assert seen[topic][t_key] == {caller.trace_id}, f"{topic}: the caller's trace throughout"
        own_ids = seen[topic][own_key]
        assert len(own_ids) == 1 and None not in own_ids, f"{topic}: one trace the request started"
        foreign_ids = seen[topic][foreign_key]
        assert len(foreign_ids) == 1 and None not in foreign_ids, f"{topic}: segment started one"
    assert seen[topics.requests][own_key] == seen[topics.results][own_key]
    assert seen[topics.requests][foreign_key] == {None}, "the plain client's record had none"
    assert seen[topics.dlq("segment")][poison.request_id.encode()] == {poison_caller.trace_id}
    async with asyncio.timeout(10):  # the sink's span ends just after its result is acked
        while not any(
            s.name == "sink finish" and s.context.trace_id == int(caller.trace_id, 16)
            for s in exporter.get_finished_spans()
        ):
            exporter.exported.clear()
            await exporter.exported.wait()
    _assert_chained_spans(exporter, caller.trace_id, caller.span_id, topics)


def _assert_chained_spans(
    exporter: InMemorySpanExporter, trace_id: str, parent_id: str, topics: TopicNames
) -> None:
    """The caller's request as spans: segment under the caller's span, each synthesis under
    segment, each encode under its synthesis, the sink's finish under the first chunk's encode
    (the sink reads the file parts encode writes)."""
    spans = [s for s in exporter.get_finished_spans() if s.context.trace_id == int(trace_id, 16)]
    by_id = {s.context.span_id: s for s in spans}
    names = sorted(s.name for s in spans)
    assert names.count("process segment") == 1, names
    syntheses = [s for s in spans if s.name == "process synthesize"]
    assert len(syntheses) >= 2, "two sentences: two spans at least"
    assert {"process encode", "sink finish", "sink upload", "sink result"} <= set(names), names

    def parent(span: ReadableSpan) -> ReadableSpan | None:
        return by_id.get(span.parent.span_id) if span.parent else None

    (segment,) = [s for s in spans if s.name == "process segment"]
    assert segment.parent is not None and segment.parent.span_id == int(parent_id, 16)
    attributes = segment.attributes or {}
    assert attributes["messaging.system"] == "kafka"
    assert attributes["messaging.destination.name"] == topics.requests
    assert attributes["messaging.consumer.group.name"] == "segment"
    assert "messaging.kafka.offset" in attributes
    for synth in syntheses:
        assert parent(synth) is segment, "each segment record was written inside segment's span"
        assert (synth.attributes or {})["messaging.destination.name"] == topics.segments
        assert "streamtts.queue_wait_ms" in (synth.attributes or {})
    encodes = [s for s in spans if s.name == "process encode"]
    for encode in encodes:
        assert parent(encode) in syntheses, "a chunk's encode is a child of its span's synthesis"
    finish = next(s for s in spans if s.name == "sink finish")
    assert parent(finish) in encodes, "the sink's work hangs off the first chunk's encode"
    for inner in ("sink upload", "sink result"):
        assert parent(next(s for s in spans if s.name == inner)) is finish
