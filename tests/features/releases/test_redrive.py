"""Which stranded segments a rollback re-drives, and how they look on stable (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from aiokafka import TopicPartition

from streamtts.features.releases.redrive import LaneRecord, on_stable, unfinished
from streamtts.schemas import RequestContext, Segment, TTSRequest


def _segment(tenant: str, release: str = "cand") -> Segment:
    request = TTSRequest.new("Hello there.", language="en", voice="en_joe", tenant=tenant)
    ctx = RequestContext.of(request).model_copy(update={"release": release})
    return Segment(
        request_id=request.request_id,
        seq=0,
        total=1,
        last=True,
        text="Hello there.",
        lang="en",
        request=ctx,
        segmented_at=datetime.now(UTC),
    )


def _record(offset: int, segment: Segment | None) -> LaneRecord:
    value = segment.to_bytes() if segment else b"not a segment"
    request = (segment.request.tenant, segment.request_id) if segment else None
    return LaneRecord(TopicPartition("lane", 0), offset, b"k", value, (), 0, request)


def test_only_requests_without_a_result_are_re_driven() -> None:
    done, waiting = _segment("acme"), _segment("globex")
    same_id_other_tenant = waiting.model_copy(
        update={"request": waiting.request.model_copy(update={"tenant": "initech"})}
    )
    records = [_record(0, done), _record(1, waiting), _record(2, same_id_other_tenant), _record(3, None)]
    chosen = unfinished(records, {("acme", done.request_id), ("initech", waiting.request_id)})
    # The result of another tenant's request with the same id does not finish this one; an
    # unparsable record goes on (stable's synthesize dead-letters it, as the candidate would).
    assert [r.offset for r in chosen] == [1, 3]


def test_a_re_driven_segment_is_stable_s_and_keeps_everything_else() -> None:
    segment = _segment("acme")
    moved = Segment.from_bytes(on_stable(segment.to_bytes(), "stable"))
    assert moved.request.release == "stable"
    assert moved.model_copy(update={"request": segment.request}) == segment
    assert on_stable(b"garbage", "stable") == b"garbage"
