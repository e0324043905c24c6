"""The faust stage runtime: one consume loop runs every faust stage (reading, the
replay-target filter, read-ahead with first records first, per-request order, in-order acks,
drain on stop), plus dead-lettering, metrics, supervision, start/stop (a `Stage`, see
`runtime.stage`). A stage is its handler: `take` (read a record), `handle` (its outputs)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Any, Protocol

import faust
from faust.types import EventT, StreamT

from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord
from streamtts.runtime.exemplars import trace_exemplar
from streamtts.runtime.faust_app import make_app
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.runtime.read_ahead import FirstSegmentsFirst, InOrderAcks, drain_in_request_order
from streamtts.runtime.redelivery import Redelivery, RedeliveryWatch
from streamtts.runtime.stage import DeadLettering, aimed_elsewhere
from streamtts.runtime.stage_outputs import StageOutputs, Transport
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.startup import describe
from streamtts.runtime.taken import ReadAhead, Taken
from streamtts.runtime.topology import StageSpec, stage_spec
from streamtts.runtime.tracing import annotate
from streamtts.schemas.headers import header_pairs
from streamtts.schemas.release import BASE_RELEASE

_DELIVERIES: ContextVar[list[Awaitable[Any]] | None] = ContextVar("streamtts_deliveries", default=None)
"""The pending deliveries of what the record being handled in this context wrote (set by
`FaustStage.process` around its `handle`, so records handled side by side keep theirs apart)."""


class OutputNotDelivered(RuntimeError):
    """An output of a handled record failed for good: the record is never acked."""


class OfRequest(Protocol):
    """What a stage's log line names a record by: a request, or the context a record carries."""

    @property
    def request_id(self) -> str: ...

    @property
    def tenant(self) -> str: ...


def source_of(event: EventT) -> SourceRecord:
    msg = event.message
    return SourceRecord(msg.topic, msg.partition, msg.offset, msg.key, msg.value, header_pairs(msg.headers))


