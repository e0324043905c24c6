"""The faust stages (segment, synthesize, encode): one faust app per consumer group, its
agent running the one stage loop (`runtime.stage_loop.StageLoop`) on faust's stream, plus
dead-lettering, supervision, start/stop (a `Stage`, see `runtime.stage`). A stage is its
handler: `take` (read a record), `handle` (its outputs)."""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import faust
from faust.types import EventT, StreamT

from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord
from streamtts.runtime.faust_app import make_app
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.stage_loop import StageLoop, pending_delivery
from streamtts.runtime.stage_outputs import StageOutputs
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.topology import StageSpec, stage_spec
from streamtts.schemas.headers import header_pairs
from streamtts.schemas.release import BASE_RELEASE


class _FaustSource:
    """faust's stream as the stage loop's `RecordSource`: acks are faust's manual acks, which
    faust commits (or, under exactly-once, puts in its transaction) after its producer flushed."""

    def __init__(self, manual: Any, app: faust.App) -> None:
        self.manual = manual
        self.app = app

    def events(self) -> AsyncIterator[EventT]:
        events: AsyncIterator[EventT] = self.manual.events()
        return events

    async def ack(self, event: Any) -> None:
        await self.manual.ack(event)

    def generation(self) -> int:
        return int(self.app.consumer_generation_id)


def source_of(event: EventT) -> SourceRecord:
    msg = event.message
    return SourceRecord(msg.topic, msg.partition, msg.offset, msg.key, msg.value, header_pairs(msg.headers))


class FaustStage(StageLoop):
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
        super().__init__()
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
        """The faust agent over the stage's sources: the one stage loop on faust's stream."""
        await self.run(_FaustSource(stream.noack(), self.app))  # type: ignore[attr-defined]  # on faust.Stream; StreamT lacks it

    async def crash(self, error: BaseException) -> None:
        await self.app.crash(error)

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
        pending_delivery(pending)
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
