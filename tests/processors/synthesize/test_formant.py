"""espeak-ng's formant voice: real audio in languages no neural voice speaks, and the last
layer when the neural path fails."""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.processors.synthesize.formant import FormantEngine
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.synthesizer import Synthesizer
from streamtts.schemas.languages import BY_TAG, FORMANT_TAGS


@pytest.fixture(scope="module")
def engine() -> FormantEngine:
    return FormantEngine.load()


@pytest.mark.parametrize("tag", sorted(FORMANT_TAGS))
def test_every_formant_language_speaks_its_sample(engine: FormantEngine, tag: str) -> None:
    spec = VoiceRegistry(threads=1).formant_voice()
    chunks = list(engine.synthesize(BY_TAG[tag].sample, tag, spec))
    samples = np.concatenate([c.samples for c in chunks])
    seconds = len(samples) / engine.sample_rate
    rms = float(np.sqrt(np.mean(samples**2)))
    assert 0.8 < seconds < 12.0, f"{tag}: {seconds:.2f} s"
    assert rms > 0.02, f"{tag}: rms {rms:.4f}"
    voiced = np.mean(np.abs(samples) > 0.01)
    assert voiced > 0.3, f"{tag}: mostly silence ({voiced:.2f})"


def test_speed_and_numbers(engine: FormantEngine) -> None:
    spec = VoiceRegistry(threads=1).formant_voice()

    def seconds(text: str, speed: float) -> float:
        return sum(c.duration_s for c in engine.synthesize(text, "pl", spec, speed))

    plain = seconds("Zamówienie zostało wysłane.", 1.0)
    assert seconds("Zamówienie zostało wysłane.", 2.0) < plain * 0.75
    assert seconds("Zamówienie numer 48213 zostało wysłane.", 1.0) > plain + 0.8  # digits read out


def test_the_synthesizer_resamples_formant_audio_to_the_pipeline_rate() -> None:
    synth = Synthesizer(VoiceRegistry(threads=1))
    chunks = list(synth.synthesize_span("Dzień dobry, w czym mogę pomóc?", "pl", None, 1.0, 24_000))
    assert chunks and all(c.sample_rate == 24_000 and c.voice_id == "espeak" for c in chunks)
    assert sum(c.duration_s for c in chunks) > 1.0


def test_formant_spans_have_word_timestamps_from_espeaks_word_events() -> None:
    from datetime import UTC, datetime

    from streamtts.processors.synthesize.renderer import SegmentRenderer
    from streamtts.schemas import RequestContext, Segment, TTSRequest

    text = "Zamówienie numer 48213 zostało wysłane."
    req = TTSRequest.new(text, language="pl", timestamps=True)
    segment = Segment(
        request_id=req.request_id,
        seq=0,
        total=1,
        last=True,
        text=text,
        lang="pl",
        request=RequestContext.of(req),
        segmented_at=datetime.now(UTC),
    )
    out = SegmentRenderer(Synthesizer(VoiceRegistry(threads=1))).render(segment)
    assert out.voice_used == "espeak" and out.words is not None
    said = [text[w.char_start : w.char_end] for w in out.words]
    assert said == ["Zamówienie", "numer", "48213", "zostało", "wysłane"]
    starts = [w.start_ms for w in out.words]
    assert starts == sorted(starts) and starts[0] < 200
    duration_ms = len(out.samples) / out.sample_rate * 1000
    assert all(w.start_ms < w.end_ms <= duration_ms + 1 for w in out.words)
    number = out.words[2]
    assert number.end_ms - number.start_ms > 1000, "the code is read out digit group by group"
