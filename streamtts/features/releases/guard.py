"""The release guard's judgement (pure): is the candidate doing worse than stable?

Fed one `Outcome` per completed request of either lane (and canary runs), it compares the
most recent `limits.window` outcomes of each lane once both have `limits.min_samples`:

1. failed-request rate:   candidate > stable + max_error_rate_increase
2. degraded-request rate: candidate > stable + max_degraded_rate_increase
3. first audio:           candidate > stable × max_first_audio_p99_ratio + first_audio_slack_ms,
                          on the P99 once the candidate has `P99_SAMPLES` latencies, on the
                          median before (with 20 samples the P99 is just the slowest one)
4. canary:                the candidate's canary failed (judged without a sample minimum)

A rate is judged by its 95 % Wilson lower bound, not the raw ratio: 1 failure in 20 (5 %) is
well within chance of a 0 % lane, 10 in 20 is not. The first breach found is the verdict; it
names the limit and the numbers behind it.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

from streamtts.schemas import GuardLimits


@dataclass(frozen=True)
class Outcome:
    """One completed request as the guard sees it."""

    release: str
    failed: bool
    degraded: bool
    first_audio_ms: float | None


@dataclass(frozen=True)
class Breach:
    reason: str
    """Machine-friendly: error_rate, degraded_rate, first_audio_p99, canary (a metric label)."""
    detail: str
    """The numbers, for the rollback record and the log line."""


@dataclass(frozen=True)
class LaneStats:
    samples: int
    error_rate: float
    degraded_rate: float
    first_audio_p99_ms: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "samples": self.samples,
            "error_rate": round(self.error_rate, 4),
            "degraded_rate": round(self.degraded_rate, 4),
            "first_audio_p99_ms": round(self.first_audio_p99_ms, 1)
            if self.first_audio_p99_ms is not None
            else None,
        }


P99_SAMPLES = 100
"""Latencies before the P99 is judged (below it, the median is)."""
_Z = 1.96  # 95 % two-sided


def wilson_lower(failures: int, n: int) -> float:
    """95 % Wilson score lower bound of a rate of `failures` in `n`."""
    if n == 0:
        return 0.0
    p = failures / n
    centre = p + _Z * _Z / (2 * n)
    spread = _Z * math.sqrt(p * (1 - p) / n + _Z * _Z / (4 * n * n))
    return max(0.0, (centre - spread) / (1 + _Z * _Z / n))


def quantile(values: list[float], q: float) -> float | None:
    """Nearest-rank quantile."""
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def p99(values: list[float]) -> float | None:
    """Nearest-rank 99th percentile (no interpolation: with few samples it is the worst one)."""
    return quantile(values, 0.99)


class ReleaseGuard:
    """Outcome windows of one stable/candidate pair under one set of limits."""

    def __init__(self, stable: str, candidate: str, limits: GuardLimits) -> None:
        self.stable = stable
        self.candidate = candidate
        self.limits = limits
        self._windows: dict[str, deque[Outcome]] = {
            stable: deque(maxlen=limits.window),
            candidate: deque(maxlen=limits.window),
        }
        self._canary_failure: str | None = None

    def observe(self, outcome: Outcome) -> None:
        window = self._windows.get(outcome.release)
        if window is not None:  # a third lane (still draining) is not part of this comparison
            window.append(outcome)

    def canary(self, release: str, ok: bool, why: str = "") -> None:
        if release == self.candidate and not ok:
            self._canary_failure = why or "canary failed"

    def stats(self, release: str) -> LaneStats:
        window = list(self._windows.get(release, ()))
        n = len(window)
        latencies = [o.first_audio_ms for o in window if o.first_audio_ms is not None and not o.failed]
        return LaneStats(
            samples=n,
            error_rate=sum(o.failed for o in window) / n if n else 0.0,
            degraded_rate=sum(o.degraded for o in window) / n if n else 0.0,
            first_audio_p99_ms=p99(latencies),
        )

    def verdict(self) -> Breach | None:
        """The first limit the candidate breaches, or None (also None until enough samples)."""
        lim = self.limits
        if lim.canary and self._canary_failure is not None:
            return Breach("canary", f"candidate canary: {self._canary_failure}")
        cand, base = self.stats(self.candidate), self.stats(self.stable)
        if cand.samples < lim.min_samples or base.samples < lim.min_samples:
            return None
        counts = f"(n={cand.samples} vs {base.samples})"
        failed = sum(o.failed for o in self._windows[self.candidate])
        degraded = sum(o.degraded for o in self._windows[self.candidate])
        if wilson_lower(failed, cand.samples) > base.error_rate + lim.max_error_rate_increase:
            return Breach(
                "error_rate",
                f"failed {cand.error_rate:.1%} vs stable {base.error_rate:.1%} "
                f"+ {lim.max_error_rate_increase:.1%} allowed {counts}",
            )
        if wilson_lower(degraded, cand.samples) > base.degraded_rate + lim.max_degraded_rate_increase:
            return Breach(
                "degraded_rate",
                f"degraded {cand.degraded_rate:.1%} vs stable {base.degraded_rate:.1%} "
                f"+ {lim.max_degraded_rate_increase:.1%} allowed {counts}",
            )
        ours, theirs = self._latencies(self.candidate), self._latencies(self.stable)
        q, name = (0.99, "P99") if len(ours) >= P99_SAMPLES else (0.5, "median")
        mine, base_q = quantile(ours, q), quantile(theirs, q)
        if mine is not None and base_q is not None:
            bound = base_q * lim.max_first_audio_p99_ratio + lim.first_audio_slack_ms
            if mine > bound:
                return Breach(
                    "first_audio_p99" if name == "P99" else "first_audio_median",
                    f"{name} first audio {mine:.0f} ms vs stable {base_q:.0f} ms × "
                    f"{lim.max_first_audio_p99_ratio:g} + {lim.first_audio_slack_ms:.0f} ms allowed {counts}",
                )
        return None

    def _latencies(self, release: str) -> list[float]:
        return [
            o.first_audio_ms
            for o in self._windows.get(release, ())
            if o.first_audio_ms is not None and not o.failed
        ]
