"""The one result builder: what a completed, cancelled, storage-failed or stale request's
result carries (pure: no Kafka, no storage)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from streamtts.schemas import Captions, RequestContext, StorageRef, WordTiming
from streamtts.schemas.chunks import MarkTiming
from streamtts.schemas.result import MAX_INLINE_WORDS
from streamtts.sinks.assembler import AssembledRequest
from streamtts.sinks.result_builder import build_result, incomplete_error
from streamtts.sinks.storage_writer import StoredFiles
from tests.factories import request

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
REF = StorageRef(bucket="b", key="acme/x.wav", size=10, etag="e", content_type="audio/wav")


def _words(n: int, step_ms: float = 100.0) -> list[WordTiming]:
    return [
        WordTiming(text="w", start_ms=i * step_ms, end_ms=i * step_ms + 50, char_start=0, char_end=1)
        for i in range(n)
    ]


def _assembled(*, samples: int = 2400, **kw: object) -> AssembledRequest:
    ctx = RequestContext.of(request(timestamps=True, tenant="acme"))
    return AssembledRequest(
        ctx=ctx,
        sample_rate=24000,
        pcm=np.zeros(samples, dtype="<i2").tobytes(),
        chunks=2,
        degraded=[],
        records=[],
        first_synthesized_at=ctx.created_at + timedelta(milliseconds=250),
        **kw,  # type: ignore[arg-type]
    )


def test_a_completed_result_names_its_files_words_and_marks() -> None:
    req = _assembled(words=_words(3), marks=[MarkTiming(name="m", time_ms=10.0)])
    stored = StoredFiles(REF, Captions(vtt=REF, srt=REF, words=REF), NOW + timedelta(days=7))
    result = build_result(req.ctx, req, completed_at=NOW, stored=stored)
    assert result.status == "completed" and result.error is None
    assert result.duration_ms == pytest.approx(100.0), "2400 samples at 24 kHz"
    assert result.storage == REF and result.captions == stored.captions
    assert result.expires_at == stored.expires_at
    assert result.words is not None and len(result.words) == 3
    assert result.marks == [MarkTiming(name="m", time_ms=10.0)]
    assert result.first_audio_ms == pytest.approx(250.0)
    assert result.spoken_ms is None and result.words_spoken is None


def test_too_many_words_stay_out_of_the_result() -> None:
    req = _assembled(words=_words(MAX_INLINE_WORDS + 1))
    assert build_result(req.ctx, req, completed_at=NOW).words is None, "the caption files carry them"


def test_a_cancelled_result_says_what_was_spoken() -> None:
    req = _assembled(samples=24000, words=_words(10), cancelled=True, played_ms=350.0)
    result = build_result(req.ctx, req, completed_at=NOW)
    assert result.status == "cancelled"
    assert result.spoken_ms == 350.0, "the reported playback position, within the audio"
    assert [w.start_ms for w in result.words_spoken or []] == [0, 100, 200, 300]
    unplayed = _assembled(samples=2400, cancelled=True, played_ms=10_000.0)
    assert build_result(unplayed.ctx, unplayed, completed_at=NOW).spoken_ms == 100.0, "never past the audio"


def test_a_storage_failure_keeps_the_audio_facts_but_no_words_or_files() -> None:
    req = _assembled(words=_words(3), marks=[MarkTiming(name="m", time_ms=1.0)], cancelled=True)
    result = build_result(req.ctx, req, completed_at=NOW, error="object storage failed 8 times")
    assert result.status == "failed" and result.error == "object storage failed 8 times"
    assert result.storage is None and result.captions is None and result.expires_at is None
    assert result.words is None and result.marks is None and result.spoken_ms is None
    assert result.chunks == 2 and result.first_audio_ms == pytest.approx(250.0)


def test_a_stale_request_fails_without_audio() -> None:
    ctx = RequestContext.of(request(tenant="acme"))
    result = build_result(ctx, None, completed_at=NOW, error=incomplete_error(list(range(30)), 300.0))
    assert result.status == "failed" and result.chunks == 0 and result.duration_ms == 0
    assert result.sample_rate == ctx.sample_rate
    assert result.error == f"incomplete: no audio for segments {list(range(20))} after 300 s"
    with pytest.raises(ValueError, match="only have failed"):
        build_result(ctx, None, completed_at=NOW)
