"""`replay dlq` re-drives a dead letter only to a topic its stage reads: the origin header is
anyone's to write, and must not turn replay into a way to write into tts.results."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from streamtts.producers.replay import ReplayOptions, replay_dlq
from streamtts.runtime.dead_letters import SourceRecord, dead_letter_record
from streamtts.runtime.kafka import client_kwargs
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas.exceptions import ContractError

pytestmark = pytest.mark.integration


async def test_a_dead_letter_naming_a_foreign_topic_is_not_redriven(
    kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    error = ContractError("request", "", "invalid_json", "bad")
    forged = dead_letter_record(
        stage="segment", source=SourceRecord(topics.results, 0, 1, b"k", b"{forged result}"), error=error
    )
    honest = dead_letter_record(
        stage="segment", source=SourceRecord(topics.requests, 0, 2, b"k2", b"{not json"), error=error
    )
    producer = AIOKafkaProducer(**client_kwargs(kafka_settings))
    await producer.start()
    try:
        for letter in (forged, honest):
            await producer.send_and_wait(
                topics.dlq("segment"), letter.payload, key=letter.key, headers=letter.headers()
            )
    finally:
        await producer.stop()
    before = await _end(kafka_settings, topics.results)
    summary = await replay_dlq(kafka_settings, "segment", options=ReplayOptions(progress=False))
    assert summary.redriven == 1 and summary.skipped["foreign_topic"] == 1
    assert await _end(kafka_settings, topics.results) == before, "nothing was written to tts.results"


async def _end(kafka: KafkaSettings, topic: str) -> int:
    from aiokafka import TopicPartition

    from streamtts.runtime.kafka import make_consumer, topic_partitions

    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        tps = [TopicPartition(topic, p) for p in await topic_partitions(kafka, topic)]
        return sum((await consumer.end_offsets(tps)).values())
    finally:
        await consumer.stop()
