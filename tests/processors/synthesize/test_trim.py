"""Trimming an engine's silence keeps the quiet end of speech: the release of a final stop
("app", "Submit" at a sentence end) sits below the loudness threshold, ~100 ms after the
vowel. Cut with a 40 ms tail, Whisper heard "app" as "R" and "Submit" as "Subman"."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from streamtts.processors.synthesize.engine import AudioChunk, VoiceSpec
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.synthesizer import ResolvedVoice, Synthesizer

RATE = 24_000


def _ms(n: float) -> int:
    return int(n * RATE / 1000)


def _word_with_a_final_stop() -> tuple[np.ndarray, np.ndarray]:
    """100 ms of silence, a 300 ms vowel at 0.3, a 110 ms closure (silence), a 30 ms release
    burst at 0.006 (below the 0.01 threshold), then 400 ms of the engine's silence."""
    t = np.arange(_ms(300)) / RATE
    vowel = (0.3 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    rng = np.random.default_rng(7)
    burst = (0.006 * rng.uniform(-1, 1, _ms(30))).astype(np.float32)
    z = np.zeros
    samples = np.concatenate([z(_ms(100)), vowel, z(_ms(110)), burst, z(_ms(400))]).astype(np.float32)
    burst_at = np.arange(_ms(510), _ms(540))
    return samples, burst_at


@dataclass
class _OneChunkEngine:
    samples: np.ndarray
    name: str = "fake"
    model_id: str = "fake"
    sample_rate: int = RATE

    def synthesize_phonemes(
        self, phonemes: str, voice: VoiceSpec, speed: float = 1.0
    ) -> Iterator[AudioChunk]:
        n = len(self.samples)
        yield AudioChunk(self.samples, RATE, phonemes, bounds=np.array([[0, _ms(400)], [_ms(400), n]]))


def _render(samples: np.ndarray, pause_ms: float) -> AudioChunk:
    engine = _OneChunkEngine(samples)
    voice = ResolvedVoice(VoiceSpec("v", "fake", frozenset({"en"}), RATE, 1.0, None), engine, False)  # type: ignore[arg-type]
    synth = Synthesizer(VoiceRegistry(threads=1))
    [chunk] = synth.render_phonemes("æp", voice, 1.0, RATE, pause_after_ms=pause_ms)
    return chunk


def test_the_release_of_a_final_stop_is_kept_and_the_pause_is_unchanged() -> None:
    samples, burst_at = _word_with_a_final_stop()
    out = _render(samples, pause_ms=200)
    start = _ms(100) - _ms(40)  # the lead kept before the vowel
    kept = out.samples[burst_at - start]
    # The burst is there (a fade may shape its edge, nothing more).
    assert float(np.sqrt(np.mean(kept**2))) > 0.5 * float(np.sqrt(np.mean(samples[burst_at] ** 2)))
    # The span lasts as long as before: the 40 ms after the vowel, then the 200 ms pause; the
    # decay kept beyond it came off the pause.
    vowel_end = _ms(400)
    assert abs(len(out.samples) - ((vowel_end + _ms(40) - start) + _ms(200))) <= 2  # the sine's last samples
    # The word ends where the speech did, not inside the kept decay.
    assert out.bounds is not None and int(out.bounds.max()) <= vowel_end + _ms(40) - start


def test_a_pause_shorter_than_the_kept_decay_is_not_negative() -> None:
    samples, burst_at = _word_with_a_final_stop()
    out = _render(samples, pause_ms=0)
    start = _ms(100) - _ms(40)
    # Nothing is appended; the decay is kept whole (150 ms after the vowel's last loud sample).
    assert abs(len(out.samples) - (_ms(400) + _ms(150) - start)) <= 2
    assert float(np.abs(out.samples[burst_at - start]).max()) > 0.003
