"""Admission's decision, without Kafka: which worker a request's first span queues on, how long
it would wait and take, and whether its deadline admits it."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka.partitioner import DefaultPartitioner

from streamtts.features.admission.policy import PIPELINE_MS, admit, partition_of, predict
from streamtts.features.admission.view import STALE_INTERVALS, LoadView
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import LoadReport, TTSRequest
from streamtts.schemas.load import CostLine

TOPIC = "tts.segments"


def _report(worker: str, parts: list[int], wait: float | None, **kw: object) -> LoadReport:
    return LoadReport.from_obj(
        {
            "worker": worker,
            "release": "stable",
            "partitions": {TOPIC: parts},
            "first_wait_ms": wait,
            "cost": {
                "kokoro": {"intercept_ms": 100.0, "ms_per_phoneme": 10.0, "phonemes_per_char": 1.0, "runs": 5}
            },
            "interval_s": 1.0,
            "at": datetime.now(UTC),
            **kw,
        }
    )


def test_partition_is_kafkas_own_for_the_key() -> None:
    partitioner = DefaultPartitioner()
    for i in range(500):
        key = f"req-{i}".encode()
        assert partition_of(key, 6) == partitioner(key, list(range(6)), list(range(6)))


def test_the_owner_of_the_requests_partition_predicts_its_first_audio() -> None:
    rid = "abc123"
    mine = partition_of(rid.encode(), 6)
    others = [p for p in range(6) if p != mine]
    reports = [_report("w1", others, 50_000.0), _report("w2", [mine], 900.0)]
    got = predict(reports, request_id=rid, topic=TOPIC, partitions=6, engine="kokoro", chars=200)
    assert got is not None and got.worker == "w2"
    # Its wait, plus the first span (at most 40 chars: 100 + 10 ms × 40 phonemes), plus the path.
    assert got.first_audio_ms == pytest.approx(900 + 100 + 400 + PIPELINE_MS)
    short = predict(reports, request_id=rid, topic=TOPIC, partitions=6, engine="kokoro", chars=10)
    assert short is not None and short.first_audio_ms == pytest.approx(900 + 100 + 100 + PIPELINE_MS)


def test_no_prediction_without_a_report_covering_the_partition() -> None:
    rid = "abc123"
    mine = partition_of(rid.encode(), 6)
    others = [p for p in range(6) if p != mine]
    assert (
        predict(
            [_report("w1", others, 1.0)], request_id=rid, topic=TOPIC, partitions=6, engine="kokoro", chars=5
        )
        is None
    )
    # A fifo worker makes no prediction: unknown, so admitted.
    assert (
        predict(
            [_report("w1", [mine], None)], request_id=rid, topic=TOPIC, partitions=6, engine="kokoro", chars=5
        )
        is None
    )
    assert admit(None, 100) is None


def test_a_deadline_refuses_only_what_it_cannot_meet() -> None:
    rid = "abc123"
    report = _report("w", list(range(6)), 2_000.0)
    got = predict([report], request_id=rid, topic=TOPIC, partitions=6, engine="kokoro", chars=12)
    assert got is not None
    assert admit(got, None) is None  # no deadline: always queued
    assert admit(got, int(got.first_audio_ms) + 1) is None
    refusal = admit(got, 1_500)
    assert refusal is not None and refusal.reason == "overloaded"
    assert refusal.predicted_ms == pytest.approx(got.first_audio_ms)
    assert "overloaded" in refusal.message() and "1500 ms" in refusal.message()
    assert refusal.retry_after_s >= 1.0


async def test_stale_reports_stop_counting() -> None:
    view = LoadView(KafkaSettings(), "tts.load")
    now = time.monotonic()
    view.add(_report("old", [0], 10.0), seen=now - STALE_INTERVALS * 1.0 - 0.1)
    view.add(_report("new", [1], 10.0), seen=now)
    assert [r.worker for r in view.fresh(now)] == ["new"]


async def test_a_report_read_from_the_log_is_as_old_as_its_own_time() -> None:
    """Read from the beginning of the compacted topic, a report from before a restart must
    not look fresh because it was read just now."""
    view = LoadView(KafkaSettings(), "tts.load")

    class Record:
        def __init__(self, report: LoadReport) -> None:
            self.key, self.value = report.worker.encode(), report.to_bytes()

    old = _report("gone", [0], 10.0, at=datetime.now(UTC) - timedelta(minutes=10))
    await view._take_batch([Record(old), Record(_report("live", [1], 10.0))])  # type: ignore[list-item]
    assert [r.worker for r in view.fresh()] == ["live"]


def test_request_deadline_is_validated() -> None:
    assert TTSRequest.new("hi", deadline_ms=1500).deadline_ms == 1500
    with pytest.raises(ValueError, match="deadline_ms"):
        TTSRequest.new("hi", deadline_ms=0)
    assert CostLine(intercept_ms=1, ms_per_phoneme=1, phonemes_per_char=1, runs=0).runs == 0


async def test_a_live_report_is_fresh_whatever_the_workers_clock_says() -> None:
    """Once caught up, a report just read is the worker's latest: a worker clock minutes behind
    must not make every report it sends look stale (admission would silently turn off)."""
    view = LoadView(KafkaSettings(), "tts.load")
    view.caught_up.set()

    class Record:
        def __init__(self, report: LoadReport) -> None:
            self.key, self.value = report.worker.encode(), report.to_bytes()

    behind = _report("skewed", [0], 10.0, at=datetime.now(UTC) - timedelta(minutes=10))
    await view._take_batch([Record(behind)])  # type: ignore[list-item]
    assert [r.worker for r in view.fresh()] == ["skewed"]
