"""What every faust stage shares: reading the source record, dead-lettering, start/stop."""

from __future__ import annotations

import logging
from typing import Any

import faust

from processors.app import make_app
from processors.dead_letters import SourceRecord, dead_letter_record, failure_reason
from producers.replay.headers import REPLAY_STAGE, header, header_pairs
from streamtts.jsonlog import log_event
from streamtts.settings import KafkaSettings, PipelineSettings
from streamtts.topics import TopicNames


def aimed_elsewhere(event: Any, stage: str) -> bool:
    """A replayed record addressed to another stage that reads the same topic."""
    target = header(event.message.headers, REPLAY_STAGE)
    return target is not None and target != stage.encode()


def source_of(event: Any) -> SourceRecord:
    msg = event.message
    return SourceRecord(msg.topic, msg.partition, msg.offset, msg.key, msg.value, header_pairs(msg.headers))


class FaustStage:
    """Base of the segment/synthesize/encode stages: one faust app + its DLQ topic."""

    name = "stage"

    def __init__(
        self, kafka: KafkaSettings, pipeline: PipelineSettings, topics: TopicNames | None = None
    ) -> None:
        self.kafka = kafka
        self.pipeline = pipeline
        self.topics = topics or TopicNames(kafka.topic_prefix)
        self.app: faust.App = make_app(self.name, kafka, pipeline)
        self.dlq = self.app.topic(self.topics.dlq(self.name), value_type=bytes, key_type=bytes)
        self.log = logging.getLogger(f"streamtts.{self.name}")

    async def _agent(self, stream: Any) -> None:
        """The faust agent: one record at a time, in partition order."""
        async for event in stream.events():
            if aimed_elsewhere(event, self.name):
                continue  # a replay for the other consumer of this topic
            await self.handle(event)

    async def handle(self, event: Any) -> None:
        raise NotImplementedError

    def topic(self, name: str) -> faust.TopicT:
        return self.app.topic(name, value_type=bytes, key_type=bytes)

    async def dead_letter(
        self,
        event: Any,
        error: BaseException,
        *,
        request_id: str | None = None,
        tenant: str | None = None,
    ) -> None:
        """Send the record to this stage's DLQ. faust commits the source offset only after
        this send is acknowledged (the send is attached to the current event)."""
        source = source_of(event)
        value, headers = dead_letter_record(
            stage=self.name, source=source, error=error, request_id=request_id, tenant=tenant
        )
        log_event(
            self.log,
            "dead_lettered",
            logging.WARNING,
            stage=self.name,
            request_id=request_id,
            tenant=tenant,
            reason=failure_reason(error),
            error=str(error)[:300],
            topic=source.topic,
            partition=source.partition,
            offset=source.offset,
        )
        # Wait for the broker's ack of the dead letter itself before moving on.
        pending = await self.dlq.send(key=source.key, value=value, headers=headers)
        await pending

    async def start(self) -> None:
        await self.app.start()

    async def stop(self) -> None:
        await self.app.stop()
