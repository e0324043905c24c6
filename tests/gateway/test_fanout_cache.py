"""The gateway's status cache is bounded in bytes as well as entries (no Kafka needed)."""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.gateway.fanout import Fanout
from streamtts.gateway.metrics import GatewayMetrics
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import AudioChunk


def _chunk(rid: str, tenant: str, size: int) -> bytes:
    now = datetime.now(UTC)
    return AudioChunk(
        request_id=rid,
        tenant=tenant,
        seq=0,
        total=1,
        last=True,
        format="pcm",
        sample_rate=24000,
        audio=bytes(size),
        duration_ms=size / 48,
        created_at=now,
        encoded_at=now,
    ).to_bytes()


def test_audio_bytes_are_bounded_and_finished_requests_go_first() -> None:
    fan = Fanout(
        KafkaSettings(), GatewayMetrics(), entries=100, ttl_s=60, history_lookback_s=60, max_bytes=10_000
    )
    audio = fan.topics.audio
    read = fan.track("being-read", "acme", "pcm", expects_result=False)
    read.listeners = 1
    fan._dispatch(audio, b"being-read", _chunk("being-read", "acme", 4000))
    for i in range(5):
        fan.track(f"r{i}", "acme", "pcm", expects_result=False)
        fan._dispatch(audio, f"r{i}".encode(), _chunk(f"r{i}", "acme", 4000))
    assert fan.cached_bytes <= 10_000
    assert "being-read" in fan.cache, "a request a client is reading is never evicted"
    assert "r4" in fan.cache and "r0" not in fan.cache, "the oldest idle ones go"


def test_another_tenants_chunk_with_the_same_id_is_not_mixed_in() -> None:
    fan = Fanout(KafkaSettings(), GatewayMetrics(), entries=10, ttl_s=60, history_lookback_s=60)
    state = fan.track("same-id", "acme", "pcm", expects_result=False)
    fan._dispatch(fan.topics.audio, b"same-id", _chunk("same-id", "globex", 100))
    assert state.chunks == [] and fan.cached_bytes == 0
    fan._dispatch(fan.topics.audio, b"same-id", _chunk("same-id", "acme", 100))
    assert len(state.chunks) == 1 and fan.cached_bytes == 100
