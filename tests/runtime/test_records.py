"""runtime.records.parsed: the contracts of a consumer batch, malformed records skipped."""

from __future__ import annotations

from aiokafka import ConsumerRecord, TopicPartition

from streamtts.runtime.records import parsed
from streamtts.schemas import TTSRequest
from tests.factories import request


def _record(tp: TopicPartition, offset: int, value: bytes | None) -> ConsumerRecord:
    return ConsumerRecord(
        tp.topic, tp.partition, offset, 0, 0, None, value, None, 0, 0 if value is None else len(value), []
    )


def test_parsed_yields_valid_values_in_batch_order_and_skips_the_rest() -> None:
    a, b = request("One."), request("Two.")
    c = request("Three.")
    tp0, tp1 = TopicPartition("t", 0), TopicPartition("t", 1)
    batch = {
        tp0: [_record(tp0, 0, a.to_bytes()), _record(tp0, 1, b"{not json"), _record(tp0, 2, b.to_bytes())],
        tp1: [_record(tp1, 0, None), _record(tp1, 1, c.to_bytes())],
    }
    assert [r.request_id for r in parsed(batch, TTSRequest)] == [a.request_id, b.request_id, c.request_id]
