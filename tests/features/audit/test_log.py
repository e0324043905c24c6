"""AuditLog: recording never waits for Kafka (a bounded queue, overflow counted), and what
was queued is on `tts.audit` after a flush."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from prometheus_client import CollectorRegistry

from streamtts.features.audit.log import AuditLog, key_id, read_audit
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas.audit import AuditEvent

pytestmark = pytest.mark.integration


def _event(n: int) -> AuditEvent:
    return AuditEvent.new(source="gateway", action="status", outcome="ok", tenant="acme", request_id=f"r{n}")


async def test_a_full_queue_drops_the_kafka_copy_counts_it_and_never_blocks(
    kafka_settings: KafkaSettings,
) -> None:
    registry = CollectorRegistry()
    since = datetime.now(UTC) - timedelta(seconds=1)
    async with AuditLog(kafka_settings, registry, queue_size=10) as audit:
        started = time.perf_counter()
        for n in range(100):  # no await in between: the drain task cannot take any
            audit.record(_event(n))
        per_event_us = (time.perf_counter() - started) / 100 * 1e6
        await audit.flush()
    print(f"AuditLog.record: {per_event_us:.1f} µs per event (JSON log line + queue)")
    assert registry.get_sample_value("streamtts_audit_failed_total", {"reason": "queue_full"}) == 90
    assert registry.get_sample_value("streamtts_audit_events_total", {"action": "status"}) == 100
    on_kafka = [e.request_id async for e in read_audit(kafka_settings, since=since, tenant="acme")]
    assert on_kafka == [f"r{n}" for n in range(10)], "the first ten, in order, once each"
    assert per_event_us < 2000


async def test_events_recorded_before_stop_are_flushed(kafka_settings: KafkaSettings) -> None:
    since = datetime.now(UTC) - timedelta(seconds=1)
    audit = AuditLog(kafka_settings, CollectorRegistry())
    await audit.start()
    for n in range(50):
        audit.record(_event(n))
    await audit.stop()  # no flush() first: stop must deliver them
    assert len([e async for e in read_audit(kafka_settings, since=since)]) == 50


def test_key_ids_are_stable_and_do_not_contain_the_key() -> None:
    assert key_id("s3cret-key") == key_id("s3cret-key") != key_id("s3cret-kez")
    assert key_id("s3cret-key").startswith("sha256:") and "s3cret" not in key_id("s3cret-key")
