"""A bench result as the Markdown report (the tables printed at the end), section by section."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

from streamtts.bench.bench_facts import broker_note, pool_rounds
from streamtts.bench.bench_plan import BenchResult, LoadRun
from streamtts.bench.capacity import P99_TTFA_TARGET_S
from streamtts.bench.stats import Dist, ratio
from streamtts.bench.tables import markdown_table, ms_cell, s_cell
from streamtts.bench.tail import tail_markdown
from streamtts.bench.targets import overhead, targets
from streamtts.bench.tracing_bench import tracing_markdown


def markdown(result: BenchResult, images: list[str]) -> str:
    lines = _head(result) + _overhead(result) + _load_runs(result) + _resources(result)
    lines += _capacity(result) + _guarantees(result) + _scale_out(result)
    lines += _wire_table(result) + _wire_table(result, "encode")
    lines += tracing_markdown(result) + tail_markdown(result.runs)
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


def _titled(title: str, header: list[str], rows: list[list[str]], intro: str = "") -> list[str]:
    """A section: its heading, a paragraph saying what it measured (if any), its table."""
    return ["", f"## {title}", "", *([intro, ""] if intro else []), *markdown_table(header, rows)]


def _usage(run: LoadRun, name: str) -> str:
    if name in ("synth", "front"):  # every synthesize process; front and a sink alone
        us = [u for n, u in run.usage.items() if n.startswith(name)]
    else:
        us = [u for n, u in run.usage.items() if n == name]
    if not us:
        return "-"
    return f"{sum(u.cpu_pct for u in us):.0f} % / {sum(u.rss_peak_mb for u in us):.0f}"


def _head(result: BenchResult) -> list[str]:
    plan, m = result.plan, result.machine
    return [
        f"# streamtts bench — {'quick' if plan.quick else 'full'} run",
        "",
        f"{result.started_at} · {m.get('cpus')} × {m.get('cpu_model') or 'CPU'} · {m.get('memory_gb')} GB · "
        f"Python {m.get('python')} · commit {m.get('commit') or '?'} · took {result.wall_s / 60:.1f} min.  ",
        f"Workers: segment+encode+sink in one process, synthesize in its own; {plan.threads} inference "
        "threads (onnxruntime, no busy-wait spinning) in both the pipeline and the baseline; "
        "mp3 at the voice's rate; render cache off in the workers (`streamtts bench --cache` "
        "measures it); local Kafka 4.1.1 + MinIO on the same machine. "
        "TTFA = request sent → first audio chunk at a Kafka subscriber; completion = every chunk "
        "received *and* the completion result (file stored in MinIO) published. "
        + broker_note(m.get("broker_age_s")),
        "",
        "## Targets",
        "",
        *markdown_table(
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
    ]


def _overhead(result: BenchResult) -> list[str]:
    rows = []
    for voice in result.plan.voices:
        o = overhead(result, voice)
        if not o:
            continue
        rows.append(
            [
                voice,
                s_cell(o["direct_rps"]),
                s_cell(o.get("pipeline_rps", math.nan)),
                s_cell(o.get("throughput_ratio", math.nan)),
                f"{s_cell(o['direct_audio_per_wall'])} → "
                f"{s_cell(o.get('pipeline_audio_per_wall', math.nan))}",
                ms_cell(o["direct_ttfa_p50"]),
                ms_cell(o.get("pipeline_ttfa_p50", math.nan)),
                "+" + ms_cell(o.get("added_ttfa_p50", math.nan)),
            ]
        )
    return _titled(
        "Pipeline vs direct (same texts, same engine, same thread budget)",
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
        "Direct = the pipeline's stages in memory (segment, synthesize, encode; no broker), one "
        "text at a time, measured before the first and after the last worker. Pipeline throughput with "
        f"{result.plan.concurrency} requests in flight; pipeline TTFA with one in flight.",
    )


def _load_runs(result: BenchResult) -> list[str]:
    return _titled(
        "Load runs",
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
                _quantiles(r.summary.ttfa, ms_cell),
                _quantiles(r.summary.completion, s_cell),
                s_cell(r.summary.throughput_rps),
                s_cell(r.summary.audio_per_wall),
            ]
            for r in result.runs
            if r.section != "capacity"
        ],
    )


def _quantiles(d: Dist, cell: Callable[[float], str]) -> str:
    return "/".join(cell(x) for x in (d.p50, d.p95, d.p99, d.max))


def _resources(result: BenchResult) -> list[str]:
    return _titled(
        "Resources during each run (CPU % of one core / peak RSS MB)",
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


def _capacity(result: BenchResult) -> list[str]:
    if not result.capacity:
        return []
    return _titled(
        f"Capacity: highest Poisson rate with P99 TTFA ≤ {P99_TTFA_TARGET_S} s and nothing lost",
        ["voice", "capacity req/s", "steps: rate → p99 TTFA s (n, lost)", "note"],
        [
            [
                c.voice,
                f"{c.rate:g}" if c.best else "none",
                "; ".join(
                    f"{s.rate:g} → {s_cell(s.summary.ttfa.p99)} ({s.summary.sent}, {s.summary.lost})"
                    f"{' ✓' if s.passed else ' ✗'}"
                    for s in c.steps
                ),
                c.stopped or "-",
            ]
            for c in result.capacity
        ],
        "Customer-service mix (80 % < 50 chars, 20 % > 200 chars) restricted to the languages the "
        "voice speaks itself (en_joe: English; jm_kumo: zh, en and zh/en mixed).",
    )


def _latencies(r: LoadRun) -> list[str]:
    """TTFA and completion, p50/p99: the columns the side-by-side tables share."""
    return [
        f"{ms_cell(r.summary.ttfa.p50)}/{ms_cell(r.summary.ttfa.p99)}",
        f"{s_cell(r.summary.completion.p50)}/{s_cell(r.summary.completion.p99)}",
    ]


def _guarantees(result: BenchResult) -> list[str]:
    g = [r for r in result.runs if r.section == "guarantees"]
    if not g:
        return []
    base = g[0].summary.throughput_rps
    return _titled(
        "Exactly-once vs at-least-once (same texts, closed loop)",
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
                s_cell(r.summary.throughput_rps),
                s_cell(ratio(r.summary.throughput_rps, base)),
                *_latencies(r),
                str(r.summary.lost),
                _usage(r, "front").split(" /")[0],
            ]
            for r in g
        ],
    )


def _scale_out(result: BenchResult) -> list[str]:
    so = [r for r in result.runs if r.section == "scale_out"]
    if not so:
        return []
    rows = []
    for r in so:
        base_run = next((b for b in so if b.voice == r.voice), r)
        rows.append(
            [
                r.topology.split()[0],
                r.voice,
                s_cell(r.summary.throughput_rps),
                s_cell(ratio(r.summary.throughput_rps, base_run.summary.throughput_rps)),
                *_latencies(r),
                _usage(r, "synth"),
                _usage(r, "front"),
            ]
        )
    return _titled(
        "Scale-out: 1 synthesize worker × 2 threads vs 2 workers × 1 thread",
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


def _wire_table(result: BenchResult, section: str = "wire") -> list[str]:
    """The wire section's arms (`--sections wire`, `bench_plan.WIRE_ARMS`): mp3 encoded twice
    and once, v1, and pcm (no encoder), per request and per audio second, side by side; or the
    encode section's (`ENCODE_ARMS`), each arm's rounds pooled."""
    runs = pool_rounds([r for r in result.runs if r.section == section and r.extra])
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
    counts = ", ".join(
        f"{n}: {r.summary.completed} requests"
        + (f" in {r.extra['rounds']} rounds" if "rounds" in r.extra else "")
        for n, r in zip(names, runs, strict=True)
    )
    title = "Wire formats and encodes" if section == "wire" else "One encode vs two, ABBA"
    return _titled(
        f"{title} side by side ({base.voice}, {base.mode}, same texts, {counts})",
        ["measure", *names, *(f"{n} vs {names[0]}" for n in names[1:])],
        rows,
    )
