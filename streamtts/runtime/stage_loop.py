"""The one stage runtime: the consume loop every stage runs on, the sink included, whatever
delivers its records — faust's agent stream (segment, synthesize, encode: `FaustStage`) or an
aiokafka consumer with a transaction per input partition (the sink: `CompletionSink`).

Written once here: reading, the replay-target filter, redelivery marks, read-ahead with first
records first, one record per request at a time, in-order acks (and acks held past the handling
until the stage releases them), acks only after the outputs are delivered, drain on stop, a
span and metrics per record. A stage is its handler: `take` (read a record), `handle` (its
outputs), maybe `read_ahead`. A transport is a `RecordSource`: its records, and where an ack
goes (faust's manual ack; the sink's committable offsets, committed with its outputs).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncIterator, Awaitable
from contextvars import ContextVar
from typing import Any, Protocol

from streamtts.runtime.exemplars import trace_exemplar
from streamtts.runtime.jsonlog import log_event, record_position
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.runtime.read_ahead import FirstSegmentsFirst, InOrderAcks, drain_in_request_order
from streamtts.runtime.redelivery import Redelivery, RedeliveryWatch
from streamtts.runtime.stage import DeadLettering, aimed_elsewhere
from streamtts.runtime.stage_outputs import StageOutputs, Transport
from streamtts.runtime.startup import describe
from streamtts.runtime.taken import ReadAhead, Taken
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import StageSpec
from streamtts.runtime.tracing import annotate

HELD = "held"
"""`handle`'s outcome for a record whose ack waits past its handling: the stage releases it
later (`StageLoop.release_ack`) — the sink, once the record's request is finished."""

_DELIVERIES: ContextVar[list[Awaitable[Any]] | None] = ContextVar("streamtts_deliveries", default=None)
"""The pending deliveries of what the record being handled in this context wrote (set by
`StageLoop.process` around its `handle`, so records handled side by side keep theirs apart)."""


def pending_delivery(delivery: Awaitable[Any]) -> None:
    """A transport that returns before the broker's ack notes the pending delivery here: the
    record being handled is acked only once it completes (`StageLoop._delivered`)."""
    if (deliveries := _DELIVERIES.get()) is not None:
        deliveries.append(delivery)


class OutputNotDelivered(RuntimeError):
    """An output of a handled record failed for good: the record is never acked."""


class OfRequest(Protocol):
    """What a stage's log line names a record by: a request, or the context a record carries."""

    @property
    def request_id(self) -> str: ...

    @property
    def tenant(self) -> str: ...


class RecordSource(Protocol):
    """What delivers a stage's records and takes their acks. An event has `message` with
    `topic`, `partition`, `tp`, `offset`, `key`, `value`, `headers`, `timestamp` (seconds) and
    `generation_id` (the assignment it was read under), as faust's do."""

    def events(self) -> AsyncIterator[Any]: ...

    async def ack(self, event: Any) -> None:
        """The record is done: its offset may be committed (offset order is the loop's)."""
        ...

    def generation(self) -> int:
        """The current assignment: a record read under an earlier one is someone else's."""
        ...


