"""The pipeline against its baseline on one set of workers: overhead on the baseline's texts,
sustained load, burst, long-form and each voice's capacity; or, instead, the one load a user
chose (`--rate` / `--concurrency` / `--workload`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from streamtts.bench.bench_plan import SUSTAIN_RATE, LoadRun
from streamtts.bench.bench_state import Bench
from streamtts.bench.capacity import Step, round_rate, search
from streamtts.bench.load_runs import Loads, snapshot
from streamtts.bench.loadgen import RequestShape, burst_schedule, open_loop, poisson_schedule, progress_line
from streamtts.bench.pipeline_up import Pipeline, pipeline_up
from streamtts.bench.stats import summarize
from streamtts.bench.worker_procs import Topology, UsageWindow
from streamtts.bench.workloads import draw_mix, load_burst_profile


async def main_pipeline(bench: Bench) -> None:
    plan = bench.plan
    primary = plan.voices[0]
    async with pipeline_up(bench, "main", Topology(1, plan.threads, warm_voices=plan.voices)) as pipe:
        for voice in plan.voices:
            await overhead(bench, pipe, voice, "overhead")
        # 100k requests/day of customer-service traffic, open loop.
        if bench.fits("sustained load", plan.sustain_s + plan.drain_s):
            schedule = poisson_schedule(SUSTAIN_RATE, plan.sustain_s, bench.rng)
            await _open_loop(
                bench, pipe, f"sustained {SUSTAIN_RATE:g} req/s", "sustained", "customer_service", schedule
            )
        phases = [
            dataclasses.replace(p, duration_s=p.duration_s * plan.burst_scale) for p in load_burst_profile()
        ]
        burst_s = sum(p.duration_s for p in phases)
        if bench.fits("burst", burst_s + plan.drain_s):
            schedule = burst_schedule(SUSTAIN_RATE, phases, bench.rng)
            await _open_loop(bench, pipe, "burst", "burst", "burst", schedule)
        paragraphs = bench.overhead_items.get("long_form", [])
        if paragraphs and bench.fits("long-form", 30):
            long_form = Loads(bench, pipe, "long_form", primary, "long_form")
            await long_form.measure("long-form c=1", paragraphs, concurrency=1, duration_s=60)
        for voice in plan.voices:
            await _capacity(bench, pipe, voice)


async def overhead(bench: Bench, pipe: Pipeline, voice: str, section: str) -> None:
    """Same texts as the baseline: one at a time (added TTFA), then N in flight (throughput)."""
    items = bench.overhead_items[voice]
    slow = not bench.voice_fast[voice]
    cost = len(items) * bench.per_item_s(voice) * 2.5 + 10
    if not bench.fits(f"{section} {voice}", cost):
        return
    loads = Loads(bench, pipe, section, voice)
    await loads.measure("pipeline c=1", items, concurrency=1, duration_s=cost)
    n = bench.plan.concurrency
    await loads.measure(f"pipeline c={n}", items, concurrency=n, duration_s=cost * (2 if slow else 1))


async def _open_loop(
    bench: Bench, pipe: Pipeline, name: str, section: str, workload: str, schedule: Sequence[float]
) -> LoadRun:
    """An open-loop load of the primary voice's mix sent on `schedule` (SUSTAIN_RATE on average)."""
    primary = bench.plan.voices[0]
    items = draw_mix(bench.pools[primary], len(schedule), bench.rng)
    loads = Loads(bench, pipe, section, primary, workload)
    return await loads.measure(name, items, schedule=schedule, offered=SUSTAIN_RATE)


async def _capacity(bench: Bench, pipe: Pipeline, voice: str) -> None:
    plan = bench.plan
    step_s = plan.fast_step_s if bench.voice_fast[voice] else plan.slow_step_s
    direct = bench.result.run("direct", voice)
    start = 0.5 * direct.summary.throughput_rps if direct and direct.summary.throughput_rps else 0.5
    label = progress_line(f"capacity {voice}")

    def duration(rate: float) -> float:
        # Enough arrivals to say something about P99, but a bounded step.
        return min(max(step_s, plan.min_arrivals / rate), plan.max_step_s)

    async def measure(rate: float) -> Step:
        schedule = poisson_schedule(rate, duration(rate), bench.rng)
        items = draw_mix(bench.pools[voice], len(schedule), bench.rng)
        usage = UsageWindow(bench.pids(pipe.workers)).start()
        recs = await open_loop(pipe.client, items, schedule, RequestShape(voice), drain_s=plan.drain_s)
        used = usage.stop()
        snap = snapshot(recs)
        summary = summarize(snap)
        # A failed step leaves a queue behind: let it finish before the next rate.
        backlog = await pipe.client.wait_all(recs, plan.drain_s) if summary.lost else 0
        bench.result.runs.append(
            LoadRun(
                f"capacity {rate:g} req/s",
                "capacity",
                voice,
                "customer_service",
                f"open, Poisson {rate:g} req/s",
                pipe.workers.topology.label,
                summary,
                offered_rps=rate,
                usage=used,
                records=snap,
            )
        )
        return Step(rate, summary, backlog)

    def on_step(step: Step) -> None:
        s = step.summary
        label(
            f"{step.rate:g} req/s … p99 TTFA {s.ttfa.p99:.2f} s, {s.lost} lost (n={s.sent}) → "
            f"{'pass' if step.passed else 'FAIL'}"
        )

    if not bench.fits(f"capacity {voice}", step_s + plan.drain_s):
        return
    cap = await search(
        voice,
        measure,
        round_rate(start),
        max_steps=plan.max_steps,
        deadline=bench.deadline,
        step_cost_s=lambda r: duration(r) + 10,
        min_rate=plan.min_arrivals / plan.max_step_s,
        on_step=on_step,
    )
    if cap.stopped:
        label(f"stopped: {cap.stopped}")
    label(f"capacity {cap.rate:g} req/s")
    bench.result.capacity.append(cap)


async def custom(bench: Bench) -> None:
    """The baseline's texts as in `overhead`, then the chosen load: open loop at `--rate`, or
    closed with `--concurrency` clients for its duration."""
    c = bench.plan.custom
    assert c is not None
    voice = bench.plan.voices[0]
    async with pipeline_up(bench, "custom", Topology(1, bench.plan.threads, warm_voices=(voice,))) as pipe:
        await overhead(bench, pipe, voice, "overhead")
        if c.rate:
            if c.workload == "burst":
                schedule = burst_schedule(c.rate, load_burst_profile(), bench.rng)
            else:
                schedule = poisson_schedule(c.rate, c.duration_s, bench.rng)
            loads = Loads(bench, pipe, "burst" if c.workload == "burst" else "custom", voice, c.workload)
            items = draw_mix(bench.pools[voice], len(schedule), bench.rng)
            await loads.measure("custom", items, schedule=schedule, offered=c.rate)
        else:
            n = max(1, int(c.duration_s * 5))  # more than can finish: the duration bounds it
            items = draw_mix(bench.pools[voice], n, bench.rng)
            loads = Loads(bench, pipe, "custom", voice, c.workload)
            await loads.measure("custom", items, concurrency=c.concurrency, duration_s=c.duration_s)
