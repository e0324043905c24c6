"""The storage writer against a fake store: retries only what may succeed, the audio's failure
fails the request, the marker's and the captions' never do."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import numpy as np
import pytest

from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.telemetry import Telemetry
from streamtts.schemas import RequestContext, StorageRef, WordTiming
from streamtts.sinks.assembler import AssembledRequest
from streamtts.sinks.exceptions import StorageRejected, StorageUnavailable
from streamtts.sinks.object_store import sibling_key
from streamtts.sinks.storage_writer import StorageWriter
from streamtts.sinks.telemetry import SinkTelemetry
from tests.factories import request


class _Store:
    """Fails the first `audio_failures` audio uploads with `error`; records what was stored."""

    def __init__(
        self, error: Exception | None = None, audio_failures: int = 0, extras_fail: bool = False
    ) -> None:
        self.error = error
        self.audio_failures = audio_failures
        self.extras_fail = extras_fail
        self.audio_attempts = 0
        self.audio: list[tuple[str, int]] = []
        self.beside: list[str] = []
        self.markers: list[tuple[str, dict[str, str]]] = []

    def put_audio(self, ctx: RequestContext, data: bytes, **kw: object) -> StorageRef:
        self.audio_attempts += 1
        if self.audio_attempts <= self.audio_failures:
            assert self.error is not None
            raise self.error
        key = f"{ctx.tenant}/{ctx.request_id}.wav"
        self.audio.append((key, len(data)))
        return StorageRef(bucket="b", key=key, size=len(data), etag="e", content_type="audio/wav")

    def put_beside(
        self, audio: StorageRef, extension: str, data: bytes, ctype: str, tags: object
    ) -> StorageRef:
        if self.extras_fail:
            raise PermissionError("denied")  # an OSError: transient, retried, then given up
        key = sibling_key(audio.key, extension)
        self.beside.append(key)
        return StorageRef(bucket="b", key=key, size=len(data), etag="e", content_type=ctype)

    def put_marker(self, key: str, metadata: dict[str, str]) -> None:
        if self.extras_fail:
            raise ConnectionError("down")
        self.markers.append((key, metadata))


@pytest.fixture
def telemetry() -> Telemetry:
    return Telemetry()


@pytest.fixture
def writers(telemetry: Telemetry) -> Iterator[list[StorageWriter]]:
    made: list[StorageWriter] = []
    yield made
    for writer in made:
        writer.close()


def _writer(
    made: list[StorageWriter],
    telemetry: Telemetry,
    store: _Store,
    *,
    retries: int = 2,
    retention_days: int = 0,
    stopping: asyncio.Event | None = None,
) -> StorageWriter:
    pipeline = PipelineSettings.of(storage_retries=retries, retention_days=retention_days)
    writer = StorageWriter(
        store,  # type: ignore[arg-type]  # a stand-in with the store's methods
        pipeline,
        SinkTelemetry(telemetry, "sink"),
        stopping or asyncio.Event(),
    )
    made.append(writer)
    return writer


def _assembled(*, timestamps: bool = False) -> AssembledRequest:
    ctx = RequestContext.of(request(tenant="acme", format="wav", timestamps=timestamps))
    words = (
        [WordTiming(text="Hello", start_ms=0, end_ms=50, char_start=0, char_end=5)] if timestamps else None
    )
    return AssembledRequest(
        ctx=ctx,
        sample_rate=24000,
        pcm=np.zeros(2400, dtype="<i2").tobytes(),
        chunks=1,
        degraded=[],
        records=[],
        words=words,
    )


def _retries(telemetry: Telemetry) -> float | None:
    return telemetry.registry.get_sample_value(
        "streamtts_retries_total", {"stage": "sink", "reason": "storage"}
    )


async def test_a_transient_fault_is_retried(writers: list[StorageWriter], telemetry: Telemetry) -> None:
    store = _Store(ConnectionError("reset"), audio_failures=1)
    stored = await _writer(writers, telemetry, store).write(_assembled())
    assert store.audio_attempts == 2 and stored.audio.key == store.audio[0][0]
    assert store.audio[0][1] > 2400 * 2, "the encoded file (a header and the samples), not raw PCM"
    assert _retries(telemetry) == 1


async def test_an_outage_through_every_retry_is_unavailable(
    writers: list[StorageWriter], telemetry: Telemetry
) -> None:
    store = _Store(TimeoutError("slow"), audio_failures=99)
    with pytest.raises(StorageUnavailable, match="failed 2 times: TimeoutError"):
        await _writer(writers, telemetry, store).write(_assembled())
    assert store.audio_attempts == 2 and _retries(telemetry) == 2


async def test_a_refusal_is_not_retried(writers: list[StorageWriter], telemetry: Telemetry) -> None:
    store = _Store(ValueError("bad header value"), audio_failures=99)
    with pytest.raises(StorageRejected, match="refused the upload: ValueError: bad header value"):
        await _writer(writers, telemetry, store).write(_assembled())
    assert store.audio_attempts == 1 and _retries(telemetry) is None


async def test_shutdown_ends_the_backoff_at_once(writers: list[StorageWriter], telemetry: Telemetry) -> None:
    stopping = asyncio.Event()
    stopping.set()
    store = _Store(ConnectionError("reset"), audio_failures=99)
    writer = _writer(writers, telemetry, store, retries=50, stopping=stopping)
    with pytest.raises(StorageUnavailable, match="shutting down"):
        await asyncio.wait_for(writer.write(_assembled()), timeout=10)
    assert store.audio_attempts == 1, "no second attempt once shutdown began"


async def test_captions_and_marker_beside_the_audio(
    writers: list[StorageWriter], telemetry: Telemetry
) -> None:
    store = _Store()
    req = _assembled(timestamps=True)
    stored = await _writer(writers, telemetry, store, retention_days=7).write(req)
    stem = f"acme/{req.ctx.request_id}"
    assert sorted(store.beside) == [f"{stem}.srt", f"{stem}.vtt", f"{stem}.words.json"]
    assert stored.captions is not None and stored.captions.vtt.key == f"{stem}.vtt"
    ((marker, meta),) = store.markers
    assert marker.endswith(req.ctx.request_id) and meta["key"] == stored.audio.key
    assert stored.expires_at is not None and meta["expires-at"] == stored.expires_at.isoformat()


async def test_no_marker_without_retention(writers: list[StorageWriter], telemetry: Telemetry) -> None:
    store = _Store()
    stored = await _writer(writers, telemetry, store, retention_days=0).write(_assembled())
    assert store.markers == [] and stored.expires_at is None


async def test_failing_extras_never_fail_stored_audio(
    writers: list[StorageWriter], telemetry: Telemetry
) -> None:
    store = _Store(extras_fail=True)
    stored = await _writer(writers, telemetry, store, retries=1, retention_days=7).write(
        _assembled(timestamps=True)
    )
    assert store.audio and stored.audio.key == store.audio[0][0]
    assert stored.captions is None, "captions given up; the words stay in the result"
    assert stored.expires_at is not None, "the result still says when the audio expires"
