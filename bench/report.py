"""Bench results → targets, JSON and a Markdown report (the table printed at the end)."""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from streamtts.bench.bench_plan import SUSTAIN_RATE, BenchResult, LoadRun
from streamtts.bench.capacity import P99_TTFA_TARGET_S
from streamtts.bench.stats import ratio
from streamtts.bench.tail import tail_markdown

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


def _ms(s: float) -> str:
    return "-" if s is None or math.isnan(s) else f"{s * 1000:.0f}"


def _s(s: float) -> str:
    return "-" if s is None or math.isnan(s) else f"{s:.2f}"


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
    out: list[Target] = []
    o = overhead(result, voice) or {}
    r = o.get("throughput_ratio")
    out.append(
        Target(
            f"pipeline throughput vs direct ({voice})",
            f"≥ {THROUGHPUT_TARGET:.2f} × direct",
            f"{r:.2f} × ({o['pipeline_rps']:.2f} vs {o['direct_rps']:.2f} req/s)" if r is not None else "-",
            None if r is None else r >= THROUGHPUT_TARGET,
            f"{THROUGHPUT_TARGET - r:.2f} × short" if r is not None and r < THROUGHPUT_TARGET else "",
        )
    )
    a = o.get("added_ttfa_p50")
    out.append(
        Target(
            f"added TTFA, median ({voice})",
            f"≤ {ADDED_TTFA_TARGET_S * 1000:.0f} ms over direct",
            f"+{_ms(a)} ms ({_ms(o['pipeline_ttfa_p50'])} vs {_ms(o['direct_ttfa_p50'])} ms)"
            if a is not None
            else "-",
            None if a is None else a <= ADDED_TTFA_TARGET_S,
            f"{_ms(a - ADDED_TTFA_TARGET_S)} ms over" if a is not None and a > ADDED_TTFA_TARGET_S else "",
        )
    )
    cap = next((c for c in result.capacity if c.voice == voice), None)
    if cap is None:
        out.append(Target(f"P99 TTFA at capacity ({voice})", f"≤ {P99_TTFA_TARGET_S} s", "-", None))
    else:
        best = cap.best
        lowest = min(cap.steps, key=lambda s: s.rate) if cap.steps else None
        out.append(
            Target(
                f"P99 TTFA at capacity, customer-service ({voice})",
                f"≤ {P99_TTFA_TARGET_S} s, nothing lost",
                f"{best.rate:g} req/s: p99 {_s(best.summary.ttfa.p99)} s, 0 lost"
                if best
                else f"not met at ≥ {lowest.rate:g} req/s"
                if lowest
                else "-",
                best is not None,
                ""
                if best
                else f"p99 {_s(lowest.summary.ttfa.p99)} s at {lowest.rate:g} req/s"
                if lowest
                else "",
            )
        )
    sus = result.run("sustained", voice)
    if sus is None:
        out.append(Target(f"{SUSTAIN_RATE:g} req/s sustained ({voice})", "nothing lost", "-", None))
    else:
        s = sus.summary
        ok = s.lost == 0 and sus.dlq_total == 0 and s.ttfa.p99 <= P99_TTFA_TARGET_S
        gaps = []
        if s.lost or sus.dlq_total:
            gaps.append(f"{s.lost} lost, {sus.dlq_total} DLQ")
        if s.ttfa.p99 > P99_TTFA_TARGET_S:
            gaps.append(f"p99 TTFA {s.ttfa.p99 - P99_TTFA_TARGET_S:.2f} s over")
        out.append(
            Target(
                f"100k req/day ≈ {SUSTAIN_RATE:g} req/s customer-service ({voice})",
                f"nothing lost, p99 TTFA ≤ {P99_TTFA_TARGET_S} s",
                f"{s.completed}/{s.sent} in {s.wall_s:.0f} s, {s.lost} lost, p99 TTFA {_s(s.ttfa.p99)} s",
                ok,
                "; ".join(gaps),
            )
        )
    return out


# -- JSON ---------------------------------------------------------------------------------


