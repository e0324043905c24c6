"""The topic follower keeps following whatever a batch throws: the bad record is logged and
skipped, the records around it are taken, and later records still arrive (real Kafka)."""

from __future__ import annotations

import asyncio
import logging

import pytest
from aiokafka import ConsumerRecord

from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topic_follower import TopicFollower
from streamtts.runtime.topics import TopicNames

pytestmark = pytest.mark.integration


class _Recorder(TopicFollower):
    """Takes each record's value; a value starting with "bad" is a bug in the taker."""

    what = "recorder"

    def __init__(self, kafka: KafkaSettings, topic: str) -> None:
        super().__init__(kafka, topic, poll_ms=100, log=logging.getLogger("test.follower"), name="recorder")
        self.taken: list[bytes] = []
        self.arrived = asyncio.Condition()

    async def _take_batch(self, records: list[ConsumerRecord]) -> None:
        for record in records:
            if record.value.startswith(b"bad"):
                raise (KeyError if record.value == b"bad-key" else RuntimeError)("a taker's bug")
        async with self.arrived:
            self.taken.extend(r.value for r in records if r.value not in self.taken)
            self.arrived.notify_all()

    async def wait_for(self, value: bytes) -> None:
        async with self.arrived:
            await asyncio.wait_for(self.arrived.wait_for(lambda: value in self.taken), 20)


async def test_a_record_that_throws_is_skipped_and_following_goes_on(
    kafka_settings: KafkaSettings, topics: TopicNames, caplog: pytest.LogCaptureFixture
) -> None:
    producer = make_producer(kafka_settings)
    await producer.start()
    follower = _Recorder(kafka_settings, topics.control)
    try:
        for value in (b"one", b"bad-runtime", b"two"):
            await producer.send_and_wait(topics.control, value, partition=0)
        with caplog.at_level(logging.WARNING, logger="test.follower"):
            await follower.start()
            await asyncio.wait_for(follower.caught_up.wait(), 20)
            await follower.wait_for(b"two")
            # Following, not only catching up: a bad record later, then a good one after it.
            await producer.send_and_wait(topics.control, b"bad-key", partition=0)
            await producer.send_and_wait(topics.control, b"three", partition=0)
            await follower.wait_for(b"three")
        assert follower.taken == [b"one", b"two", b"three"]
        skipped = [r for r in caplog.records if "recorder_record_skipped" in r.getMessage()]
        assert len(skipped) == 2, [r.getMessage() for r in caplog.records]
    finally:
        await follower.stop()
        await producer.stop()