class StageLoop(DeadLettering):
    """Base of every stage: the loop (`run`) and the per-record work around the handler."""

    name = "stage"
    holds_acks = False
    """Whether `handle` may return `HELD` (the loop then tracks every record's ack)."""

    group: str
    sources: list[str]
    spec: StageSpec
    topics: TopicNames
    outputs: StageOutputs
    telemetry: Telemetry
    log: logging.Logger

    def __init__(self) -> None:
        self._acks: InOrderAcks[Any] | None = None
        """With read-ahead or held acks: the records read, whose acks wait for the earlier ones'."""
        self._source: RecordSource | None = None
        self.waiting: FirstSegmentsFirst[Taken[Any]] | None = None
        """With read-ahead: records read, not yet handled."""
        self.redeliveries = RedeliveryWatch()
        """Which records read may have been handled before (their spans say so)."""

    async def run(self, source: RecordSource) -> None:
        """The one consume loop: the stage supplies `take`, `read_ahead` and `handle`;
        reading, the replay filter, read-ahead, ordering and acks are here.

        Acks are manual: a record is acked (so its offset may be committed) only after its
        outputs were delivered. faust's implicit ack would also fire when the handling is
        cancelled by shutdown or a rebalance, committing work never done — the SIGTERM test
        lost a segment that way. Unacked, the record goes to the next owner.
        """
        self._source = source
        ahead = self.read_ahead()
        self._acks = InOrderAcks() if ahead is not None or self.holds_acks else None
        if ahead is None:
            async for event in source.events():
                if (taken := await self._read(event, source)) is not None:
                    await self.process(taken, source)
            return
        # Reading ahead: records finish out of order, acks leave in offset order, and what
        # is still queued at a rebalance or stop stays unacked for the partition's next owner.
        queue: FirstSegmentsFirst[Taken[Any]] = FirstSegmentsFirst(ahead.capacity)
        self.waiting = queue
        drain = asyncio.create_task(
            drain_in_request_order(
                queue,
                lambda taken: self.process(taken, source),
                key=lambda taken: taken.key,
                first_of=lambda taken: taken.first,
                caps=ahead.caps,
                total=ahead.total,
                # Read before a rebalance: its partition may be someone else's now.
                stale=lambda taken: taken.event.message.generation_id != source.generation(),
            ),
            name=f"{self.group}-drain",
        )
        try:
            async for event in source.events():
                if (taken := await self._read(event, source)) is None:
                    continue
                if taken.now:
                    await self.process(taken, source)
                    continue
                if drain.done():  # surface a crashed drain instead of filling the queue
                    drain.result()
                if len(queue) < queue.maxsize:
                    await queue.put(taken, first=taken.first)
                    continue
                # Full: wait for room or for the drain to end (a put waiting on a queue nobody
                # empties would stall the stage silently).
                put = asyncio.ensure_future(queue.put(taken, first=taken.first))
                try:
                    await asyncio.wait((put, drain), return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not put.done():
                        put.cancel()
                if drain.done():
                    drain.result()
                    raise RuntimeError(f"{self.group}: the drain task ended")
        finally:
            await cancel_and_wait(drain)

    async def _read(self, event: Any, source: RecordSource) -> Taken[Any] | None:
        """A record read, in its partition's order: tracked for in-order acks, marked if it may
        be a redelivery, and taken; None for a replay aimed at the other reader of its topic
        (acked at once)."""
        msg = event.message
        if self._acks is not None:
            self._acks.track(msg.tp, msg.generation_id, msg.offset, event)
        redelivery = self._redelivery(event)
        if aimed_elsewhere(msg.headers, self.name):
            await self.ack(event, source)
            return None
        return self._marked(await self.take(event), redelivery)

    def _redelivery(self, event: Any) -> Redelivery | None:
        """Note a record as read, in its partition's order (so before any read-ahead queue)."""
        msg = event.message
        stamp = getattr(msg, "timestamp", None)  # seconds
        return self.redeliveries.read(
            (msg.topic, msg.partition), msg.offset, stamp * 1000 if stamp is not None else None
        )

    @staticmethod
    def _marked(taken: Taken[Any], redelivery: Redelivery | None) -> Taken[Any]:
        return dataclasses.replace(taken, redelivery=redelivery) if redelivery else taken

    def read_ahead(self) -> ReadAhead | None:
        """How the stage reads ahead of its work; None: one record at a time, in order."""
        return None

    async def take(self, event: Any) -> Taken[Any]:
        """The record as the handler will get it: a stage that decodes records (or looks them
        up) on reading overrides this, so `handle` never decodes them again."""
        return Taken(event)

    async def handle(self, taken: Taken[Any]) -> str | None:
        """Process one record; return an outcome label ("ok", "dead_lettered", `HELD`) or None."""
        raise NotImplementedError

    async def process(self, taken: Taken[Any], source: RecordSource) -> None:
        """Handle one record, then ack it (outputs first, ack second), with its metrics."""
        started = time.perf_counter()
        inflight = self.telemetry.inflight.labels(self.name)
        inflight.inc()
        waited = {"streamtts.queue_wait_ms": round((started - taken.read_at) * 1000, 2)}
        deliveries: list[Awaitable[Any]] = []
        token = _DELIVERIES.set(deliveries)
        try:
            with self.telemetry.tracing.consume(
                self.name,
                taken.event.message,
                group=self.group,
                redelivery=taken.redelivery,
                attributes=waited,
            ) as span:
                outcome = await self.handle(taken)
                span.set_attribute("streamtts.outcome", outcome or "ok")
                exemplar = trace_exemplar()  # taken in the span; observed after the ack
        finally:
            _DELIVERIES.reset(token)
            inflight.dec()
        await self._delivered(taken, deliveries)
        if outcome != HELD:
            await self.ack(taken.event, source)
        self.telemetry.stage_seconds.labels(self.name).observe(time.perf_counter() - started, exemplar)
        self.telemetry.records.labels(self.name, outcome or "ok").inc()

    async def _delivered(self, taken: Taken[Any], deliveries: list[Awaitable[Any]]) -> None:
        """Every output of the record acknowledged by the brokers before the record is acked.
        faust commits acked offsets after flushing its producer, but a send that failed for
        good (a non-retriable error: aiokafka gives up on the batch, faust only logs it) was
        committed past, and its output lost. Such a failure crashes the stage instead: the
        record stays unacked, so nothing from it on is committed in its partition, and the
        restarted worker reads it again. (The outputs left before this wait: it holds back only
        the record's ack and the next record of its drain slot, never its audio.)"""
        if not deliveries:
            return
        # Shielded: a stop that cancels this wait must not cancel the transport's own futures.
        results = await asyncio.gather(*map(asyncio.shield, deliveries), return_exceptions=True)
        failed = next((r for r in results if isinstance(r, BaseException)), None)
        if failed is None:
            return
        msg = taken.event.message
        error = describe(failed)
        log_event(
            self.log,
            "output_not_delivered",
            logging.ERROR,
            stage=self.name,
            **record_position(msg),
            error=error,
        )
        at = f"{msg.topic}/{msg.partition}@{msg.offset}"
        lost = OutputNotDelivered(f"{self.name}: an output of {at} was not delivered: {error}")
        await self.crash(lost)
        raise lost from failed

    async def crash(self, error: BaseException) -> None:
        """The stage cannot go on (`failure()` says so); by default the raise ends its loop."""

    async def ack(self, event: Any, source: RecordSource) -> None:
        """The record's outputs are on the broker (`_delivered`): its offset may be committed — in
        offset order per partition where records finish out of order (see `InOrderAcks`)."""
        if self._acks is None:
            await source.ack(event)
            return
        msg = event.message
        for ready in self._acks.done(msg.tp, msg.offset, msg.generation_id):
            await source.ack(ready)

    async def release_ack(self, partition: Any, offset: int, generation: int) -> None:
        """Ack a record handled earlier whose `handle` returned `HELD` (its work is done now)."""
        if self._acks is None or self._source is None:
            return
        for ready in self._acks.done(partition, offset, generation):
            await self._source.ack(ready)

    def send_through(self, transport: Transport) -> None:
        """Send the stage's outputs through `transport` instead of its producer (the in-memory
        topology); what the stage may write stays what its spec declares."""
        self.outputs = StageOutputs(self.name, self.topics, transport, self.spec)

    def log_to(self, log: logging.Logger) -> None:
        """Log as `log` instead of the stage's own logger (the canary's stages: warnings only)."""
        self.log = log

    def release(self) -> None:
        """Let go of what the stage holds beside its consumer (its thread pools): after `stop`,
        or instead of it for a stage that never started (the in-memory topology)."""

    def log_record(
        self,
        what: str,
        started: float,
        about: OfRequest,
        *,
        voice: str | None,
        level: int = logging.INFO,
        **fields: Any,
    ) -> None:
        """The stage's one log line for a handled record: `what` happened, with the fields
        every stage's line carries (`about`'s request and tenant, stage, voice, how long since
        `started`) and the stage's own `fields`, which the record's span gets as attributes
        too. (Its metrics are counted once, in `process`.)"""
        request_id, tenant = about.request_id, about.tenant
        annotate({"event": what, "request_id": request_id, "tenant": tenant, "voice": voice, **fields})
        log_event(
            self.log,
            what,
            level,
            request_id=request_id,
            tenant=tenant,
            stage=self.name,
            voice=voice,
            **fields,
            duration_ms=round((time.perf_counter() - started) * 1000, 2),
        )