def _clean(obj: Any) -> Any:
    if isinstance(obj, float):
        return None if math.isnan(obj) or math.isinf(obj) else round(obj, 4)
    if isinstance(obj, dict):
        return {str(k): _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _run_json(run: LoadRun) -> dict[str, Any]:
    d = {k: v for k, v in dataclasses.asdict(run).items() if k != "records"}
    d["requests"] = [
        {
            "chars": r.chars,
            "lang": r.lang,
            "kind": r.kind,
            "ttfa_s": r.ttfa_s,
            "completion_s": r.completion_s,
            "audio_s": r.audio_s,
            "degraded": r.degraded,
            "lost": r.completed_at is None,
        }
        for r in run.records
    ]
    return d


def to_json(result: BenchResult) -> dict[str, Any]:
    return _clean(
        {
            "started_at": result.started_at,
            "wall_s": result.wall_s,
            "machine": result.machine,
            "plan": dataclasses.asdict(result.plan),
            "targets": [dataclasses.asdict(t) for t in targets(result)],
            "overhead": {v: overhead(result, v) for v in result.plan.voices},
            "runs": [_run_json(r) for r in result.runs],
            "capacity": [
                {
                    "voice": c.voice,
                    "rate_rps": c.rate,
                    "stopped": c.stopped,
                    "steps": [
                        {
                            "rate": s.rate,
                            "passed": s.passed,
                            "backlog": s.backlog,
                            "summary": dataclasses.asdict(s.summary),
                        }
                        for s in c.steps
                    ],
                }
                for c in result.capacity
            ],
            "worker_start_s": result.worker_start_s,
            "skipped": result.skipped,
        }
    )


def write_json(result: BenchResult, path: Path) -> None:
    path.write_text(json.dumps(to_json(result), indent=1, ensure_ascii=False) + "\n")


# -- Markdown -----------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    align = ["---" if i == 0 else "--:" for i in range(len(header))]
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join(align) + "|",
        *("| " + " | ".join(r) + " |" for r in rows),
    ]


def _usage(run: LoadRun, name: str) -> str:
    if name in ("synth", "front"):  # every synthesize process; front and a sink alone
        us = [u for n, u in run.usage.items() if n.startswith(name)]
    else:
        us = [u for n, u in run.usage.items() if n == name]
    if not us:
        return "-"
    return f"{sum(u.cpu_pct for u in us):.0f} % / {sum(u.rss_peak_mb for u in us):.0f}"


