"""Predicted compute of a span, per engine, fitted online from the runs a worker measures.

The scheduler needs to know, before a span runs, how long it will hold a lane: to tell a
first span how long it would wait, to decide whether stopping a bulk run pays, and to report
the queue delay that admission checks. A span's compute is close to linear in its phoneme
count (the models' cost is per token), with a per-call intercept:

    ms ≈ a[engine] + b[engine] × phonemes

fitted by least squares over the engine's recent runs (exponential forgetting, so a worker
whose node gets busier adapts within a few dozen spans). Before G2P the phoneme count is not
known yet; it is predicted from the text with the engine's measured phonemes per character.
Seeded with priors of this machine class, so the first spans are scheduled sensibly.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

FORGET = 0.97
"""Weight an observation keeps per later one: ~33 runs of memory."""


@dataclass(frozen=True)
class Prior:
    intercept_ms: float
    ms_per_phoneme: float
    phonemes_per_char: float


PRIORS: dict[str, Prior] = {
    # Measured on a 2-core node, one intra-op thread per run (docs/performance.md).
    "kokoro": Prior(60.0, 9.0, 1.0),
    "piper": Prior(15.0, 1.2, 1.0),
    "formant": Prior(5.0, 0.2, 1.0),
}
"""Keyed by engine family: the part of the registry's engine key before ':'."""

DEFAULT_PRIOR = Prior(60.0, 9.0, 1.0)


def family(engine: str) -> str:
    """ "piper:en_joe" → "piper": one model per voice, the same cost curve."""
    return engine.split(":", 1)[0]


@dataclass
class _Fit:
    """Decayed sums of (x, y) for a weighted least-squares line, and the char ratio."""

    prior: Prior
    w: float = 0.0
    sx: float = 0.0
    sy: float = 0.0
    sxx: float = 0.0
    sxy: float = 0.0
    chars: float = 0.0
    phonemes: float = 0.0
    runs: int = 0

    def seed(self) -> None:
        # Two pseudo-runs on the prior's line, light enough that real runs outweigh them soon.
        for x in (20.0, 200.0):
            self.add(x, self.prior.intercept_ms + self.prior.ms_per_phoneme * x, weight=0.5)
        self.chars, self.phonemes = 1.0, self.prior.phonemes_per_char
        self.runs = 0

    def add(self, x: float, y: float, weight: float = 1.0) -> None:
        f = FORGET
        self.w = self.w * f + weight
        self.sx = self.sx * f + weight * x
        self.sy = self.sy * f + weight * y
        self.sxx = self.sxx * f + weight * x * x
        self.sxy = self.sxy * f + weight * x * y

    def line(self) -> tuple[float, float]:
        """(intercept, slope); the slope alone through the mean when the x's barely vary."""
        mx, my = self.sx / self.w, self.sy / self.w
        var = self.sxx / self.w - mx * mx
        if var <= 1e-6 * max(1.0, mx * mx):
            return 0.0, my / mx if mx > 0 else self.prior.ms_per_phoneme
        slope = (self.sxy / self.w - mx * my) / var
        if slope <= 0:  # noise on a narrow range: the mean cost per phoneme is safer
            return 0.0, my / mx if mx > 0 else self.prior.ms_per_phoneme
        return max(0.0, my - slope * mx), slope


@dataclass
class CostModel:
    """Thread-safe: lanes record runs from their threads, the loop predicts."""

    _fits: dict[str, _Fit] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def _fit(self, engine: str) -> _Fit:
        fam = family(engine)
        fit = self._fits.get(fam)
        if fit is None:
            fit = self._fits[fam] = _Fit(PRIORS.get(fam, DEFAULT_PRIOR))
            fit.seed()
        return fit

    def predict_ms(self, engine: str, *, chars: int = 0, phonemes: int | None = None) -> float:
        """Predicted compute of one span: from its phonemes when known, else its text."""
        with self._lock:
            fit = self._fit(engine)
            a, b = fit.line()
            x = phonemes if phonemes is not None else chars * (fit.phonemes / max(fit.chars, 1e-9))
            return a + b * max(0.0, x)

    def observe(self, engine: str, *, chars: int, phonemes: int, ms: float) -> None:
        """A finished run: its measured compute (not its wait) and sizes."""
        if phonemes <= 0 or ms <= 0:
            return
        with self._lock:
            fit = self._fit(engine)
            fit.add(float(phonemes), ms)
            if chars > 0:
                fit.chars = fit.chars * FORGET + chars
                fit.phonemes = fit.phonemes * FORGET + phonemes
            fit.runs += 1

    def snapshot(self) -> dict[str, dict[str, float]]:
        """Per engine family: the current line and ratio (metrics, logs, load reports), every
        family with a prior included before its first run (admission needs a line to predict)."""
        with self._lock:
            for fam in PRIORS:
                self._fit(fam)
            out: dict[str, dict[str, float]] = {}
            for fam, fit in self._fits.items():
                a, b = fit.line()
                out[fam] = {
                    "intercept_ms": round(a, 2),
                    "ms_per_phoneme": round(b, 3),
                    "phonemes_per_char": round(fit.phonemes / max(fit.chars, 1e-9), 3),
                    "runs": fit.runs,
                }
            return out
