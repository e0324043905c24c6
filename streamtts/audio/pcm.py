"""PCM sample helpers: the one int16 conversion and the one resampler of the project."""

from __future__ import annotations

from math import gcd

import numpy as np


def as_float32(samples: np.ndarray) -> np.ndarray:
    """Mono float32 in [-1, 1]; int16 input is scaled by 1/32768 (the inverse of decoding)."""
    arr = np.asarray(samples).reshape(-1)
    if arr.dtype == np.int16:
        return (arr.astype(np.float32) / 32768.0).astype(np.float32)
    return np.clip(arr.astype(np.float32), -1.0, 1.0)


def to_int16(samples: np.ndarray) -> np.ndarray:
    """Mono int16 PCM; float input in [-1, 1] is clipped and scaled by 32767, int16 passes bit-exact."""
    arr = np.asarray(samples).reshape(-1)
    if arr.dtype == np.int16:
        return arr
    return (np.clip(arr.astype(np.float32), -1.0, 1.0) * 32767.0).round().astype(np.int16)


def resample(samples: np.ndarray, rate_in: int, rate_out: int) -> np.ndarray:
    """Polyphase resampling (anti-aliasing FIR, scipy.signal.resample_poly), float32 out."""
    if rate_in == rate_out or samples.size == 0:
        return samples
    from scipy.signal import resample_poly

    g = gcd(rate_in, rate_out)
    return resample_poly(samples, rate_out // g, rate_in // g).astype(np.float32)