def markdown(result: BenchResult, images: list[str]) -> str:
    plan, m = result.plan, result.machine
    lines = [
        f"# streamtts bench — {'quick' if plan.quick else 'full'} run",
        "",
        f"{result.started_at} · {m.get('cpus')} × {m.get('cpu_model') or 'CPU'} · {m.get('memory_gb')} GB · "
        f"Python {m.get('python')} · commit {m.get('commit') or '?'} · took {result.wall_s / 60:.1f} min.  ",
        f"Workers: segment+encode+sink in one process, synthesize in its own; {plan.threads} inference "
        "threads (onnxruntime, no busy-wait spinning) in both the pipeline and the baseline; "
        "mp3 at the voice's rate; render cache off in the workers (`streamtts bench --cache` "
        "measures it); local Kafka 4.1.1 + MinIO on the same machine. "
        "TTFA = request sent → first audio chunk at a Kafka subscriber; completion = every chunk "
        "received *and* the completion result (file stored in MinIO) published.",
        "",
        "## Targets",
        "",
        *_table(
            ["target", "goal", "measured", "met", "gap"],
            [
                [
                    t.name,
                    t.goal,
                    t.measured,
                    "-" if t.met is None else ("yes" if t.met else "**no**"),
                    t.gap or "-",
                ]
                for t in targets(result)
            ],
        ),
        "",
        "## Pipeline vs direct (same texts, same engine, same thread budget)",
        "",
        f"Direct = the pipeline's stages in memory (segment, synthesize, encode; no broker), one "
        f"text at a time, measured before the first and after the last worker. Pipeline throughput with "
        f"{plan.concurrency} requests in flight; pipeline TTFA with one in flight.",
        "",
    ]
    rows = []
    for voice in plan.voices:
        o = overhead(result, voice)
        if not o:
            continue
        rows.append(
            [
                voice,
                _s(o["direct_rps"]),
                _s(o.get("pipeline_rps", math.nan)),
                _s(o.get("throughput_ratio", math.nan)),
                f"{_s(o['direct_audio_per_wall'])} → {_s(o.get('pipeline_audio_per_wall', math.nan))}",
                _ms(o["direct_ttfa_p50"]),
                _ms(o.get("pipeline_ttfa_p50", math.nan)),
                "+" + _ms(o.get("added_ttfa_p50", math.nan)),
            ]
        )
    lines += _table(
        [
            "voice",
            "direct req/s",
            "pipeline req/s",
            "ratio",
            "audio s/s direct → pipeline",
            "direct 1st chunk p50 ms",
            "pipeline TTFA p50 ms",
            "added ms",
        ],
        rows,
    )
    lines += ["", "## Load runs", ""]
    lines += _table(
        [
            "run",
            "voice",
            "load",
            "sent",
            "lost",
            "degr.",
            "DLQ",
            "TTFA p50/p95/p99/max ms",
            "completion p50/p95/p99/max s",
            "req/s",
            "audio s/s",
        ],
        [
            [
                r.name,
                r.voice,
                r.mode,
                str(r.summary.sent),
                str(r.summary.lost),
                str(r.summary.degraded),
                str(r.dlq_total) if r.dlq else "-",
                "/".join(
                    _ms(x)
                    for x in (r.summary.ttfa.p50, r.summary.ttfa.p95, r.summary.ttfa.p99, r.summary.ttfa.max)
                ),
                "/".join(
                    _s(x)
                    for x in (
                        r.summary.completion.p50,
                        r.summary.completion.p95,
                        r.summary.completion.p99,
                        r.summary.completion.max,
                    )
                ),
                _s(r.summary.throughput_rps),
                _s(r.summary.audio_per_wall),
            ]
            for r in result.runs
            if r.section != "capacity"
        ],
    )
    lines += ["", "## Resources during each run (CPU % of one core / peak RSS MB)", ""]
    lines += _table(
        [
            "run",
            "voice",
            "topology",
            "synthesize",
            "segment+encode+sink",
            "kafka",
            "minio",
            "bench client",
            "rest of machine (CPU %)",
        ],
        [
            [
                r.name,
                r.voice,
                r.topology,
                _usage(r, "synth"),
                _usage(r, "front"),
                _usage(r, "kafka"),
                _usage(r, "minio"),
                _usage(r, "bench"),
                _usage(r, "others").split(" /")[0],
            ]
            for r in result.runs
            if r.usage and r.section != "capacity"
        ],
    )
    if result.capacity:
        lines += [
            "",
            f"## Capacity: highest Poisson rate with P99 TTFA ≤ {P99_TTFA_TARGET_S} s and nothing lost",
            "",
            "Customer-service mix (80 % < 50 chars, 20 % > 200 chars) restricted to the languages the "
            "voice speaks itself (en_joe: English; jm_kumo: zh, en and zh/en mixed).",
            "",
        ]
        lines += _table(
            ["voice", "capacity req/s", "steps: rate → p99 TTFA s (n, lost)", "note"],
            [
                [
                    c.voice,
                    f"{c.rate:g}" if c.best else "none",
                    "; ".join(
                        f"{s.rate:g} → {_s(s.summary.ttfa.p99)} ({s.summary.sent}, {s.summary.lost})"
                        f"{' ✓' if s.passed else ' ✗'}"
                        for s in c.steps
                    ),
                    c.stopped or "-",
                ]
                for c in result.capacity
            ],
        )
    g = [r for r in result.runs if r.section == "guarantees"]
    if g:
        base = g[0].summary.throughput_rps
        lines += ["", "## Exactly-once vs at-least-once (same texts, closed loop)", ""]
        lines += _table(
            [
                "guarantee",
                "voice",
                "req/s",
                "vs at-least-once",
                "TTFA p50/p99 ms",
                "completion p50/p99 s",
                "lost",
                "front CPU %",
            ],
            [
                [
                    r.topology.split()[-1],
                    r.voice,
                    _s(r.summary.throughput_rps),
                    _s(ratio(r.summary.throughput_rps, base)),
                    f"{_ms(r.summary.ttfa.p50)}/{_ms(r.summary.ttfa.p99)}",
                    f"{_s(r.summary.completion.p50)}/{_s(r.summary.completion.p99)}",
                    str(r.summary.lost),
                    _usage(r, "front").split(" /")[0],
                ]
                for r in g
            ],
        )
    so = [r for r in result.runs if r.section == "scale_out"]
    if so:
        lines += ["", "## Scale-out: 1 synthesize worker × 2 threads vs 2 workers × 1 thread", ""]
        rows = []
        for r in so:
            base_run = next((b for b in so if b.voice == r.voice), r)
            rows.append(
                [
                    r.topology.split()[0],
                    r.voice,
                    _s(r.summary.throughput_rps),
                    _s(ratio(r.summary.throughput_rps, base_run.summary.throughput_rps)),
                    f"{_ms(r.summary.ttfa.p50)}/{_ms(r.summary.ttfa.p99)}",
                    f"{_s(r.summary.completion.p50)}/{_s(r.summary.completion.p99)}",
                    _usage(r, "synth"),
                    _usage(r, "front"),
                ]
            )
        lines += _table(
            [
                "workers × threads",
                "voice",
                "req/s",
                "vs 1×2",
                "TTFA p50/p99 ms",
                "completion p50/p99 s",
                "synthesize CPU % / RSS MB",
                "front CPU % / RSS MB",
            ],
            rows,
        )
    lines += _wire_table(result)
    lines += tail_markdown(result.runs)
    if result.skipped:
        lines += ["", "Skipped (time budget): " + "; ".join(result.skipped)]
    if result.worker_start_s:
        lines += [
            "",
            "Worker start-up (model load + warm-up + group join): "
            + ", ".join(f"{k} {v:.1f} s" for k, v in result.worker_start_s.items()),
        ]
    if images:
        lines += ["", "## Plots", ""] + [f"![{Path(i).stem}]({i})" for i in images]
    return "\n".join(lines) + "\n"


