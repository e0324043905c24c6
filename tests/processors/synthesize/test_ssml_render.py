"""SSML and lexicon segments through the real model: given phonemes reach the engine, a
prosody rate changes the speed, a voice element changes the voice, marks are timed on the
audio, and the render-cache fast path gives the same marks."""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.synthesize.render_cache import MemoryTier, RenderCache
from streamtts.processors.synthesize.renderer import SegmentRenderer
from streamtts.processors.synthesize.synthesizer import SpeechRun, Synthesizer
from streamtts.schemas import TTSRequest

pytestmark = pytest.mark.model


def _segments(ssml: str, registry, **fields):  # type: ignore[no-untyped-def]
    request = TTSRequest.new(ssml, text_type="ssml", format="pcm", **fields)
    return plan_segments(
        request, limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000), voices=registry
    )


def test_given_phonemes_reach_each_engine_in_its_alphabet(registry) -> None:  # type: ignore[no-untyped-def]
    synth = Synthesizer(registry)
    kokoro, piper = synth.resolve("jm_kumo", {"en"}), synth.resolve("en_joe", {"en"})
    run = SpeechRun("tomato", "en", "təˈmɑːtoʊ")
    assert synth.phonemize(kokoro, [run]) == "təˈmɑtO"  # misaki: oʊ → O, no length marks
    assert synth.phonemize(piper, [run]).replace("ː", "") == "təˈmɑtoʊ"
    assert synth.phonemize(kokoro, [SpeechRun("tomato", "en")]) != synth.phonemize(kokoro, [run])
    # Nothing the engine can say: the G2P reads the text instead of silence.
    assert synth.phonemize(kokoro, [SpeechRun("tomato", "en", "ʘʘ")]) == synth.phonemize(
        kokoro, [SpeechRun("tomato", "en")]
    )


def test_rate_voice_phoneme_and_marks_in_the_audio(speech_renderer: SegmentRenderer, registry) -> None:  # type: ignore[no-untyped-def]
    ssml = (
        '<speak>Thanks for waiting.<mark name="m1"/> <prosody rate="x-slow">Thanks for waiting.</prosody>'
        '<voice name="en_joe">Thanks for waiting.</voice><mark name="end"/></speak>'
    )
    segs = _segments(ssml, registry, voice="jm_kumo")
    assert [s.text.rstrip(".") for s in segs] == ["Thanks for waiting"] * 3
    normal, slow, other = (speech_renderer.render(s) for s in segs)
    assert slow.voice_used == "jm_kumo" and other.voice_used == "en_joe" and other.degradation is None
    speech = lambda r, s: len(r.samples) / r.sample_rate - s.pause_after_ms / 1000  # noqa: E731
    assert speech(slow, segs[1]) > 1.3 * speech(normal, segs[0])  # x-slow: 0.6 × speed
    assert slow.marks == [("m1", pytest.approx(slow.words[0].start_ms, abs=0.1))]  # type: ignore[index]
    end = other.marks[0]  # type: ignore[index]
    assert end[0] == "end" and end[1] == pytest.approx(speech(other, segs[2]) * 1000, abs=1.0)


def test_the_cached_fast_path_keeps_marks(registry) -> None:  # type: ignore[no-untyped-def]
    renderer = SegmentRenderer(Synthesizer(registry, cache=RenderCache(MemoryTier(32 << 20))))
    try:
        ssml = '<speak>Hello <mark name="mid"/>there, friend.</speak>'
        [seg] = _segments(ssml, registry, voice="jm_kumo")
        first = renderer.render(seg)
        again = renderer.look_up(seg).rendered
        assert again is not None and again.cache == "hit"
        assert np.array_equal(again.samples, first.samples)
        assert again.marks == first.marks and first.marks and first.marks[0][0] == "mid"
        assert 0 < first.marks[0][1] < len(first.samples) / first.sample_rate * 1000
    finally:
        renderer.close()
