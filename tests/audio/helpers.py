"""Audio checks shared by the speech tests."""

from __future__ import annotations

from itertools import pairwise

import numpy as np


def rms(x: np.ndarray) -> float:
    return float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))) if x.size else 0.0


def longest_pinned_run(x: np.ndarray, level: float = 0.999) -> int:
    """Longest run of consecutive samples at (or beyond) full scale: the mark of clipping."""
    pinned = np.abs(x) >= level
    best = run = 0
    for p in pinned:
        run = run + 1 if p else 0
        best = max(best, run)
    return best


def assert_clean_speech(x: np.ndarray) -> None:
    """Non-silent, within [-1, 1], and not clipped."""
    assert x.dtype == np.float32
    assert rms(x) > 0.02, f"audio is (nearly) silent: rms={rms(x):.4f}"
    assert float(np.max(np.abs(x))) <= 1.0
    assert longest_pinned_run(x) < 3


def boundary_jumps(chunks: list[np.ndarray]) -> tuple[np.ndarray, float]:
    """Sample-to-sample jumps across chunk boundaries, and the 99.9th percentile of the jumps
    inside the chunks. A click shows up as a boundary jump far above what speech itself does."""
    inside = np.concatenate([np.abs(np.diff(c)) for c in chunks if len(c) > 1])
    jumps = np.array([abs(float(b[0]) - float(a[-1])) for a, b in pairwise(chunks)])
    return jumps, float(np.percentile(inside, 99.9))
