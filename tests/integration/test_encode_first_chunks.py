"""The encode stage on real Kafka: a request's first chunk does not queue behind other
requests' later chunks, each request's chunks leave in order, and a malformed record in the
middle goes to the dead-letter topic at once without holding anything up.

Everything is on one partition of `tts.pcm` and written before the stage starts, so the
stage finds request A's six 5-second chunks ahead of B's and C's first chunks: read one at a
time (the stage before this change), B and C would be encoded after all of A's audio.
"""

from __future__ import annotations

import asyncio
import sys

import numpy as np
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamtts.runtime.kafka import make_consumer, make_producer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas import AudioChunk, PcmChunk, RequestContext, TTSRequest, wire
from streamtts.schemas.trace import TraceContext
from streamtts.worker import Worker
from tests.factories import pcm_chunk
from tests.helpers import cli_env, topic_records
from tests.services import Services

pytestmark = pytest.mark.integration

LONG = 6
"""Request A's chunks, 5 s of audio each (the longest chunk the synthesize stage writes)."""


def _chunk(request: TTSRequest, seq: int, total: int, seconds: float) -> PcmChunk:
    rate = RequestContext.of(request).sample_rate
    # Noise: the mp3 encoder's worst case, the longest encode.
    noise = np.random.default_rng(seq).normal(0, 3000, int(rate * seconds)).clip(-32768, 32767)
    return pcm_chunk(request, seq, total, pcm=noise, sample_rate=rate)


