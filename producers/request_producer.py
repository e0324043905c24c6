"""Async client that puts TTS requests on Kafka: idempotent, acks=all, keyed by request_id."""

from __future__ import annotations

from collections.abc import Iterable

from aiokafka.structs import RecordMetadata

from streamtts.runtime.kafka import make_producer
from streamtts.runtime.lifecycle import AsyncLifecycle, start_or_release
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import ControlMessage, TextDelta, TTSRequest, wire
from streamtts.schemas.base import Contract
from streamtts.schemas.headers import TRACEPARENT, header
from streamtts.schemas.trace import TraceContext


def _trace(
    caller: TraceContext | None, sample_ratio: float, given: list[tuple[str, bytes]] | None = None
) -> list[tuple[str, bytes]]:
    """A request's trace headers: the caller's context (its span is the request's parent), or
    a new trace, sampled at `sample_ratio`; none where the caller's own `headers` carry one."""
    if caller is None and header(given, TRACEPARENT) is not None:
        return []
    return (caller or TraceContext.start(sample_ratio=sample_ratio)).headers()


class RequestProducer(AsyncLifecycle):
    """Publishes validated requests. Use as `async with RequestProducer(settings) as p:`."""

    def __init__(
        self,
        kafka: KafkaSettings,
        topics: TopicNames | None = None,
        *,
        wire_format: wire.WireFormat = wire.DEFAULT_WIRE_FORMAT,
        sample_ratio: float = 1.0,
    ) -> None:
        """sample_ratio: the share of the traces this producer begins (a request sent with no
        caller's trace) that are marked sampled: the deployment's `STREAMTTS_TRACE_SAMPLE_RATIO`
        (`Settings.tracing.sample_ratio`), so workers record that share of them."""
        self._topics = topics or TopicNames(kafka.topic_prefix)
        self.sample_ratio = sample_ratio
        self.wire_format = wire_format
        self._producer = make_producer(kafka)

    def _headers(self, contract: Contract, schema: str) -> list[tuple[str, bytes]]:
        """Its CloudEvents headers (v1: the content type alone) and the schema name."""
        record = wire.encode(contract, self.wire_format, source=wire.SOURCE_PREFIX + "/producer")
        return [
            *(record.headers or [(wire.CONTENT_TYPE, wire.JSON_CONTENT_TYPE.encode())]),
            ("schema", schema.encode()),
        ]

    async def start(self) -> None:
        await start_or_release(self._producer)

    async def stop(self) -> None:
        await self._producer.stop()

    async def submit(
        self,
        request: TTSRequest,
        *,
        topic: str | None = None,
        headers: list[tuple[str, bytes]] | None = None,
        trace: TraceContext | None = None,
    ) -> RecordMetadata:
        """Send one request and wait for the broker's acknowledgement (all in-sync replicas).
        trace: the caller's trace context (W3C), which the request's records continue; None:
        the request starts a trace of its own."""
        return await self._producer.send_and_wait(
            topic or self._topics.requests,
            value=request.to_bytes(),
            key=request.request_id.encode(),
            headers=[
                *self._headers(request, "request.v1"),
                *_trace(trace, self.sample_ratio, headers),
                *(headers or []),
            ],
        )

    async def submit_many(
        self, requests: Iterable[TTSRequest], *, topic: str | None = None, trace: TraceContext | None = None
    ) -> list[RecordMetadata]:
        """Send a batch; records are pipelined, then all acknowledgements awaited. Each request
        is a trace of its own, or (`trace`) in the caller's."""
        futures = []
        for request in requests:
            futures.append(
                await self._producer.send(
                    topic or self._topics.requests,
                    value=request.to_bytes(),
                    key=request.request_id.encode(),
                    headers=[*self._headers(request, "request.v1"), *_trace(trace, self.sample_ratio)],
                )
            )
        return [await f for f in futures]

    async def send_delta(self, delta: TextDelta, *, wait: bool = True) -> RecordMetadata | None:
        """Send a streamed utterance's text delta (or flush, or end; see `schemas.utterance`),
        keyed by its request id, so it follows its opening request on the same partition.
        wait=False: pipelined (the idempotent producer keeps the order); `flush` waits."""
        pending = await self._producer.send(
            self._topics.requests,
            value=delta.to_bytes(),
            key=delta.request_id.encode(),
            headers=self._headers(delta, "text_delta.v1"),
        )
        return await pending if wait else None

    async def flush(self) -> None:
        """Wait until every record sent so far is acknowledged."""
        await self._producer.flush()

    async def cancel(self, request_id: str, tenant: str, played_ms: float | None = None) -> ControlMessage:
        """Cancel a request (barge-in): its remaining work is dropped and its result says
        what was spoken. `played_ms`: how much of the audio the client had played."""
        message = ControlMessage.cancel(request_id, tenant, played_ms)
        await self._producer.send_and_wait(
            self._topics.control,
            value=message.to_bytes(),
            key=request_id.encode(),
            headers=self._headers(message, "control.v1"),
        )
        return message
