"""Real-model tests: Kokoro (zh, en, ja, mixed, blend) and Piper (en).

Short texts only: one Kokoro call costs ~0.7 s of fixed time on 2 cores.
"""

from __future__ import annotations

import dataclasses
from typing import Unpack

import numpy as np
import pytest

from streamtts.audio.codecs import assemble, decode_audio, encode_chunk
from streamtts.processors.direct import Speech, synthesize_text
from streamtts.processors.segment.exceptions import SegmentationError
from streamtts.processors.segment.normalize import is_speakable_char
from streamtts.processors.synthesize.exceptions import InvalidParameterError, UnknownVoiceError
from streamtts.processors.synthesize.kokoro import (
    MAX_PHONEMES,
    STYLE_MIN_TOKENS,
    KokoroEngine,
    split_phonemes,
)
from streamtts.processors.synthesize.piper import PiperEngine
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.synthesizer import Synthesizer
from tests.audio.helpers import assert_clean_speech, boundary_jumps

pytestmark = pytest.mark.model


def run(synth: Synthesizer, text: str, **speech: Unpack[Speech]) -> tuple[list, np.ndarray, int]:
    pairs = list(synthesize_text(synth, text, **speech))
    rate = pairs[0][1].sample_rate
    assert all(chunk.sample_rate == rate for _, chunk in pairs)
    return pairs, np.concatenate([c.samples for _, c in pairs]), rate


def speakable_count(text: str) -> int:
    return sum(is_speakable_char(c) for c in text)


@pytest.mark.parametrize(
    ("text", "hint", "voice"),
    [
        ("您好，欢迎使用语音合成。", "zh", "jm_kumo"),
        ("今日は良い天気です。", "ja", "jf_alpha"),
    ],
)
def test_cjk_speech_is_clean_and_plausibly_long(
    synthesizer: Synthesizer, text: str, hint: str, voice: str
) -> None:
    pairs, audio, rate = run(synthesizer, text, lang_hint=hint, voice_id=voice)
    assert {span.lang for span, _ in pairs} == {hint}
    assert_clean_speech(audio)
    per_char = len(audio) / rate / speakable_count(text)
    assert 0.04 <= per_char <= 0.5, per_char


def test_english_kokoro_speech(synthesizer: Synthesizer) -> None:
    text = "The quick brown fox jumps over the lazy dog."
    _, audio, rate = run(synthesizer, text, voice_id="jf_gongitsune")
    assert_clean_speech(audio)
    per_word = len(audio) / rate / len(text.split())
    assert 0.15 <= per_word <= 1.0, per_word


def test_mixed_sentence_uses_one_voice_for_all_languages(synthesizer: Synthesizer) -> None:
    pairs, audio, _ = run(synthesizer, "我今天用 Python 写了一个 demo。", voice_id="jm_kumo")
    # One span, one model call: each run phonemized in its language, one utterance.
    assert [span.lang for span, _ in pairs] == ["mixed"]
    assert [r.lang for r in pairs[0][0].runs] == ["zh", "en", "zh", "en"]
    assert {chunk.voice_id for _, chunk in pairs} == {"jm_kumo"}
    assert_clean_speech(audio)


def test_auto_speaks_a_mixed_request_with_one_kokoro_voice(synthesizer: Synthesizer) -> None:
    pairs, audio, rate = run(synthesizer, "Thank you for waiting. 请在App里打开您的account设置。")
    assert {chunk.voice_id for _, chunk in pairs} == {"jm_kumo"}  # English sentence too
    assert rate == 24_000
    assert_clean_speech(audio)


def test_piper_voice_falls_back_to_base_voice_for_chinese(synthesizer: Synthesizer) -> None:
    pairs, audio, rate = run(synthesizer, "Hello world. 你好。", voice_id="en_joe")
    voices = [(span.lang, chunk.voice_id) for span, chunk in pairs]
    assert voices == [("en", "en_joe"), ("zh", "jm_kumo")]
    assert rate == 22_050  # the whole request keeps the first voice's rate
    assert_clean_speech(audio)


def test_piper_engine_direct(registry: VoiceRegistry) -> None:
    spec = registry.spec("en_joe")
    engine = registry.engine(spec)
    phonemes = engine.phonemize("Testing one two three.", "en")
    assert "ˈ" in phonemes and phonemes.endswith(".")
    chunks = list(engine.synthesize("Testing one two three.", "en", spec, 1.0))
    assert len(chunks) == 1 and chunks[0].sample_rate == 22_050
    assert 0.8 <= chunks[0].duration_s <= 4.0
    fast = next(iter(engine.synthesize("Testing one two three.", "en", spec, 1.5)))
    assert fast.duration_s < chunks[0].duration_s


def test_inference_threads_do_not_spin_unless_asked() -> None:
    quiet = PiperEngine.load(threads=2)
    spinning = PiperEngine.load(threads=2, spin=True)
    entry = "session.intra_op.allow_spinning"
    assert quiet.session.get_session_options().get_session_config_entry(entry) == "0"
    assert spinning.session.get_session_options().get_session_config_entry(entry) == "1"


def test_chunk_boundaries_do_not_click(synthesizer: Synthesizer) -> None:
    text = "Good morning. The weather is fine today, isn't it? Let's go outside."
    pairs, _, _ = run(synthesizer, text, voice_id="en_joe")
    chunks = [c.samples for _, c in pairs]
    assert len(chunks) >= 3
    jumps, inside = boundary_jumps(chunks)
    assert jumps.max() <= inside + 0.01, (jumps, inside)
    assert all(abs(c[0]) < 1e-3 and abs(c[-1]) < 1e-3 for c in chunks)


