"""The bench's targets, judged on a result: the pipeline's throughput and added first-audio
time against the in-process baseline, P99 first audio at capacity, and the sustained load."""

from __future__ import annotations

from dataclasses import dataclass

from streamtts.bench.bench_plan import SUSTAIN_RATE, BenchResult
from streamtts.bench.capacity import P99_TTFA_TARGET_S
from streamtts.bench.stats import ratio
from streamtts.bench.tables import ms_cell, s_cell

THROUGHPUT_TARGET = 0.85
ADDED_TTFA_TARGET_S = 0.050


@dataclass(frozen=True)
class Target:
    name: str
    goal: str
    measured: str
    met: bool | None
    """None: not measured in this run."""
    gap: str = ""


def overhead(result: BenchResult, voice: str) -> dict[str, float] | None:
    """Pipeline vs direct on the same texts: throughput ratio and added median TTFA."""
    direct = result.run("direct", voice, "direct")
    c1 = result.run("overhead", voice, "pipeline c=1")
    cn = result.run("overhead", voice, f"pipeline c={result.plan.concurrency}")
    if direct is None or (c1 is None and cn is None):
        return None
    d = direct.summary
    out = {
        "direct_rps": d.throughput_rps,
        "direct_audio_per_wall": d.audio_per_wall,
        "direct_ttfa_p50": d.ttfa.p50,
    }
    if cn:
        out |= {
            "pipeline_rps": cn.summary.throughput_rps,
            "pipeline_audio_per_wall": cn.summary.audio_per_wall,
            "throughput_ratio": ratio(cn.summary.throughput_rps, d.throughput_rps),
            "audio_ratio": ratio(cn.summary.audio_per_wall, d.audio_per_wall),
        }
    if c1:
        out |= {
            "pipeline_ttfa_p50": c1.summary.ttfa.p50,
            "added_ttfa_p50": c1.summary.ttfa.p50 - d.ttfa.p50,
        }
    return out


def targets(result: BenchResult) -> list[Target]:
    voice = result.plan.voices[0]
    o = overhead(result, voice) or {}
    return [
        _throughput(o, voice),
        _added_ttfa(o, voice),
        _at_capacity(result, voice),
        _sustained(result, voice),
    ]


def _throughput(o: dict[str, float], voice: str) -> Target:
    r = o.get("throughput_ratio")
    return Target(
        f"pipeline throughput vs direct ({voice})",
        f"≥ {THROUGHPUT_TARGET:.2f} × direct",
        f"{r:.2f} × ({o['pipeline_rps']:.2f} vs {o['direct_rps']:.2f} req/s)" if r is not None else "-",
        None if r is None else r >= THROUGHPUT_TARGET,
        f"{THROUGHPUT_TARGET - r:.2f} × short" if r is not None and r < THROUGHPUT_TARGET else "",
    )


def _added_ttfa(o: dict[str, float], voice: str) -> Target:
    a = o.get("added_ttfa_p50")
    return Target(
        f"added TTFA, median ({voice})",
        f"≤ {ADDED_TTFA_TARGET_S * 1000:.0f} ms over direct",
        f"+{ms_cell(a)} ms ({ms_cell(o['pipeline_ttfa_p50'])} vs {ms_cell(o['direct_ttfa_p50'])} ms)"
        if a is not None
        else "-",
        None if a is None else a <= ADDED_TTFA_TARGET_S,
        f"{ms_cell(a - ADDED_TTFA_TARGET_S)} ms over" if a is not None and a > ADDED_TTFA_TARGET_S else "",
    )


def _at_capacity(result: BenchResult, voice: str) -> Target:
    cap = next((c for c in result.capacity if c.voice == voice), None)
    if cap is None:
        return Target(f"P99 TTFA at capacity ({voice})", f"≤ {P99_TTFA_TARGET_S} s", "-", None)
    best = cap.best
    lowest = min(cap.steps, key=lambda s: s.rate) if cap.steps else None
    return Target(
        f"P99 TTFA at capacity, customer-service ({voice})",
        f"≤ {P99_TTFA_TARGET_S} s, nothing lost",
        f"{best.rate:g} req/s: p99 {s_cell(best.summary.ttfa.p99)} s, 0 lost"
        if best
        else f"not met at ≥ {lowest.rate:g} req/s"
        if lowest
        else "-",
        best is not None,
        "" if best else f"p99 {s_cell(lowest.summary.ttfa.p99)} s at {lowest.rate:g} req/s" if lowest else "",
    )


def _sustained(result: BenchResult, voice: str) -> Target:
    sus = result.run("sustained", voice)
    if sus is None:
        return Target(f"{SUSTAIN_RATE:g} req/s sustained ({voice})", "nothing lost", "-", None)
    s = sus.summary
    ok = s.lost == 0 and sus.dlq_total == 0 and s.ttfa.p99 <= P99_TTFA_TARGET_S
    gaps = []
    if s.lost or sus.dlq_total:
        gaps.append(f"{s.lost} lost, {sus.dlq_total} DLQ")
    if s.ttfa.p99 > P99_TTFA_TARGET_S:
        gaps.append(f"p99 TTFA {s.ttfa.p99 - P99_TTFA_TARGET_S:.2f} s over")
    return Target(
        f"100k req/day ≈ {SUSTAIN_RATE:g} req/s customer-service ({voice})",
        f"nothing lost, p99 TTFA ≤ {P99_TTFA_TARGET_S} s",
        f"{s.completed}/{s.sent} in {s.wall_s:.0f} s, {s.lost} lost, p99 TTFA {s_cell(s.ttfa.p99)} s",
        ok,
        "; ".join(gaps),
    )
