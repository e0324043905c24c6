"""Post-processing on synthetic signals (no model)."""

from __future__ import annotations

import numpy as np

from streamtts.audio import effects
from streamtts.audio.pcm import resample
from streamtts.processors.synthesize.engine import AudioChunk
from tests.audio.helpers import boundary_jumps, longest_pinned_run

SR = 24_000


def tone(freq: float, seconds: float, amp: float, sr: int = SR) -> np.ndarray:
    t = np.arange(int(seconds * sr)) / sr
    return (amp * np.sin(2 * np.pi * freq * t)).astype(np.float32)


def test_limiter_keeps_ceiling_without_flat_tops() -> None:
    x = tone(220, 0.5, 1.4)
    y = effects.limit_peaks(x, SR, ceiling=0.95)
    assert np.max(np.abs(y)) <= 0.95 + 1e-6
    assert longest_pinned_run(y, 0.95 - 1e-4) < 3  # gain-shaped, not clipped
    quiet = tone(220, 0.1, 0.5)
    assert np.array_equal(effects.limit_peaks(quiet, SR), quiet)  # below ceiling: untouched


def test_resample_rate_and_band_limit() -> None:
    x = tone(1000, 1.0, 0.5)
    y = resample(x, SR, 22_050)
    assert abs(len(y) - 22_050) <= 1
    spectrum = np.abs(np.fft.rfft(y))
    assert abs(np.argmax(spectrum) * 22_050 / len(y) - 1000) < 2  # same pitch


def test_fades_remove_boundary_clicks() -> None:
    # Chunks cut mid-waveform click at their joins; after fades they do not.
    x = tone(300, 0.6, 0.8)
    raw = [x[:4020], x[4020:9020], x[9020:]]  # cuts at waveform peaks
    jumps, inside = boundary_jumps(raw)
    shifted = [raw[0], -raw[1], raw[2]]  # phase flip: a real discontinuity
    jumps, inside = boundary_jumps(shifted)
    assert jumps.max() > inside + 0.05  # the metric sees clicks...
    faded = [effects.apply_fades(c, SR) for c in shifted]
    jumps, inside = boundary_jumps(faded)
    assert jumps.max() <= inside + 0.01  # ...and fades remove them


def test_trim_silence_and_int16() -> None:
    x = np.concatenate([np.zeros(SR), tone(200, 0.2, 0.5), np.zeros(SR)])
    y = effects.trim_silence(x, SR, pad_ms=40)
    assert 0.2 <= len(y) / SR <= 0.3
    chunk = AudioChunk(np.array([0.0, 1.5, -2.0, 0.5], np.float32), SR)
    assert chunk.int16.tolist() == [0, 32767, -32767, 16384]
    assert chunk.int16 is chunk.int16  # cached
