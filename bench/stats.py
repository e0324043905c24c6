"""Latency statistics: percentiles, summaries and throughput of a set of request records."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass
class RequestRecord:
    """One request as the bench saw it. Times are `time.monotonic()` seconds in the bench process."""

    request_id: str
    chars: int
    lang: str
    kind: str
    sent_at: float
    first_chunk_at: float | None = None
    audio_done_at: float | None = None
    result_at: float | None = None
    audio_s: float = 0.0
    degraded: int = 0
    """Spans that were not rendered as asked (fallback voice, please-wait clip, open breaker)."""
    failed: bool = False
    """The pipeline reported the request as failed (or it was dead-lettered)."""
    spans: int = 0
    """Segments delivered (first part of each)."""
    cache_hits: int = 0
    """Segments served by the render cache."""
    first_cached: bool = False
    first_left_s: float | None = None
    """Request created → its first chunk encoded (leaving the pipeline), by the stages' clocks."""
    traced: bool | None = None
    """Sent marked sampled (True) or not (False); None: as the producer's ratio decided."""

    @property
    def completed_at(self) -> float | None:
        """Fully delivered: every chunk at the subscriber *and* the completion result published."""
        if self.audio_done_at is None or self.result_at is None or self.failed:
            return None
        return max(self.audio_done_at, self.result_at)

    @property
    def ttfa_s(self) -> float | None:
        return None if self.first_chunk_at is None else self.first_chunk_at - self.sent_at

    @property
    def completion_s(self) -> float | None:
        done = self.completed_at
        return None if done is None else done - self.sent_at


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0–100) with linear interpolation between closest ranks (numpy's
    default), so small samples give stable, comparable numbers. NaN for no values."""
    if not values:
        return math.nan
    if not 0 <= q <= 100:
        raise ValueError(f"percentile must be in [0, 100], got {q}")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    lo = math.floor(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def rounded_percentile(values: Sequence[float], q: float, digits: int = 1) -> float | None:
    """`percentile` rounded to `digits` for a report row; None for no values."""
    return round(percentile(values, q), digits) if values else None


@dataclass(frozen=True)
class Dist:
    """P50/P95/P99/max of one latency, in seconds."""

    n: int
    p50: float
    p95: float
    p99: float
    max: float
    mean: float

    @classmethod
    def of(cls, values: Iterable[float]) -> Dist:
        vals = [v for v in values if v is not None and not math.isnan(v)]
        if not vals:
            return cls(0, math.nan, math.nan, math.nan, math.nan, math.nan)
        return cls(
            n=len(vals),
            p50=percentile(vals, 50),
            p95=percentile(vals, 95),
            p99=percentile(vals, 99),
            max=max(vals),
            mean=sum(vals) / len(vals),
        )


@dataclass
class Summary:
    """What a load run is judged by."""

    sent: int
    completed: int
    lost: int
    """Sent but not fully delivered by the deadline, or reported failed."""
    degraded: int
    """Requests with at least one degraded span."""
    ttfa: Dist
    completion: Dist
    wall_s: float
    """First send → last completion."""
    throughput_rps: float
    audio_s: float
    audio_per_wall: float
    """Audio seconds produced per wall-clock second (real-time factor of the whole system)."""
    extra: dict[str, Any] = field(default_factory=dict)


def summarize(records: Sequence[RequestRecord], wall_s: float | None = None) -> Summary:
    """`wall_s` overrides first send → last completion (e.g. pooled sequential passes)."""
    done = [r for r in records if r.completed_at is not None]
    if wall_s is not None:
        wall = wall_s
    elif records and done:
        start = min(r.sent_at for r in records)
        end = max(r.completed_at for r in done if r.completed_at is not None)
        wall = max(end - start, 1e-9)
    else:
        wall = 0.0
    audio = sum(r.audio_s for r in done)
    return Summary(
        sent=len(records),
        completed=len(done),
        lost=len(records) - len(done),
        degraded=sum(1 for r in records if r.degraded),
        ttfa=Dist.of(r.ttfa_s for r in records if r.ttfa_s is not None),
        completion=Dist.of(r.completion_s for r in done if r.completion_s is not None),
        wall_s=wall,
        throughput_rps=len(done) / wall if wall else 0.0,
        audio_s=audio,
        audio_per_wall=audio / wall if wall else 0.0,
    )


def ratio(a: float, b: float) -> float:
    return a / b if b else math.nan
