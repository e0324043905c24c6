"""What tracing costs (`--sections tracing`): the same texts through a pipeline that records
every span at 100 % sampling (exported over OTLP to a real collector) and through one that
records none, side by side in one run.

Arms alternate off, on, on, off (ABBA), each a fresh set of workers, so a drift over the run
(the broker warming up, a neighbour) falls on both arms alike; each arm pools its two rounds.
A round measures first audio one request at a time (what a span on the hot path would add)
and throughput with `concurrency` in flight (what recording and exporting costs the CPU).

Two sets of workers differ by a few ms of first audio even when configured alike (a quick
run measured +6.8 ms between two arms that recorded nothing), which is more than the bar.
So each on round also runs a *paired* pass on the same workers: the same texts one at a time,
each sent once in a trace marked sampled and once not, alternating request by request. The
workers' sampler follows the caller's flag, so a request not sampled records and exports no
span anywhere while its neighbours do: the per-text difference is what recording and
exporting a request's spans adds to its first audio, with the workers' variance taken out."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import socket
import statistics
import time
from collections.abc import Sequence
from urllib.parse import urlsplit

from streamtts.bench.bench_facts import say
from streamtts.bench.bench_plan import BenchResult, LoadRun
from streamtts.bench.bench_state import Bench
from streamtts.bench.load_runs import Loads
from streamtts.bench.pipeline_up import pipeline_up
from streamtts.bench.stats import Summary, percentile, summarize
from streamtts.bench.tables import markdown_table
from streamtts.bench.trace_hops import STEPS, Hops, first_audio_hops, medians
from streamtts.bench.worker_procs import Topology
from streamtts.bench.workloads import WorkItem
from streamtts.errors import ConfigError
from streamtts.runtime.env_vars import ENV_PREFIX

SECTION = "tracing"
DEFAULT_ENDPOINT = "http://127.0.0.1:4318"
OFF, ON = "tracing off", "tracing on, 100 %"
ORDER = (OFF, ON, ON, OFF)
"""ABBA: each arm twice, the pair in mirrored order."""
PAIRED = "paired, sampled vs not"


def paired_items(items: Sequence[WorkItem]) -> list[WorkItem]:
    """`items` (a list of texts twice over) with every text sent once sampled and once not,
    the flag alternating request by request: item i is sampled when i % half + i // half is
    even, so the second pass flips the first pass's flags (whatever the parity of half)."""
    half = max(1, len(items) // 2)
    return [dataclasses.replace(item, traced=(i % half + i // half) % 2 == 0) for i, item in enumerate(items)]


def paired_differences(result: BenchResult) -> list[float]:
    """Each text's first audio sampled minus not sampled (s), within one paired pass: the
    pass sends the texts twice, with the flags flipped the second time (`paired_items`)."""
    out: list[float] = []
    for run in result.runs:
        if run.section != SECTION or run.extra.get("arm") != PAIRED:
            continue
        recs = run.records
        half = len(recs) // 2
        for a, b in zip(recs[:half], recs[half : 2 * half], strict=True):
            a_s, b_s = a.ttfa_s, b.ttfa_s
            if a_s is None or b_s is None or a.traced is None or a.traced == b.traced:
                continue
            out.append(a_s - b_s if a.traced else b_s - a_s)
    return out


def otlp_endpoint() -> str:
    """Where the on arm exports (this process's STREAMTTS_OTLP_ENDPOINT or OpenTelemetry's
    variable; default the local Jaeger of `infra up --tracing`)."""
    env = os.environ
    return (
        env.get(ENV_PREFIX + "OTLP_ENDPOINT") or env.get("OTEL_EXPORTER_OTLP_ENDPOINT") or DEFAULT_ENDPOINT
    ).rstrip("/")


def _reachable(endpoint: str, timeout_s: float = 2.0) -> bool:
    parts = urlsplit(endpoint if "://" in endpoint else f"http://{endpoint}")
    try:
        port = parts.port or (443 if parts.scheme == "https" else 80)
        with socket.create_connection((parts.hostname or "127.0.0.1", port), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def check_collector() -> None:
    """Raise ConfigError when the on arm could not export: called before the run starts, so
    a missing collector costs one line, not every section measured before this one."""
    endpoint = otlp_endpoint()
    if not _reachable(endpoint):
        raise ConfigError(
            f"--sections tracing exports spans to {endpoint}, which does not answer: start a "
            "collector (`streamtts infra up --tracing`) or set STREAMTTS_OTLP_ENDPOINT"
        )


def arm_env(arm: str, endpoint: str) -> dict[str, str]:
    """The workers' tracing settings of an arm. Off clears both endpoint variables: an
    endpoint inherited from the bench's own environment would turn the off arm on."""
    if arm == ON:
        return {ENV_PREFIX + "OTLP_ENDPOINT": endpoint, ENV_PREFIX + "TRACE_SAMPLE_RATIO": "1.0"}
    return {ENV_PREFIX + "OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_ENDPOINT": ""}


async def tracing_cost(bench: Bench) -> None:
    plan = bench.plan
    voice = plan.voices[0]
    endpoint = otlp_endpoint()
    await asyncio.to_thread(check_collector)  # checked at the start too; it may have stopped since
    # The baseline's texts twice a round: a difference of a few per cent (or ms) needs more
    # requests than the overhead section sends (the render cache is off: a repeat is rendered).
    items = bench.overhead_items[voice] * 2
    per_round = len(items) * bench.per_item_s(voice) * 3 + 40
    per_pass = len(items) * bench.per_item_s(voice) + 20
    if not bench.fits(f"tracing ({len(ORDER)} rounds)", len(ORDER) * per_round + ORDER.count(ON) * per_pass):
        return
    n = plan.concurrency
    for i, arm in enumerate(ORDER, 1):
        topo = Topology(1, plan.threads, warm_voices=(voice,))
        label = f"trace-{'on' if arm == ON else 'off'}{i}"
        async with pipeline_up(bench, label, topo, arm_env(arm, endpoint)) as pipe:
            loads = Loads(bench, pipe, SECTION, voice)
            one = await loads.measure(f"{arm} c=1", items, concurrency=1, duration_s=per_round)
            many = await loads.measure(f"{arm} c={n}", items, concurrency=n, duration_s=per_round)
            for run in (one, many):
                run.extra = {"arm": arm, "round": i}
            if arm == ON:
                paired = await loads.measure(
                    f"{PAIRED} c=1", paired_items(items), concurrency=1, duration_s=per_pass
                )
                paired.extra = {"arm": PAIRED, "round": i}
                hops = await asyncio.to_thread(_hops_of, one)
                one.extra["spans_seen"] = bool(hops)
                one.extra["hops"] = [dict(h.steps) | {"first audio": h.total_ms} for h in hops]


def _hops_of(run: LoadRun, wait_s: float = 15.0) -> list[Hops]:
    """Each request's first audio hop by hop, from its trace in the collector (looked up
    by request id through the local query API). A worker exports spans in batches every few
    seconds, so the round's last traces are waited for, up to `wait_s`; a request whose
    trace is not complete by then is left out."""
    from streamtts.runtime.trace_query import TraceNotFound, fetch_trace

    # The records' times are monotonic; the spans' are wall clock.
    to_wall_us = (time.time() - time.monotonic()) * 1e6
    deadline = time.monotonic() + wait_s
    out: list[Hops] = []
    for rec in run.records:
        if rec.first_chunk_at is None:
            continue
        while True:
            try:
                _, spans = fetch_trace(rec.request_id, lookback_h=1)
            except TraceNotFound:
                spans = []  # not indexed yet
            except ConfigError as err:
                say(f"tracing: no hops from the query API ({err})")
                return out  # unreachable or not Jaeger's: asking again costs a timeout each
            hops = first_audio_hops(
                spans, int(rec.sent_at * 1e6 + to_wall_us), int(rec.first_chunk_at * 1e6 + to_wall_us)
            )
            if hops is not None or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # polling another system's index: there is no event to await
        if hops is not None:
            out.append(hops)
    return out


def pooled(result: BenchResult) -> dict[str, tuple[Summary, Summary]] | None:
    """Per arm: its one-at-a-time runs pooled (first audio) and its concurrent runs pooled
    (throughput over their summed wall time). None without both arms."""
    out: dict[str, tuple[Summary, Summary]] = {}
    for arm in (OFF, ON):
        runs = [r for r in result.runs if r.section == SECTION and r.extra.get("arm") == arm]
        ones = [r for r in runs if r.name.endswith(" c=1")]
        manys = [r for r in runs if r not in ones]
        if not ones or not manys:
            return None
        one = summarize([rec for r in ones for rec in r.records])
        many = summarize(
            [rec for r in manys for rec in r.records], wall_s=sum(r.summary.wall_s for r in manys)
        )
        out[arm] = (one, many)
    return out


def tracing_markdown(result: BenchResult) -> list[str]:
    arms = pooled(result)
    if arms is None:
        return []
    (off1, offn), (on1, onn) = arms[OFF], arms[ON]
    voice = next(r.voice for r in result.runs if r.section == SECTION)
    seen = [
        r.extra.get("spans_seen") for r in result.runs if r.section == SECTION and "spans_seen" in r.extra
    ]

    def ms(x: float | None) -> str:
        return f"{x * 1000:,.1f}" if x is not None else "-"

    def delta_ms(a: float | None, b: float | None) -> str:
        return f"{(b - a) * 1000:+.1f} ms" if a is not None and b is not None else "-"

    ratio = f"{onn.throughput_rps / offn.throughput_rps:.3f} ×" if offn.throughput_rps else "-"
    rows = [
        [f"first audio {q}, ms (c=1)", ms(a), ms(b), delta_ms(a, b)]
        for q, a, b in (
            ("p50", off1.ttfa.p50, on1.ttfa.p50),
            ("p95", off1.ttfa.p95, on1.ttfa.p95),
            ("p99", off1.ttfa.p99, on1.ttfa.p99),
        )
    ]
    rows += [
        [
            "throughput, req/s (closed loop)",
            f"{offn.throughput_rps:.2f}",
            f"{onn.throughput_rps:.2f}",
            ratio,
        ],
        ["requests (c=1 / closed loop)", f"{off1.sent} / {offn.sent}", f"{on1.sent} / {onn.sent}", ""],
        ["lost", str(off1.lost + offn.lost), str(on1.lost + onn.lost), ""],
    ]
    recorded = "yes" if seen and all(seen) else "no (the on arm's traces were not found)"
    intro = (
        f"{voice}, the same texts in each arm; arms in the order {', '.join(ORDER)}, each a fresh "
        "set of workers, rounds pooled per arm. On: every span recorded and exported over OTLP "
        f"to the local Jaeger (sample ratio 1.0); traces found in it: {recorded}."
    )
    return [
        "",
        "## Tracing on (100 % sampling) vs off",
        "",
        intro,
        "",
        *markdown_table(["measure", OFF, ON, "on vs off"], rows),
        *_paired_markdown(result),
        *_hops_markdown(result, voice),
    ]


def _paired_markdown(result: BenchResult) -> list[str]:
    """The paired passes (see the module's docstring): first audio of the sampled and the
    unsampled requests, and the median of the per-text differences."""
    recs = [
        rec
        for r in result.runs
        if r.section == SECTION and r.extra.get("arm") == PAIRED
        for rec in r.records
        if rec.ttfa_s is not None and rec.traced is not None
    ]
    diffs = paired_differences(result)
    if not recs or not diffs:
        return []
    ttfa = {flag: [r.ttfa_s for r in recs if r.traced is flag] for flag in (False, True)}

    def ms(values: Sequence[float | None], q: float) -> str:
        known = [v for v in values if v is not None]
        return f"{percentile(known, q) * 1000:,.1f}" if known else "-"

    rows = [
        [f"first audio {name}, ms", ms(ttfa[False], q), ms(ttfa[True], q), ""]
        for name, q in (("p50", 50), ("p95", 95))
    ]
    spread = statistics.quantiles(diffs, n=4) if len(diffs) >= 2 else [diffs[0]] * 3
    rows.append(
        [
            "per text, sampled − not (same text, same workers), ms",
            "",
            "",
            f"median {statistics.median(diffs) * 1000:+.1f} "
            f"(quartiles {spread[0] * 1000:+.1f} / {spread[2] * 1000:+.1f}; {len(diffs)} pairs)",
        ]
    )
    return [
        "",
        "### Paired on the same workers: sampled vs not sampled",
        "",
        "In each on round's workers, the same texts one at a time, each sent once in a trace "
        "marked sampled and once not, alternating request by request; a request not sampled "
        "records and exports no span in any stage. The per-text difference is what recording "
        "and exporting a request's spans adds to its first audio, without the variance between "
        "two sets of workers.",
        "",
        *markdown_table(["measure", "not sampled", "sampled", "sampled − not"], rows),
    ]


def _hops_markdown(result: BenchResult, voice: str) -> list[str]:
    """The on arm's first audio hop by hop (`bench.trace_hops`): medians over its requests,
    beside the in-process baseline's first audio, so the pipeline's added time is read off
    the hops that make it."""
    hops = [
        h
        for r in result.runs
        if r.section == SECTION and r.extra.get("arm") == ON
        for h in r.extra.get("hops", [])
    ]
    if not hops:
        return []
    # Only requests whose every step is known (a result.json of an older bench may lack one).
    known = [
        Hops({name: h[name] for name in STEPS}, h["first audio"])
        for h in hops
        if all(name in h for name in (*STEPS, "first audio"))
    ]
    if not known:
        return []
    med = medians(known)
    rows = [[name, f"{med[name]:,.1f}"] for name in STEPS]
    rows.append(["first audio (send → first chunk at the subscriber)", f"{med['first audio']:,.1f}"])
    direct = result.run("direct", voice, "direct")
    if direct is not None and direct.summary.ttfa.p50 is not None:
        base = direct.summary.ttfa.p50 * 1000
        rows.append(["in-process baseline's first audio (same texts)", f"{base:,.1f}"])
        rows.append(["added by the pipeline", f"{med['first audio'] - base:+,.1f}"])
    intro = (
        f"From the on arm's traces ({len(known)} requests one at a time): each step's median, in ms. "
        "A hop is one span's end to the next one's start (a record through Kafka); the last "
        "ends at the subscriber's first chunk, about a millisecond after encode's span (which "
        "waits for the broker's acknowledgement), or before it (negative) when the subscriber "
        "read the chunk first. Medians of steps need not add up to the median first audio."
    )
    return [
        "",
        "### First audio hop by hop, from the traces",
        "",
        intro,
        "",
        *markdown_table(["step", "p50 ms"], rows),
    ]
