"""G.711 companding (ITU-T G.711): 16-bit linear PCM ↔ 8-bit μ-law / A-law (pure numpy).

Telephony carries speech as 8-bit G.711 at 8 kHz: μ-law in North America and Japan, A-law
elsewhere. The decoders are the standard 256-entry tables (as in Sun's g711.c and FFmpeg);
the encoders pick the nearest decoded level, so decode(encode(x)) is the closest G.711 value
to x and every code round-trips.
"""

from __future__ import annotations

import numpy as np

TELEPHONY_RATE = 8000
"""Telephony speech is 8 kHz: the default rate of G.711 output (raw, or inside a WAV)."""
_MULAW_BIAS = 0x84


def _mulaw_table() -> np.ndarray:
    u = ~np.arange(256, dtype=np.int32) & 0xFF
    t = (((u & 0x0F) << 3) + _MULAW_BIAS) << ((u & 0x70) >> 4)
    return np.where(u & 0x80, _MULAW_BIAS - t, t - _MULAW_BIAS).astype(np.int16)


def _alaw_table() -> np.ndarray:
    a = np.arange(256, dtype=np.int32) ^ 0x55
    t = (a & 0x0F) << 4
    seg = (a & 0x70) >> 4
    t = np.where(seg == 0, t + 8, np.where(seg == 1, t + 0x108, (t + 0x108) << np.maximum(seg - 1, 0)))
    return np.where(a & 0x80, t, -t).astype(np.int16)


MULAW_TO_LINEAR = _mulaw_table()
ALAW_TO_LINEAR = _alaw_table()


class _NearestCode:
    """Linear → the code whose decoded level is nearest (rounding, where the reference
    encoder truncates within a step: ½ step less error, and exactly what FFmpeg writes)."""

    def __init__(self, table: np.ndarray) -> None:
        order = np.argsort(table, kind="stable")
        levels = table[order].astype(np.float64)
        self._codes = order.astype(np.uint8)
        self._cuts = (levels[:-1] + levels[1:]) / 2

    def __call__(self, pcm: np.ndarray) -> bytes:
        x = np.asarray(pcm, dtype=np.float64).reshape(-1)
        return self._codes[np.searchsorted(self._cuts, x, side="left")].tobytes()


_TO_MULAW = _NearestCode(MULAW_TO_LINEAR)
_TO_ALAW = _NearestCode(ALAW_TO_LINEAR)


def linear_to_mulaw(pcm: np.ndarray) -> bytes:
    """int16 samples → μ-law bytes."""
    return _TO_MULAW(pcm)


def linear_to_alaw(pcm: np.ndarray) -> bytes:
    """int16 samples → A-law bytes."""
    return _TO_ALAW(pcm)


def mulaw_to_linear(data: bytes) -> np.ndarray:
    """μ-law bytes → int16 samples."""
    return MULAW_TO_LINEAR[np.frombuffer(data, dtype=np.uint8)]


def alaw_to_linear(data: bytes) -> np.ndarray:
    """A-law bytes → int16 samples."""
    return ALAW_TO_LINEAR[np.frombuffer(data, dtype=np.uint8)]
