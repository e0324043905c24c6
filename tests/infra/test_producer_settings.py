"""Every producer the pipeline configures is fit for a replicated cluster: acks=all (with
min.insync.replicas=2 an acknowledged record is on two brokers), idempotent (a retry after a
leader election is written once), and retrying long enough to outlast an election."""

from __future__ import annotations

import pytest
from aiokafka import AIOKafkaProducer

from streamtts.runtime.faust_app import IdempotentProducer, make_app
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.pipeline_settings import DeliverySettings, PipelineSettings
from streamtts.runtime.settings import KafkaSettings

ELECTION_S = 9 + 5
"""A SIGKILLed leader's broker session timeout plus a metadata refresh."""


async def _assert_safe(producer: AIOKafkaProducer) -> None:
    assert producer._sender._acks == -1, "acks=all"
    assert producer._txn_manager is not None, "idempotent"
    # aiokafka retries a batch until it is `request_timeout_ms` old (Kafka's delivery.timeout.ms).
    assert producer._request_timeout_ms >= 2 * ELECTION_S * 1000
    await producer.stop()  # never started: only releases its client


async def test_the_aiokafka_factory_builds_safe_producers() -> None:
    kafka = KafkaSettings(bootstrap_servers="127.0.0.1:1")
    await _assert_safe(make_producer(kafka))
    await _assert_safe(make_producer(kafka, transactional_id="tx-1"))


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_faust_stage_producers_are_safe_under_both_guarantees(guarantee: str) -> None:
    pipeline = PipelineSettings(delivery=DeliverySettings(processing_guarantee=guarantee))  # type: ignore[arg-type]
    producer = make_app("probe", KafkaSettings(bootstrap_servers="127.0.0.1:1"), pipeline).producer
    assert isinstance(producer, IdempotentProducer)
    await _assert_safe(producer._new_producer())
    await _assert_safe(producer._new_producer(transactional_id="tx-probe"))