class FaustStage(DeadLettering):
    """Base of the segment/synthesize/encode stages: one faust app (consumer group) + its DLQ,
    its group, sources and agent as its `StageSpec` (see `runtime.topology`) declares them."""

    name = "stage"

    def __init__(
        self,
        parts: StageParts,
        *,
        spec: StageSpec | None = None,
        pool: str | None = None,
        release: str = BASE_RELEASE,
    ) -> None:
        """parts: the settings, topic names and telemetry (`StageParts.of` in tests);
        pool: the group of the stage's spec to run (synthesize: "short" or "long");
        release: the release served (a stage with release lanes reads that release's lane);
        spec: where the stage sits in a topology other than the pipeline's own (`TOPOLOGY`),
        e.g. with a stage inserted after it: what it reads and writes follows the spec."""
        self.kafka = parts.kafka
        self.pipeline = parts.pipeline
        self.topics = parts.topics
        self.telemetry = parts.telemetry
        self.spec: StageSpec = spec or stage_spec(self.name)
        group = self.spec.group_for(pool)
        self.group = self.spec.group_role(group, release)
        self.sources: list[str] = self.spec.group_sources(group, self.topics, release)
        """The topics this stage consumes."""
        self.app: faust.App = make_app(self.group, self.kafka, self.pipeline)
        self._faust_topics: dict[str, faust.TopicT] = {}
        self.outputs = StageOutputs(self.name, self.topics, self._faust_send, self.spec)
        """The stage's only way to write: the outputs its spec declares, through this app."""
        self.dead_letters = DeadLetterPublisher(
            self.name, self.topics.dlq(self.name), self._send_dlq, self.telemetry
        )
        self.log = logging.getLogger(f"streamtts.{self.name}")
        self.assigned = False
        """True while the group gives this worker partitions of its source (readiness)."""
        self.rebalances = 0
        """Completed group assignments so far (with or without partitions)."""
        self.owned: dict[str, list[int]] = {}
        """Source topic → the partitions of it the group gives this worker now (load reports)."""
        self._acks: InOrderAcks[EventT] | None = None
        """With read-ahead: the records read, whose acks wait for the earlier ones'."""
        self.waiting: FirstSegmentsFirst[Taken[Any]] | None = None
        """With read-ahead: records read, not yet handled."""
        self.redeliveries = RedeliveryWatch()
        """Which records read may have been handled before (their spans say so)."""
        self.app.on_partitions_assigned.connect(self._on_assigned)  # type: ignore[arg-type]  # faust stubs want a `signal=` kwarg
        # The stage's one agent over its sources (`_agent` may be overridden; it runs at start).
        self.app.agent(self.app.topic(*self.sources, value_type=bytes, key_type=bytes), name=self.group)(
            self._agent
        )

    async def _on_assigned(self, app: Any, assigned: Any, **kwargs: Any) -> None:
        # Ready only with partitions of its source: a group that joined while its topic was
        # missing from metadata gets none and would idle silently (the metadata refresh,
        # `metadata_refresh_s`, makes it rejoin within seconds; readiness says so meanwhile).
        self.assigned = any(tp.topic in self.sources for tp in assigned)
        owned: dict[str, list[int]] = {}
        for tp in assigned:
            if tp.topic in self.sources:
                owned.setdefault(tp.topic, []).append(tp.partition)
        self.owned = {topic: sorted(parts) for topic, parts in owned.items()}
        held = ((topic, p) for topic, parts in owned.items() for p in parts)
        self.redeliveries.assigned(held, now_ms=time.time() * 1000)
        self.rebalances += 1
        log_event(
            self.log,
            "partitions_assigned",
            stage=self.group,
            partitions=sorted(f"{tp.topic}/{tp.partition}" for tp in assigned),
        )
        await self.assigned_partitions(self.owned)

    async def assigned_partitions(self, owned: dict[str, list[int]]) -> None:
        """The group gave this worker `owned` (source topic → partitions): a stage holding
        state per partition restores it here, before any record of those partitions."""

    async def _agent(self, stream: StreamT[bytes]) -> None:
        """The one consume loop of every faust stage: the stage supplies `take`, `read_ahead`
        and `handle`; reading, the replay filter, read-ahead, ordering and acks are here.

        Acks are manual: a record is acked (so its offset may be committed) only after its
        outputs were handed to the producer. faust's implicit ack would also fire when the
        handling is cancelled by shutdown or a rebalance, committing work never done — the
        SIGTERM test lost a segment that way. Unacked, the record goes to the next owner.
        """
        manual = stream.noack()  # type: ignore[attr-defined]  # on faust.Stream; StreamT lacks it
        ahead = self.read_ahead()
        if ahead is None:
            self._acks = None
            async for event in manual.events():
                redelivery = self._redelivery(event)
                if aimed_elsewhere(event.message.headers, self.name):
                    await manual.ack(event)  # a replay for the other consumer of this topic
                    continue
                await self.process(self._marked(await self.take(event), redelivery), manual)
            return
        # Reading ahead: records finish out of order, acks leave in offset order, and what
        # is still queued at a rebalance or stop stays unacked for the partition's next owner.
        queue: FirstSegmentsFirst[Taken[Any]] = FirstSegmentsFirst(ahead.capacity)
        self.waiting = queue
        acks = self._acks = InOrderAcks()
        drain = asyncio.create_task(
            drain_in_request_order(
                queue,
                lambda taken: self.process(taken, manual),
                key=lambda taken: taken.key,
                first_of=lambda taken: taken.first,
                caps=ahead.caps,
                total=ahead.total,
                # Read before a rebalance: its partition may be someone else's now.
                stale=lambda taken: taken.event.message.generation_id != self.app.consumer_generation_id,
            ),
            name=f"{self.group}-drain",
        )
        try:
            async for event in manual.events():
                msg = event.message
                acks.track(msg.tp, msg.generation_id, msg.offset, event)
                redelivery = self._redelivery(event)
                if aimed_elsewhere(msg.headers, self.name):
                    await self.ack(event, manual)
                    continue
                taken = self._marked(await self.take(event), redelivery)
                if taken.now:
                    await self.process(taken, manual)
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

    def _redelivery(self, event: EventT) -> Redelivery | None:
        """Note a record as read, in its partition's order (so before any read-ahead queue)."""
        msg = event.message
        stamp = getattr(msg, "timestamp", None)  # faust: seconds
        return self.redeliveries.read(
            (msg.topic, msg.partition), msg.offset, stamp * 1000 if stamp is not None else None
        )

    @staticmethod
    def _marked(taken: Taken[Any], redelivery: Redelivery | None) -> Taken[Any]:
        return dataclasses.replace(taken, redelivery=redelivery) if redelivery else taken

    def read_ahead(self) -> ReadAhead | None:
        """How the stage reads ahead of its work; None: one record at a time, in order."""
        return None

    async def take(self, event: EventT) -> Taken[Any]:
        """The record as the handler will get it: a stage that decodes records (or looks them
        up) on reading overrides this, so `handle` never decodes them again."""
        return Taken(event)

    async def process(self, taken: Taken[Any], manual: StreamT[bytes]) -> None:
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
        await self.ack(taken.event, manual)
        self.telemetry.stage_seconds.labels(self.name).observe(time.perf_counter() - started, exemplar)
        self.telemetry.records.labels(self.name, outcome or "ok").inc()

    async def _delivered(self, taken: Taken[Any], deliveries: list[Awaitable[Any]]) -> None:
        """Every output of the record acknowledged by the brokers before the record is acked.
        faust commits acked offsets after flushing its producer, but a send that failed for
        good (a non-retriable error: aiokafka gives up on the batch, faust only logs it) was
        committed past, and its output lost. Such a failure crashes the app instead: the record
        stays unacked, so nothing from it on is committed in its partition, and the restarted
        worker reads it again. (The outputs left before this wait: it holds back only the
        record's ack and the next record of its drain slot, never its audio.)"""
        if not deliveries:
            return
        # Shielded: a stop that cancels this wait must not cancel faust's own futures.
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
            topic=msg.topic,
            partition=msg.partition,
            offset=msg.offset,
            error=error,
        )
        at = f"{msg.topic}/{msg.partition}@{msg.offset}"
        lost = OutputNotDelivered(f"{self.name}: an output of {at} was not delivered: {error}")
        await self.app.crash(lost)
        raise lost from failed

    async def ack(self, event: EventT, manual: StreamT[bytes]) -> None:
        """The record's outputs are on the broker (`_delivered`): its offset may be committed — in
        offset order per partition where records finish out of order (see `InOrderAcks`)."""
        if self._acks is None:
            await manual.ack(event)
            return
        msg = event.message
        for ready in self._acks.done(msg.tp, msg.offset, msg.generation_id):
            await manual.ack(ready)

    async def handle(self, taken: Taken[Any]) -> str | None:
        """Process one record; return an outcome label ("ok", "dead_lettered") or None."""
        raise NotImplementedError

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

    async def _faust_send(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> Any:
        """The faust stages' `Transport`: the record handed to the app's producer."""
        out = self._faust_topics.get(topic)
        if out is None:
            if len(self._faust_topics) > 1000:  # reply topics are per client: keep it bounded
                self._faust_topics.clear()
            out = self._faust_topics[topic] = self.app.topic(topic, value_type=bytes, key_type=bytes)
        pending = await out.send(key=key, value=value, headers=headers)
        if (deliveries := _DELIVERIES.get()) is not None:
            deliveries.append(pending)
        return pending

    async def _send_dlq(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]
    ) -> None:
        # faust commits the source offset only after the agent moves on (producer flushed first).
        pending = await self.outputs.send(topic, key, value, headers)
        await pending

    def failure(self) -> BaseException | None:
        """faust supervises its agents (a crashed agent is restarted); the app itself crashing
        is what a worker cannot recover from."""
        return self.app.crash_reason if self.app.crashed else None

    def send_through(self, transport: Transport) -> None:
        """Send the stage's outputs through `transport` instead of its app's producer (the
        in-memory topology); what the stage may write stays what its spec declares."""
        self.outputs = StageOutputs(self.name, self.topics, transport, self.spec)

    def release(self) -> None:
        """Let go of what the stage holds beside its app (its thread pools): after `stop`, or
        instead of it for a stage whose app never started (the in-memory topology)."""

    async def warm(self) -> None:
        """Load what the stage needs before its first record: its spec's `warm` (off the event
        loop; a worker has run it for the whole process before any stage started)."""
        if (warm := self.spec.warmer()) is not None:
            await warm()

    async def start(self) -> None:
        await self.warm()
        await self.app.start()

    async def stop(self) -> None:
        try:
            await self.app.stop()
        finally:
            self.release()
