"""The same texts, closed loop, on worker set-ups side by side: delivery guarantees, scale-out
(one synthesize process or two on the same cores) and the wire formats."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from functools import partial

from streamtts.bench.bench_facts import log_bytes, pipeline_cpu_s, wire_measures
from streamtts.bench.bench_plan import WIRE_ARMS, WIRE_IDLE_S
from streamtts.bench.bench_state import Bench
from streamtts.bench.load_runs import Loads
from streamtts.bench.pipeline_up import pipeline_up
from streamtts.bench.worker_procs import Topology, UsageWindow, WorkerSet
from streamtts.bench.workloads import draw_mix


async def guarantees(bench: Bench) -> None:
    voice = bench.plan.voices[0]
    for guarantee in ("at_least_once", "exactly_once"):
        topo = Topology(1, bench.plan.threads, guarantee, warm_voices=(voice,))
        await _batch_on(bench, guarantee.replace("_", ""), topo, "guarantees", [voice])


async def scale_out(bench: Bench) -> None:
    # Same two cores either way: one process with 2 intra-op threads, or two with one each.
    # Both or neither: half a comparison says nothing.
    cost = 2 * (25 + sum(_batch_cost(bench, v) for v in bench.plan.voices))
    if not bench.fits("scale-out (both topologies)", cost):
        return
    for procs, threads in ((1, bench.plan.threads), (2, max(1, bench.plan.threads // 2))):
        topo = Topology(procs, threads, warm_voices=bench.plan.voices)
        await _batch_on(bench, f"scale{procs}x{threads}", topo, "scale_out", bench.plan.voices)


async def _batch_on(
    bench: Bench, label: str, topology: Topology, section: str, voices: Sequence[str]
) -> None:
    cost = 25 + sum(_batch_cost(bench, v) for v in voices)
    if not bench.fits(f"{section} {topology.label}", cost):
        return
    n = bench.plan.concurrency
    async with pipeline_up(bench, label, topology) as pipe:
        for voice in voices:
            await Loads(bench, pipe, section, voice).measure(
                f"{topology.label} c={n}",
                bench.overhead_items[voice],
                concurrency=n,
                duration_s=_batch_cost(bench, voice),
            )


def _batch_cost(bench: Bench, voice: str) -> float:
    return len(bench.overhead_items[voice]) * bench.per_item_s(voice) * 1.5 + 10


async def wire_formats(
    bench: Bench, arms: Sequence[tuple[str, str, str, bool]] = WIRE_ARMS, section: str = "wire"
) -> None:
    """The two wire formats side by side: the same texts, closed loop at capacity, one
    synthesize process with one intra-op thread per lane (so the render's thread CPU is all
    of inference). Per request: CPU of every process, inference CPU (the synthesize log's
    `cpu_ms`) and what is outside it; per audio second: bytes added to Kafka's log.

    Two more measures say where the CPU outside inference goes: each arm first measures
    the pipeline idle (its CPU per second with workers up and no request: polling,
    heartbeats, commits), and the last arm asks for `pcm` instead of mp3, so no stage runs
    an encoder (what any encoder work saves is bounded by the difference). The first two arms
    are mp3 encoded twice (the stored file encoded again from PCM) and once (the stored file
    is the streamed frames): `WIRE_ARMS`. `arms` may name an arm twice (`ENCODE_ARMS`): the
    report pools its rounds."""
    plan = bench.plan
    voice = plan.voices[0]
    n = 3 * bench.n_for(voice)
    items = draw_mix(bench.pools[voice], n, bench.rng)
    per_item = bench.per_item_s(voice)
    duration = n * per_item * 1.5 + 10
    if not bench.fits(f"{section} ({len(arms)} arms)", len(arms) * (30 + WIRE_IDLE_S + duration)):
        return
    for i, (arm, fmt, audio_format, streamed) in enumerate(arms, 1):
        topo = Topology(1, 1, warm_voices=(voice,), wire_format=fmt, store_streamed_frames=streamed)
        label = f"{section}{i}-{fmt}-{audio_format}-{'once' if streamed else 'twice'}"
        async with pipeline_up(bench, label, topo) as pipe:
            workers = pipe.workers
            idle = UsageWindow(bench.pids(workers)).start()
            await asyncio.sleep(WIRE_IDLE_S)  # the measure is time itself: nothing to await
            idle_cpu = pipeline_cpu_s(idle.stop()) / WIRE_IDLE_S
            cpu0 = workers.summed("synthesized.cpu_ms")
            spans0 = workers.counts("synthesized")
            bytes0 = log_bytes(bench.settings, pipe.prefix)
            run = await Loads(bench, pipe, section, voice).measure(
                f"{arm} c={plan.concurrency}",
                items,
                concurrency=plan.concurrency,
                duration_s=duration,
                # Every request sent must finish: an unfinished one's PCM is in the log
                # growth but not in the audio delivered (a slow engine's long answer
                # queued behind the others takes several times its own time).
                request_timeout_s=max(plan.drain_s + 30, 10 * per_item * plan.concurrency),
                audio_format=audio_format,
            )
            # Each span's log line is written before its audio leaves; the thread that
            # reads the log may still be a line behind: wait for every delivered span's.
            spans = sum(r.spans for r in run.records)
            await _until(partial(_spans_logged, workers, spans0 + spans), 5.0)
            inference_s = (workers.summed("synthesized.cpu_ms") - cpu0) / 1000
            grown = {t: b - bytes0.get(t, 0) for t, b in log_bytes(bench.settings, pipe.prefix).items()}
            rps = max(run.summary.throughput_rps, 1e-9)
            run.extra = wire_measures(run, inference_s, grown) | {
                "arm": arm,
                "round": i,
                "idle_cpu_ms_per_s": round(idle_cpu * 1000, 1),
                "idle_cpu_ms_per_request": round(idle_cpu * 1000 / rps, 1),
            }


def _spans_logged(workers: WorkerSet, at_least: int) -> bool:
    return workers.counts("synthesized") >= at_least


async def _until(ready: Callable[[], bool], timeout_s: float) -> bool:
    """Poll `ready` (a counter another thread advances) until it holds or time runs out."""
    deadline = time.monotonic() + timeout_s
    while not ready():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True