def test_resampled_output_and_encoded_round_trip(synthesizer: Synthesizer) -> None:
    pairs, audio, rate = run(synthesizer, "Hello. This is a test.", voice_id="en_joe", sample_rate=16_000)
    assert rate == 16_000
    assert_clean_speech(audio)
    duration = len(audio) / rate
    mp3_slack = len(pairs) * (1105 + 576) / rate + 0.005  # LAME delay + padding per chunk
    for fmt, slack in (("mp3", mp3_slack), ("opus", 0.005), ("flac", 0.001)):
        payloads = [
            encode_chunk(c.samples, c.sample_rate, fmt, serial=i + 1) for i, (_, c) in enumerate(pairs)
        ]
        decoded, out_rate = decode_audio(assemble(payloads, fmt), fmt)
        assert 0 <= len(decoded) / out_rate - duration <= slack, fmt


def test_blend_voice(synthesizer: Synthesizer, registry: VoiceRegistry) -> None:
    spec = registry.spec("jm_kumo:0.7+jf_gongitsune:0.3")
    kumo, gon = registry.spec("jm_kumo"), registry.spec("jf_gongitsune")
    assert spec.style is not None and kumo.style is not None and gon.style is not None
    np.testing.assert_allclose(spec.style, 0.7 * kumo.style + 0.3 * gon.style, atol=1e-6)
    _, audio, _ = run(synthesizer, "你好。", voice_id="jm_kumo:0.7+jf_gongitsune:0.3")
    assert_clean_speech(audio)


def test_long_phoneme_strings_are_split_not_truncated(registry: VoiceRegistry) -> None:
    spec = registry.spec("jm_kumo")
    engine = registry.engine(spec)
    phonemes = engine.phonemize("这是一个很长的句子，" * 30, "zh")
    assert len(phonemes) > MAX_PHONEMES
    pieces = split_phonemes(phonemes)
    assert all(len(p) <= MAX_PHONEMES for p in pieces)
    assert "".join(pieces).replace(" ", "") == phonemes.replace(" ", "")


def test_user_errors_are_clear(synthesizer: Synthesizer) -> None:
    with pytest.raises(UnknownVoiceError, match="available: en_joe, espeak, jf_alpha"):
        list(synthesize_text(synthesizer, "hello", voice_id="nobody"))
    with pytest.raises(UnknownVoiceError, match="nobody"):
        list(synthesize_text(synthesizer, "hello", voice_id="jm_kumo:0.5+nobody:0.5"))
    with pytest.raises(SegmentationError, match="nothing speakable"):
        list(synthesize_text(synthesizer, "？！…😀"))
    with pytest.raises(SegmentationError, match="empty"):
        list(synthesize_text(synthesizer, ""))
    with pytest.raises(InvalidParameterError, match="speed"):
        list(synthesize_text(synthesizer, "hello", speed=5.0))
    with pytest.raises(InvalidParameterError, match="sample rate"):
        list(synthesize_text(synthesizer, "hello", sample_rate=1000))
    with pytest.raises(TypeError, match="voice"):  # a misspelled option is not ignored
        list(synthesize_text(synthesizer, "hello", voice="en_joe"))  # type: ignore[call-arg]


def test_surrogates_are_spoken_around(synthesizer: Synthesizer) -> None:
    pairs, audio, _ = run(synthesizer, "Hi \ud800there\udfff.", voice_id="en_joe")
    assert [span.text for span, _ in pairs] == ["Hi there."]
    assert_clean_speech(audio)


def test_first_chunk_is_yielded_before_later_spans_are_synthesized(
    synthesizer: Synthesizer, registry: VoiceRegistry
) -> None:
    calls: list[str] = []
    engine = registry.engine(registry.spec("en_joe"))
    original = engine.phonemize

    def spy(text: str, *args: object, **kw: object) -> object:
        calls.append(text)
        return original(text, *args, **kw)  # type: ignore[arg-type]

    engine.phonemize = spy  # type: ignore[method-assign, assignment]
    try:
        stream = synthesize_text(synthesizer, "One. Two. Three.", voice_id="en_joe")
        next(stream)
        assert calls == ["One."], "later spans are not even phonemized before the first is yielded"
    finally:
        del engine.phonemize


def test_a_short_input_speaks_with_the_style_of_a_sentence_length_input(registry: VoiceRegistry) -> None:
    """Kokoro's pack rows for short inputs speak worse (docs/speech-quality.md): a short span,
    such as a streamed first clause, takes the row of STYLE_MIN_TOKENS tokens instead."""
    voice = registry.spec("jm_kumo")
    engine = registry.engine(voice)
    assert isinstance(engine, KokoroEngine) and voice.style is not None
    phonemes = engine.phonemize("请妥善保管。", "zh")
    assert 0 < sum(c in engine.vocab for c in phonemes) < STYLE_MIN_TOKENS

    def samples(style: np.ndarray) -> bytes:
        spoken = dataclasses.replace(voice, style=style)
        return b"".join(
            c.samples.astype(np.float32).tobytes() for c in engine.synthesize_phonemes(phonemes, spoken)
        )

    short_rows_gone = voice.style.copy()
    short_rows_gone[:STYLE_MIN_TOKENS] = 0.0
    floor_row_gone = voice.style.copy()
    floor_row_gone[STYLE_MIN_TOKENS] = 0.0
    reference = samples(voice.style)
    assert samples(short_rows_gone) == reference  # no row of a shorter input is read
    assert samples(floor_row_gone) != reference  # the floor's row is