def _wire_table(result: BenchResult) -> list[str]:
    """v1 vs cloudevents (`--sections wire`), and cloudevents asking for pcm (no encoder): per
    request and per audio second, side by side."""
    runs = [r for r in result.runs if r.section == "wire" and r.extra]
    if not runs:
        return []
    base = runs[0]
    direct = result.run("direct", base.voice)
    rows: list[list[str]] = []

    def row(name: str, values: list[float | None], unit: str = "") -> None:
        first = values[0]
        cells = [f"{v:,.1f}{unit}" if v is not None else "-" for v in values]
        change = [f"{(v / first - 1) * 100:+.1f} %" if v is not None and first else "-" for v in values[1:]]
        rows.append([name, *cells, *change])

    def per_req(r: LoadRun, key: str) -> float | None:
        value = r.extra.get(key)
        return float(value) if isinstance(value, int | float) else None

    procs = sorted({k for r in runs for k in r.extra["cpu_ms_per_request"]})
    row(
        "CPU outside inference, ms / request",
        [per_req(r, "outside_inference_cpu_ms_per_request") for r in runs],
    )
    row(
        "— of it the pipeline idle at this throughput, ms / request",
        [per_req(r, "idle_cpu_ms_per_request") for r in runs],
    )
    row("pipeline CPU idle (no request), ms / s", [per_req(r, "idle_cpu_ms_per_s") for r in runs])
    row("inference CPU, ms / request", [per_req(r, "inference_cpu_ms_per_request") for r in runs])
    for proc in procs:
        row(f"{proc} CPU, ms / request", [r.extra["cpu_ms_per_request"].get(proc) for r in runs])
    row("subscriber (bench) CPU, ms / request", [per_req(r, "subscriber_cpu_ms_per_request") for r in runs])
    topics = sorted({t for r in runs for t in r.extra["kafka_bytes_per_audio_s"]})
    for topic in topics:
        row(f"Kafka bytes / audio s, {topic}", [r.extra["kafka_bytes_per_audio_s"].get(topic) for r in runs])
    row(
        "Kafka bytes / audio s, all topics",
        [float(sum(r.extra["kafka_bytes_per_audio_s"].values())) for r in runs],
    )
    row("throughput, req/s", [r.summary.throughput_rps for r in runs])
    if direct and direct.summary.throughput_rps:
        row(
            "pipeline / direct throughput",
            [r.summary.throughput_rps / direct.summary.throughput_rps for r in runs],
        )
    row("first audio p50, ms", [(r.summary.ttfa.p50 or 0) * 1000 for r in runs])
    row("first audio p99, ms", [(r.summary.ttfa.p99 or 0) * 1000 for r in runs])
    names = [str(r.extra.get("arm") or r.topology.split()[-1]) for r in runs]
    lines = [
        "",
        f"## Wire formats side by side ({base.voice}, {base.mode}, same texts, "
        f"{', '.join(f'{n}: {r.summary.completed} requests' for n, r in zip(names, runs, strict=True))})",
        "",
    ]
    return lines + _table(["measure", *names, *(f"{n} vs {names[0]}" for n in names[1:])], rows)
