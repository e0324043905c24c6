"""The intelligibility check, small: five sentences through the raw model, the speech core and
the real pipeline (Kafka), transcribed back by offline Whisper. The full 42-sentence run is
`streamtts eval` (README, Speech quality)."""

from __future__ import annotations

import asyncio

import pytest

from streamtts.bench.asr import WhisperASR
from streamtts.bench.speech_eval import (
    load_sentences,
    render_pipeline,
    render_raw,
    summarize,
    transcribe,
)
from streamtts.bench.speech_scoring import fold
from streamtts.runtime.settings import KafkaSettings

pytestmark = [pytest.mark.integration, pytest.mark.model]

SMOKE = ("zh02", "en02", "mx01", "mx04", "ja01")


async def test_pipeline_speech_is_as_intelligible_as_the_raw_model(
    running_pipeline, kafka_settings: KafkaSettings, speech_renderer
) -> None:
    sentences = [s for s in load_sentences() if s.id in SMOKE]
    assert len(sentences) == len(SMOKE)
    registry = speech_renderer.synth.registry
    quiet = lambda _m: None  # noqa: E731
    pipeline = await render_pipeline(kafka_settings, sentences, timeout_s=300, progress=quiet)
    renderings = await asyncio.to_thread(render_raw, registry, sentences, quiet)
    renderings += pipeline
    await asyncio.to_thread(transcribe, WhisperASR(), renderings, quiet)

    overall = {row.lang: row for row in summarize(renderings)}["all"]
    detail = [(r.system, r.sentence.id, r.transcript) for r in renderings if r.score.edits]
    # Five sentences are a smoke test: one misheard word moves the rate by ~0.03, so the
    # margin is wide; the speaker switch this guards against cost 0.3 (see README).
    assert overall.rate["pipeline"] <= overall.rate["raw"] + 0.10, detail
    assert overall.rate["pipeline"] <= 0.30, detail
    # The verification code comes back as its digits, and the English words of the mixed
    # sentence are heard.
    by = {(r.system, r.sentence.id): r for r in renderings}
    assert "382915" in "".join(fold(by["pipeline", "en02"].transcript, "en"))
    mixed = "".join(fold(by["pipeline", "mx01"].transcript, "mixed"))
    assert "app" in mixed or "account" in mixed, by["pipeline", "mx01"].transcript
    # The limiter keeps the pipeline's output off full scale (raw Kokoro exceeds ±1).
    assert overall.clipping["pipeline"] < 0.0005
