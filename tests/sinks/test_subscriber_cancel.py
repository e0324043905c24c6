"""The subscriber library after a cancel (no Kafka: records are handed to it directly): a
cancelled request's chunks encoded after the cancel are not delivered, its place in the
stream still counts, and another tenant's cancel matches nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import AudioChunk, ControlMessage
from streamtts.sinks.subscriber import AudioSubscriber

T0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def _chunk(seq: int, total: int, at_s: float, *, tenant: str = "acme", cancelled: bool = False) -> bytes:
    return AudioChunk(
        request_id="r1",
        tenant=tenant,
        seq=seq,
        total=total,
        last=seq == total - 1,
        format="pcm",
        sample_rate=8000,
        audio=b"" if cancelled else b"\x00\x01" * 800,
        duration_ms=0.0 if cancelled else 100.0,
        cancelled=cancelled,
        created_at=T0,
        encoded_at=T0 + timedelta(seconds=at_s),
    ).to_bytes()


def _cancel(at_s: float, tenant: str = "acme") -> bytes:
    return ControlMessage(request_id="r1", tenant=tenant, at=T0 + timedelta(seconds=at_s)).to_bytes()


async def test_chunks_encoded_after_the_cancel_are_not_delivered() -> None:
    sub = AudioSubscriber(KafkaSettings(), "tts.audio", request_ids=["r1"])
    assert sub._accept(_chunk(0, 4, 0.1)) is None
    assert sub._accept(_chunk(2, 4, 0.9)) is None  # read before the cancel, encoded after it
    assert sub._cancel(_cancel(0.5)) is None
    assert sub._accept(_chunk(1, 4, 0.3)) is None  # encoded before it: delivered
    audio = sub._accept(_chunk(3, 4, 1.2, cancelled=True))
    assert audio is not None and audio.cancelled
    assert [c.seq for c in audio.chunks] == [0, 1, 2, 3]  # the stream is whole
    assert [c.seq for c in audio.chunks if c.audio] == [0, 1]
    assert audio.duration_ms == 200.0


async def test_a_cancel_before_the_first_chunk_and_another_tenants_cancel() -> None:
    sub = AudioSubscriber(KafkaSettings(), "tts.audio", request_ids=["r1"])
    sub._cancel(_cancel(0.5, tenant="globex"))  # matches nothing
    sub._accept(_chunk(0, 2, 0.1))
    audio = sub._accept(_chunk(1, 2, 0.9))
    assert audio is not None and not audio.cancelled and audio.duration_ms == 200.0
    early = AudioSubscriber(KafkaSettings(), "tts.audio", request_ids=["r1"])
    early._cancel(_cancel(0.5))  # read before any of its chunks
    early._accept(_chunk(0, 2, 0.1))
    cut = early._accept(_chunk(1, 2, 0.9))
    assert cut is not None and cut.cancelled and cut.duration_ms == 100.0
