"""Admission on real Kafka, the writer's side: a synthesize worker reports its queue on tts.load
(owned partitions, predicted first-span wait, fitted cost lines) and leaves a tombstone at
stop. The gateway's side is tests/gateway/test_admission.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime

from aiokafka import AIOKafkaConsumer, TopicPartition

from streamtts.features.admission.reporter import LoadReporter
from streamtts.producers.request_producer import RequestProducer
from streamtts.runtime.kafka import client_kwargs
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import LoadReport, TTSRequest, wire


async def _reports(
    kafka: KafkaSettings, topic: str, until: Callable[[bytes, LoadReport | None], bool]
) -> None:
    """Read `topic` from the beginning until `until(key, report)` holds (None: a tombstone)."""
    consumer = AIOKafkaConsumer(**client_kwargs(kafka), enable_auto_commit=False)
    await consumer.start()
    try:
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
                for r in records:
                    report = None if r.value is None else wire.decode(LoadReport, r.value, r.headers)
                    if until(r.key or b"", report):
                        return
        raise AssertionError(f"no matching load report on {topic} within 40 s")
    finally:
        await consumer.stop()


async def test_a_synthesize_worker_reports_its_lanes_and_partitions(
    running_pipeline, kafka_settings, topics
) -> None:  # type: ignore[no-untyped-def]
    """After one Kokoro request, the worker's report names every partition it owns, its
    lanes' prediction, and the Kokoro cost line fitted from that run."""
    async with RequestProducer(kafka_settings) as producer:
        await producer.submit(TTSRequest.new("Your order has shipped.", voice="jm_kumo", language="en"))
    seen: list[LoadReport] = []

    def fitted(key: bytes, report: LoadReport | None) -> bool:
        if report is None or key != report.worker.encode():
            return False
        seen.append(report)
        line = report.cost.get("kokoro")
        return (
            report.partitions.get(topics.segments) == list(range(6)) and line is not None and line.runs >= 1
        )

    await _reports(kafka_settings, topics.load, fitted)
    report = seen[-1]
    # One worker owns every partition of both pools and predicts with its lanes.
    assert report.partitions[topics.segments_long] == list(range(6))
    assert report.first_wait_ms is not None and report.first_wait_ms >= 0
    assert report.cost["kokoro"].ms_per_phoneme > 0
    assert report.slots >= 1 and report.release == "stable"


async def test_a_stopped_reporter_leaves_a_tombstone(kafka_settings, topics) -> None:  # type: ignore[no-untyped-def]
    def snapshot(worker: str, interval_s: float) -> LoadReport:
        return LoadReport(worker=worker, release="stable", interval_s=interval_s, at=datetime.now(UTC))

    reporter = LoadReporter(kafka_settings, topics.load, snapshot, interval_s=0.2, worker="w-test:1")
    await reporter.start()
    await _reports(kafka_settings, topics.load, lambda key, r: r is not None and r.worker == "w-test:1")
    await reporter.stop()
    await _reports(kafka_settings, topics.load, lambda key, r: key == b"w-test:1" and r is None)