async def test_first_chunks_overtake_other_requests_later_chunks_and_each_request_keeps_its_order(
    kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    def request() -> TTSRequest:
        return TTSRequest.new("Hello there.", language="en", format="mp3", tenant="ahead")

    a, b, c = request(), request(), request()
    pcm = [_chunk(a, seq, LONG, 5.0) for seq in range(LONG)]
    pcm += [_chunk(b, 0, 2, 0.8), _chunk(c, 0, 1, 0.8), _chunk(b, 1, 2, 0.8)]
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        for i, chunk in enumerate(pcm):
            record = wire.encode(chunk, "cloudevents")
            key = chunk.request_id.encode()
            await producer.send_and_wait(
                topics.pcm, record.value, key=key, headers=record.headers, partition=0
            )
            if i == 2:  # a malformed record amid A's chunks
                await producer.send_and_wait(topics.pcm, b"\x00not a chunk", key=b"broken", partition=0)
    finally:
        await producer.stop()

    pipeline = PipelineSettings.of(session_timeout_s=6.0, render_cache=False)
    worker = Worker(["encode"], Settings(kafka=kafka_settings, s3=services.s3), pipeline, ops=False)
    await worker.start()
    try:
        audio = [
            wire.decode(AudioChunk, r.value, r.headers)
            for r in await topic_records(kafka_settings, topics.audio, len(pcm), timeout_s=90)
        ]
        dead = await topic_records(kafka_settings, topics.dlq("encode"), 1, timeout_s=90)
    finally:
        await worker.stop()

    order = [(chunk.request_id, chunk.seq) for chunk in sorted(audio, key=lambda ch: ch.encoded_at)]
    assert sorted(order) == sorted((ch.request_id, ch.seq) for ch in pcm), "each chunk once"
    at = {key: i for i, key in enumerate(order)}
    # B's and C's first audio left while A's audio was still being encoded, not after all of it.
    assert at[(b.request_id, 0)] < at[(a.request_id, LONG - 1)], order
    assert at[(c.request_id, 0)] < at[(a.request_id, LONG - 1)], order
    # Each request's chunks in order: what its subscriber plays.
    assert [s for rid, s in order if rid == a.request_id] == list(range(LONG))
    assert at[(b.request_id, 0)] < at[(b.request_id, 1)]
    assert dead[0].key == b"broken"


async def test_a_sigkilled_encode_worker_mid_read_ahead_loses_no_chunk_and_keeps_each_requests_order(
    kafka_settings: KafkaSettings, topics: TopicNames, services: Services
) -> None:
    # Eight requests of five 1-second chunks on tts.pcm; a worker process reading ahead is
    # SIGKILLed once it has encoded some of them, and a second worker takes over. Whatever the
    # first had read ahead, encoded or half-acked, every chunk still reaches tts.audio (at least
    # once: at-least-once), and each request's chunks first appear in order. Each request is
    # still one trace: the second worker's spans of the chunks it took over are children of the
    # contexts their records carry, marked as possibly redelivered.
    requests = [TTSRequest.new("Hello there.", language="en", format="mp3", tenant="kill") for _ in range(8)]
    pcm = [_chunk(r, seq, 5, 1.0) for r in requests for seq in range(5)]
    traces = {r.request_id: TraceContext.start() for r in requests}
    parents: dict[str, str] = {}  # span id a chunk's record names as its parent → request id
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        for chunk in pcm:
            record = wire.encode(chunk, "cloudevents")
            hop = traces[chunk.request_id].child()  # the synthesize span that wrote it
            parents[hop.span_id] = chunk.request_id
            headers = [*record.headers, *hop.headers()]
            await producer.send_and_wait(
                topics.pcm, record.value, key=chunk.request_id.encode(), headers=headers
            )
    finally:
        await producer.stop()

    env = cli_env(kafka_settings, SESSION_TIMEOUT_S="6", RENDER_CACHE="0")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "streamtts.cli.main", "run", "--stage", "encode",
        env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    encoded = 0
    try:
        async with asyncio.timeout(90):
            async for line in proc.stderr:
                if b'"event":"encoded"' in line:
                    encoded += 1
                    if encoded == 8:
                        break
        proc.kill()  # SIGKILL: no shutdown, no commit
    finally:
        if proc.returncode is None:
            proc.kill()
        await proc.wait()
    assert encoded == 8, "the first worker never got going"

    pipeline = PipelineSettings.of(session_timeout_s=6.0, render_cache=False)
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(Tracing.to(TracingSettings(), "worker", exporter=exporter))
    settings = Settings(kafka=kafka_settings, s3=services.s3)
    worker = Worker(["encode"], settings, pipeline, ops=False, telemetry=telemetry)
    await worker.start()
    try:
        seen: set[tuple[str, int]] = set()
        order: list[tuple[str, int]] = []  # first appearances, in tts.audio's order per partition
        consumer = make_consumer(kafka_settings, topics.audio, group_id=None, auto_offset_reset="earliest")
        await consumer.start()
        try:
            async with asyncio.timeout(120):
                while len(seen) < len(pcm):
                    for records in (await consumer.getmany(timeout_ms=500)).values():
                        for r in records:
                            out = wire.decode(AudioChunk, r.value, r.headers)
                            if (out.request_id, out.seq) not in seen:
                                seen.add((out.request_id, out.seq))
                                order.append((out.request_id, out.seq))
        finally:
            await consumer.stop()
    finally:
        await worker.stop()
    assert set(seen) == {(c.request_id, c.seq) for c in pcm}, "a chunk was lost"
    for r in requests:
        assert [s for rid, s in order if rid == r.request_id] == list(range(5)), r.request_id
    spans = [s for s in exporter.get_finished_spans() if s.name == "process encode"]
    assert spans, "the second worker recorded no span"
    for span in spans:
        assert span.parent is not None and span.attributes is not None
        rid = parents[f"{span.parent.span_id:016x}"]  # a child of the context its record carried …
        assert f"{span.context.trace_id:032x}" == traces[rid].trace_id  # … in its request's trace
        # Every record it read was written before it took the partition over: possibly seen.
        marks = (span.attributes.get("streamtts.redelivered"), span.attributes.get("streamtts.redelivery"))
        assert marks == (True, "taken_over"), marks
