"""A record is acked only once what it wrote is on the broker (real Kafka).

faust commits acked offsets after flushing its producer, but a send the broker refuses for
good (here: a record over the output topic's `max.message.bytes`, a non-retriable error)
resolves the flush all the same; faust only logs it. Acked on handing over, such a record was
committed past and its output lost, at-least-once or not. The stage must stop instead, with the
record uncommitted, so the restarted worker reads it again."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from aiokafka import TopicPartition
from aiokafka.admin.config_resource import ConfigResource, ConfigResourceType

from streamtts.runtime.faust_stage import FaustStage
from streamtts.runtime.kafka import make_producer, started_admin
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import Taken
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import GroupSpec, StageSpec

pytestmark = pytest.mark.integration

LIMIT = 2048
"""The output topic's max.message.bytes in this test."""


class Echo(FaustStage):
    """Writes every record it reads to its one output, as it is."""

    name = "echo"

    async def handle(self, taken: Taken[Any]) -> str | None:
        msg = taken.event.message
        await self.outputs.send(self.outputs.role(self.spec.outputs[0]), msg.key, msg.value, None)
        return "ok"


async def _failed(stage: FaustStage, timeout_s: float) -> BaseException | None:
    """The stage's failure once its app has crashed (or stopped), or None at the deadline."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stage.app.wait_until_stopped(), timeout_s)
    return stage.failure()


async def test_an_output_the_broker_refuses_stops_the_stage_with_its_record_uncommitted(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    source, output = topics.segments, topics.pcm
    async with started_admin(kafka_settings) as admin:
        resource = ConfigResource(ConfigResourceType.TOPIC, output, {"max.message.bytes": str(LIMIT)})
        await admin.alter_configs([resource])
    spec = StageSpec("echo", groups=(GroupSpec(("segments",)),), outputs=("pcm",), build=Echo)
    stage = Echo(StageParts.of(kafka_settings, topics=topics), spec=spec)
    await stage.start()
    producer = make_producer(kafka_settings)
    await producer.start()
    try:
        sent = [
            await producer.send_and_wait(source, value, key=b"k", partition=0)
            for value in (b"fits", b"x" * (4 * LIMIT), b"after")
        ]
        refused_at = sent[1].offset
        failure = await _failed(stage, 60.0)
    finally:
        await producer.stop()
        await stage.stop()
    assert failure is not None, "the refused output was acked and the stage went on"
    assert "not delivered" in str(failure)
    async with started_admin(kafka_settings) as admin:
        committed = await admin.list_consumer_group_offsets(stage.app.conf.id)
    at = committed.get(TopicPartition(source, 0))
    # Nothing from the refused record on is committed: it is read again after a restart.
    assert at is None or at.offset <= refused_at, (at, refused_at)
