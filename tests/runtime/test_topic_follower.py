"""The topic follower keeps following whatever a batch throws: the bad record is logged and
skipped, the records around it are taken, and later records still arrive (real Kafka)."""

from __future__ import annotations

import asyncio
import logging
import time

import pytest
from aiokafka import ConsumerRecord

from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topic_follower import FOLLOW_FETCH_WAIT_MS, TopicFollower
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


async def test_an_idle_follower_takes_a_record_at_once_though_its_fetch_waits_seconds(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    """The broker holds a follower's fetch up to FOLLOW_FETCH_WAIT_MS when the topic is quiet;
    a record that arrives meanwhile must answer it at once (a cancel is barge-in latency)."""
    producer = make_producer(kafka_settings)
    await producer.start()
    follower = _Recorder(kafka_settings, topics.control)
    took: list[float] = []
    try:
        await follower.start()
        await asyncio.wait_for(follower.caught_up.wait(), 20)
        for n in range(3):  # each time the follower has just asked again, and the topic is quiet
            value = f"cancel-{n}".encode()
            started = time.monotonic()
            await producer.send_and_wait(topics.control, value, partition=0)
            await follower.wait_for(value)
            took.append(time.monotonic() - started)
    finally:
        await follower.stop()
        await producer.stop()
    assert max(took) < FOLLOW_FETCH_WAIT_MS / 1000 / 2, took
