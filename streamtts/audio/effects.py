"""Stateless audio post-processing: each function maps one float32 array to a new one."""

from __future__ import annotations

import numpy as np


def trim_silence(
    samples: np.ndarray, sample_rate: int, *, threshold: float = 0.01, pad_ms: float = 40.0
) -> np.ndarray:
    """Cut leading/trailing silence, keeping `pad_ms` around the first/last sample above
    `threshold` (Kokoro adds ~0.2–0.4 s of its own; our pauses are added explicitly)."""
    start, end = speech_range(samples, sample_rate, threshold=threshold, pad_ms=pad_ms)
    return samples[start:end]


def speech_range(
    samples: np.ndarray, sample_rate: int, *, threshold: float = 0.01, pad_ms: float = 40.0
) -> tuple[int, int]:
    """The [start, end) that `trim_silence` keeps (timestamps shift by `start`)."""
    loud = loud_range(samples, threshold=threshold)
    if loud is None:
        return 0, 0
    pad = int(pad_ms * sample_rate / 1000)
    return max(0, loud[0] - pad), min(len(samples), loud[1] + pad)


def loud_range(samples: np.ndarray, *, threshold: float = 0.01) -> tuple[int, int] | None:
    """[first, last + 1) of the samples above `threshold`; None when there are none."""
    loud = np.flatnonzero(np.abs(samples) > threshold)
    if loud.size == 0:
        return None
    return int(loud[0]), int(loud[-1]) + 1


def limit_peaks(
    samples: np.ndarray, sample_rate: int, *, ceiling: float = 0.95, window_ms: float = 5.0
) -> np.ndarray:
    """Look-ahead peak limiter: smooth gain reduction around peaks above `ceiling`.

    The gain curve is min(1, ceiling/|x|), spread by a minimum filter over ±window and then
    smoothed by a moving average of half that width; the average of values that are all ≤ the
    gain a peak needs is itself ≤ that gain, so every sample ends ≤ ceiling (a final clip only
    guards float rounding). No flat-topped clipping, no hard edges.
    """
    peak = float(np.max(np.abs(samples))) if samples.size else 0.0
    if peak <= ceiling:
        return samples
    from scipy.ndimage import minimum_filter1d, uniform_filter1d

    half = max(1, int(window_ms * sample_rate / 1000))
    with np.errstate(divide="ignore"):
        gain = np.minimum(1.0, ceiling / np.maximum(np.abs(samples), 1e-9))
    gain = minimum_filter1d(gain, size=2 * half + 1, mode="nearest")
    gain = uniform_filter1d(gain, size=half | 1, mode="nearest")
    return np.clip(samples * gain, -ceiling, ceiling).astype(np.float32)


def normalize_loudness(
    samples: np.ndarray, *, target_dbfs: float = -20.0, max_gain_db: float = 12.0
) -> np.ndarray:
    """Scale to a target RMS level (gain capped, so near-silence is not blown up)."""
    rms = float(np.sqrt(np.mean(np.square(samples, dtype=np.float64)))) if samples.size else 0.0
    if rms < 1e-6:
        return samples
    gain_db = min(max_gain_db, target_dbfs - 20.0 * np.log10(rms))
    return (samples * np.float32(10.0 ** (gain_db / 20.0))).astype(np.float32)


def apply_fades(samples: np.ndarray, sample_rate: int, *, fade_ms: float = 5.0) -> np.ndarray:
    """Raised-cosine fade-in/out at both edges so chunks start and end at zero (no clicks)."""
    n = min(int(fade_ms * sample_rate / 1000), len(samples) // 2)
    if n <= 0:
        return samples
    out = samples.astype(np.float32, copy=True)
    ramp = (0.5 - 0.5 * np.cos(np.linspace(0.0, np.pi, n, dtype=np.float64))).astype(np.float32)
    out[:n] *= ramp
    out[-n:] *= ramp[::-1]
    return out


def append_silence(samples: np.ndarray, sample_rate: int, ms: float) -> np.ndarray:
    """`samples` followed by `ms` milliseconds of zeros."""
    n = int(ms * sample_rate / 1000)
    if n <= 0:
        return samples
    return np.concatenate([samples, np.zeros(n, dtype=np.float32)])
