"""`streamtts bench`: the whole benchmark in one bounded run.

Order matters on a 2-core machine: the in-process baseline runs first, while no worker
exists, so it gets the cores to itself; then worker processes are started per scenario on a
fresh topic prefix (scenarios never see each other's records) and stopped afterwards.
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import math
import os
import random
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

from streamtts.bench.bench_facts import (
    apply_bench_topics,
    drop_bench_topics,
    infra_pids,
    log_bytes,
    machine,
    pipeline_cpu_s,
    say,
    wire_measures,
)
from streamtts.bench.bench_plan import (
    SUSTAIN_RATE,
    WIRE_ARMS,
    WIRE_IDLE_S,
    BenchResult,
    LoadRun,
    Plan,
)
from streamtts.bench.capacity import Step, round_rate, search
from streamtts.bench.loadgen import (
    PipelineClient,
    Progress,
    RequestShape,
    burst_schedule,
    closed_loop,
    open_loop,
    poisson_schedule,
    progress_line,
)
from streamtts.bench.stats import RequestRecord, summarize
from streamtts.bench.worker_procs import ProcUsage, Topology, UsageWindow, WorkerSet
from streamtts.bench.workloads import WorkItem, draw_mix, load_burst_profile, load_texts, speakable
from streamtts.errors import ConfigError, StreamTTSError
from streamtts.runtime.settings import KafkaSettings, Settings


def _snapshot(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    # Late results keep updating the live records; a run is judged as it stood at its deadline.
    return [dataclasses.replace(r) for r in records]


def _fmt_ms(s: float) -> str:
    return "-" if math.isnan(s) else f"{s * 1000:.0f} ms"


class Bench:
    def __init__(self, plan: Plan, out_dir: Path) -> None:
        self.plan = plan
        self.out = out_dir
        self.settings = Settings.from_env()
        self.rng = random.Random(plan.seed)
        self.t0 = time.monotonic()
        self.deadline = self.t0 + plan.budget_s
        self.stamp = time.strftime("%Y%m%d%H%M%S")
        self.result = BenchResult(plan, time.strftime("%Y-%m-%dT%H:%M:%S%z"), machine())
        self.pools: dict[str, list[WorkItem]] = {}
        self.overhead_items: dict[str, list[WorkItem]] = {}
        self.voice_fast: dict[str, bool] = {}
        self.infra_pids = infra_pids(self.settings)

    # -- helpers -------------------------------------------------------------------------

    def left_s(self) -> float:
        return self.deadline - time.monotonic()

    def fits(self, what: str, cost_s: float) -> bool:
        if self.left_s() >= cost_s:
            return True
        self.result.skipped.append(f"{what} (needs ~{cost_s:.0f} s, {max(self.left_s(), 0):.0f} s left)")
        say(f"skipping {what}: time budget")
        return False

    def kafka_for(self, prefix: str) -> KafkaSettings:
        return dataclasses.replace(self.settings.kafka, topic_prefix=prefix)

    def n_for(self, voice: str) -> int:
        return self.plan.fast_n if self.voice_fast[voice] else self.plan.slow_n

    # -- sections ------------------------------------------------------------------------

    async def run(self) -> BenchResult:
        await self._prepare_workloads_and_direct()
        if self.plan.custom:
            await self._custom()
        else:
            if self.plan.pipeline:
                await self._main_pipeline()
            if self.plan.guarantees:
                await self._guarantees()
            if self.plan.scale_out:
                await self._scale_out()
            if self.plan.wire:
                await self._wire()
            if self.plan.tail:
                from streamtts.bench.tail import tail_section

                await tail_section(self)
        if (self.plan.pipeline or self.plan.custom) and self.fits(
            "baseline pass 2", 40 if self.plan.quick else 90
        ):
            workload = self.plan.custom.workload if self.plan.custom else "customer_service"
            await self._direct_pass(2, workload)
        self.result.wall_s = time.monotonic() - self.t0
        return self.result

    async def _prepare_workloads_and_direct(self) -> None:
        """Pick each voice's texts, then time them in-process (no workers exist yet)."""
        workload = self.plan.custom.workload if self.plan.custom else "customer_service"
        await self._direct_pass(1, workload)

    async def _direct_pass(self, n: int, workload: str) -> None:
        """One in-process pass over every voice's texts. Two passes (before the first and after
        the last worker) are pooled: a noisy neighbour then hits the baseline about as much as
        it hits the pipeline runs in between."""
        from streamtts.bench.direct import DirectSynth

        plan = self.plan
        say(f"baseline pass {n}: loading {', '.join(plan.voices)} in-process ({plan.threads} threads)")
        direct = DirectSynth(plan.threads, plan.voices)
        for voice in plan.voices:
            if voice not in self.pools:
                spec = direct.registry.spec(voice)
                self.voice_fast[voice] = spec.engine.startswith("piper")
                pool = speakable(load_texts(workload), spec.languages)
                if not pool:
                    raise ConfigError(f"voice {voice} speaks none of the {workload} texts")
                self.pools[voice] = pool
                self.overhead_items[voice] = draw_mix(pool, self.n_for(voice), self.rng)
        for voice in plan.voices:
            label = progress_line(f"direct {voice} pass {n}")
            usage = UsageWindow({"bench": os.getpid()}).start()
            recs = await direct.run(self.overhead_items[voice], voice, deadline=self.deadline - 30, say=label)
            self._add_direct("direct", voice, workload, recs, usage.stop(), label)
        primary = plan.voices[0]
        if plan.long_form_n and plan.pipeline and not plan.custom:
            paragraphs = speakable(load_texts("long_form"), direct.registry.spec(primary).languages)
            long_items = self.overhead_items["long_form"] = paragraphs[: plan.long_form_n]
            if long_items:
                label = progress_line(f"direct long-form {primary} pass {n}")
                recs = await direct.run(long_items, primary, deadline=self.deadline - 30)
                self._add_direct("direct long-form", primary, "long_form", recs, {}, label)
        direct.close()
        del direct
        gc.collect()  # free the baseline's sessions before workers load theirs

    def _add_direct(
        self,
        name: str,
        voice: str,
        workload: str,
        recs: list[RequestRecord],
        usage: dict[str, ProcUsage],
        label: Progress,
    ) -> None:
        one = summarize(recs)
        label(f"{one.throughput_rps:.2f} req/s, first chunk p50 {_fmt_ms(one.ttfa.p50)}, n={one.completed}")
        run = self.result.run("direct", voice, name)
        if run is None:
            run = LoadRun(name, "direct", voice, workload, "in-process, sequential", "in-process", one)
            run.usage = usage
            self.result.runs.append(run)
            run.summary.extra["passes_rps"] = []
            run.summary.extra["passes_wall_s"] = []
        passes = run.summary.extra
        run.records += recs
        run.summary = summarize(run.records, wall_s=sum(passes["passes_wall_s"]) + one.wall_s)
        run.summary.extra = passes
        passes["passes_rps"].append(round(one.throughput_rps, 3))
        passes["passes_wall_s"].append(round(one.wall_s, 3))
        run.mode = f"in-process, sequential, {len(passes['passes_rps'])} pass(es)"

    async def _with_workers(
        self, label: str, topology: Topology, extra_env: dict[str, str] | None = None
    ) -> tuple[WorkerSet, PipelineClient, str]:
        prefix = f"bench{self.stamp}-{label}-"
        await apply_bench_topics(self.settings, prefix)
        # The render cache off: these sections compare the pipeline with direct synthesis of
        # the same texts, and repeated texts served from the cache (or from a shared tier a
        # previous run filled) measured the cache instead. `bench --cache` measures it.
        env = {
            **os.environ,
            "STREAMTTS_TOPIC_PREFIX": prefix,
            "STREAMTTS_RENDER_CACHE": "0",
            **(extra_env or {}),
        }
        logs = self.out / "logs" / label
        logs.mkdir(parents=True, exist_ok=True)
        workers = WorkerSet(topology, env, logs)
        say(f"{label}: starting workers {topology.label} (prefix {prefix})")
        took = await asyncio.to_thread(workers.start)
        self.result.worker_start_s[label] = round(took, 1)
        client = PipelineClient(self.kafka_for(prefix))
        try:
            await client.start()
            # Warm-up through the whole path: group joins, first encodes, first uploads.
            warm = [WorkItem("Warming up.", "en", "short")] * 6
            shapes = [
                RequestShape(topology.warm_voices[i % len(topology.warm_voices)]) for i in range(len(warm))
            ]
            recs = [await client.send(item, shape) for item, shape in zip(warm, shapes, strict=True)]
            missing = await client.wait_all(recs, 90)
            if missing:
                raise StreamTTSError(f"{label}: {missing} warm-up request(s) did not complete in 90 s")
        except BaseException:
            await client.stop()
            await asyncio.to_thread(workers.stop)
            raise
        say(f"{label}: workers ready in {took:.1f} s, warm-up done")
        return workers, client, prefix

    async def _close(self, workers: WorkerSet, client: PipelineClient, prefix: str) -> None:
        await client.stop()
        await asyncio.to_thread(workers.stop)
        await drop_bench_topics(self.settings, prefix)

    def _pids(self, workers: WorkerSet) -> dict[str, int]:
        return {**workers.pids, **self.infra_pids, "bench": os.getpid()}

    async def _measure(
        self,
        workers: WorkerSet,
        client: PipelineClient,
        *,
        name: str,
        section: str,
        voice: str,
        workload: str,
        items: Sequence[WorkItem],
        concurrency: int | None = None,
        schedule: Sequence[float] | None = None,
        offered: float | None = None,
        duration_s: float = 120.0,
        request_timeout_s: float | None = None,
        audio_format: str = "mp3",
    ) -> LoadRun:
        """One load run. `request_timeout_s` (closed loop): how long a client waits for its
        request before counting it lost (default: the drain time + 30 s)."""
        shape = RequestShape(voice, audio_format)
        label = progress_line(f"{name} {voice}")
        dlq_before = await client.dlq_counts()
        usage = UsageWindow(self._pids(workers)).start()
        if schedule is not None:
            mode = (
                f"open, Poisson {offered:g} req/s"
                if section != "burst"
                else f"open, burst (base {offered:g})"
            )
            recs = await open_loop(client, items, schedule, shape, drain_s=self.plan.drain_s, say=label)
        else:
            assert concurrency is not None
            mode = f"closed, {concurrency} client{'s' * (concurrency > 1)}"
            recs = await closed_loop(
                client,
                items,
                concurrency,
                shape,
                duration_s=duration_s,
                request_timeout_s=request_timeout_s or self.plan.drain_s + 30,
                say=label,
            )
        used = usage.stop()
        recs = _snapshot(recs)
        dlq_after = await client.dlq_counts()
        run = LoadRun(
            name,
            section,
            voice,
            workload,
            mode,
            workers.topology.label,
            summarize(recs),
            offered_rps=offered,
            usage=used,
            records=recs,
            dlq={k: dlq_after[k] - dlq_before.get(k, 0) for k in dlq_after},
        )
        s = run.summary
        label(
            f"{s.completed}/{s.sent} done, {s.throughput_rps:.2f} req/s, TTFA p50 {_fmt_ms(s.ttfa.p50)} "
            f"p99 {_fmt_ms(s.ttfa.p99)}, {s.lost} lost, {s.degraded} degraded, {run.dlq_total} DLQ"
        )
        self.result.runs.append(run)
        return run

    async def _overhead(self, workers: WorkerSet, client: PipelineClient, voice: str, section: str) -> None:
        """Same texts as the baseline: one at a time (added TTFA), then N in flight (throughput)."""
        items = self.overhead_items[voice]
        slow = not self.voice_fast[voice]
        direct = self.result.run("direct", voice)
        per_item = direct.summary.completion.mean if direct and direct.summary.completed else 1.0
        cost = len(items) * per_item * 2.5 + 10
        if not self.fits(f"{section} {voice}", cost):
            return
        await self._measure(
            workers,
            client,
            name="pipeline c=1",
            section=section,
            voice=voice,
            workload="customer_service",
            items=items,
            concurrency=1,
            duration_s=cost,
        )
        await self._measure(
            workers,
            client,
            name=f"pipeline c={self.plan.concurrency}",
            section=section,
            voice=voice,
            workload="customer_service",
            items=items,
            concurrency=self.plan.concurrency,
            duration_s=cost * (2 if slow else 1),
        )

    async def _open_loop(
        self,
        workers: WorkerSet,
        client: PipelineClient,
        name: str,
        section: str,
        workload: str,
        schedule: Sequence[float],
    ) -> LoadRun:
        """An open-loop load of the primary voice's mix sent on `schedule` (SUSTAIN_RATE on average)."""
        primary = self.plan.voices[0]
        return await self._measure(
            workers,
            client,
            name=name,
            section=section,
            voice=primary,
            workload=workload,
            schedule=schedule,
            offered=SUSTAIN_RATE,
            items=draw_mix(self.pools[primary], len(schedule), self.rng),
        )

    async def _main_pipeline(self) -> None:
        plan = self.plan
        primary = plan.voices[0]
        workers, client, prefix = await self._with_workers(
            "main", Topology(1, plan.threads, warm_voices=plan.voices)
        )
        try:
            for voice in plan.voices:
                await self._overhead(workers, client, voice, "overhead")
            # 100k requests/day of customer-service traffic, open loop.
            if self.fits("sustained load", plan.sustain_s + plan.drain_s):
                schedule = poisson_schedule(SUSTAIN_RATE, plan.sustain_s, self.rng)
                await self._open_loop(
                    workers,
                    client,
                    f"sustained {SUSTAIN_RATE:g} req/s",
                    "sustained",
                    "customer_service",
                    schedule,
                )
            phases = [
                dataclasses.replace(p, duration_s=p.duration_s * plan.burst_scale)
                for p in load_burst_profile()
            ]
            burst_s = sum(p.duration_s for p in phases)
            if self.fits("burst", burst_s + plan.drain_s):
                schedule = burst_schedule(SUSTAIN_RATE, phases, self.rng)
                await self._open_loop(workers, client, "burst", "burst", "burst", schedule)
            paragraphs = self.overhead_items.get("long_form", [])
            if paragraphs and self.fits("long-form", 30):
                await self._measure(
                    workers,
                    client,
                    name="long-form c=1",
                    section="long_form",
                    voice=primary,
                    workload="long_form",
                    items=paragraphs,
                    concurrency=1,
                    duration_s=60,
                )
            for voice in plan.voices:
                await self._capacity(workers, client, voice)
        finally:
            await self._close(workers, client, prefix)

    async def _capacity(self, workers: WorkerSet, client: PipelineClient, voice: str) -> None:
        plan = self.plan
        step_s = plan.fast_step_s if self.voice_fast[voice] else plan.slow_step_s
        direct = self.result.run("direct", voice)
        start = 0.5 * direct.summary.throughput_rps if direct and direct.summary.throughput_rps else 0.5
        label = progress_line(f"capacity {voice}")

        def duration(rate: float) -> float:
            # Enough arrivals to say something about P99, but a bounded step.
            return min(max(step_s, plan.min_arrivals / rate), plan.max_step_s)

        async def measure(rate: float) -> Step:
            schedule = poisson_schedule(rate, duration(rate), self.rng)
            items = draw_mix(self.pools[voice], len(schedule), self.rng)
            usage = UsageWindow(self._pids(workers)).start()
            recs = await open_loop(client, items, schedule, RequestShape(voice), drain_s=plan.drain_s)
            used = usage.stop()
            snap = _snapshot(recs)
            summary = summarize(snap)
            # A failed step leaves a queue behind: let it finish before the next rate.
            backlog = await client.wait_all(recs, plan.drain_s) if summary.lost else 0
            self.result.runs.append(
                LoadRun(
                    f"capacity {rate:g} req/s",
                    "capacity",
                    voice,
                    "customer_service",
                    f"open, Poisson {rate:g} req/s",
                    workers.topology.label,
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

        if not self.fits(f"capacity {voice}", step_s + plan.drain_s):
            return
        cap = await search(
            voice,
            measure,
            round_rate(start),
            max_steps=plan.max_steps,
            deadline=self.deadline,
            step_cost_s=lambda r: duration(r) + 10,
            min_rate=plan.min_arrivals / plan.max_step_s,
            on_step=on_step,
        )
        if cap.stopped:
            label(f"stopped: {cap.stopped}")
        label(f"capacity {cap.rate:g} req/s")
        self.result.capacity.append(cap)

    async def _batch_on(self, label: str, topology: Topology, section: str, voices: Sequence[str]) -> None:
        cost = 25 + sum(self._batch_cost(v) for v in voices)
        if not self.fits(f"{section} {topology.label}", cost):
            return
        workers, client, prefix = await self._with_workers(label, topology)
        try:
            for voice in voices:
                await self._measure(
                    workers,
                    client,
                    name=f"{topology.label} c={self.plan.concurrency}",
                    section=section,
                    voice=voice,
                    workload="customer_service",
                    items=self.overhead_items[voice],
                    concurrency=self.plan.concurrency,
                    duration_s=self._batch_cost(voice),
                )
        finally:
            await self._close(workers, client, prefix)

    def _batch_cost(self, voice: str) -> float:
        direct = self.result.run("direct", voice)
        per_item = direct.summary.completion.mean if direct and direct.summary.completed else 1.0
        return len(self.overhead_items[voice]) * per_item * 1.5 + 10

    async def _guarantees(self) -> None:
        voice = self.plan.voices[0]
        for guarantee in ("at_least_once", "exactly_once"):
            topo = Topology(1, self.plan.threads, guarantee, warm_voices=(voice,))
            await self._batch_on(guarantee.replace("_", ""), topo, "guarantees", [voice])

    async def _scale_out(self) -> None:
        # Same two cores either way: one process with 2 intra-op threads, or two with one each.
        # Both or neither: half a comparison says nothing.
        cost = 2 * (25 + sum(self._batch_cost(v) for v in self.plan.voices))
        if not self.fits("scale-out (both topologies)", cost):
            return
        for procs, threads in ((1, self.plan.threads), (2, max(1, self.plan.threads // 2))):
            topo = Topology(procs, threads, warm_voices=self.plan.voices)
            await self._batch_on(f"scale{procs}x{threads}", topo, "scale_out", self.plan.voices)

    async def _wire(self) -> None:
        """The two wire formats side by side: the same texts, closed loop at capacity, one
        synthesize process with one intra-op thread per lane (so the render's thread CPU is all
        of inference). Per request: CPU of every process, inference CPU (the synthesize log's
        `cpu_ms`) and what is outside it; per audio second: bytes added to Kafka's log.

        Two more measures say where the CPU outside inference goes: each arm first measures
        the pipeline idle (its CPU per second with workers up and no request: polling,
        heartbeats, commits), and a third arm asks for `pcm` instead of mp3, so no stage runs
        an encoder (what any encoder work saves is bounded by the difference)."""
        voice = self.plan.voices[0]
        n = 3 * self.n_for(voice)
        items = draw_mix(self.pools[voice], n, self.rng)
        direct = self.result.run("direct", voice)
        per_item = direct.summary.completion.mean if direct and direct.summary.completed else 1.0
        duration = n * per_item * 1.5 + 10
        if not self.fits("wire formats (three arms)", len(WIRE_ARMS) * (30 + WIRE_IDLE_S + duration)):
            return
        for fmt, audio_format in WIRE_ARMS:
            topo = Topology(1, 1, warm_voices=(voice,), wire_format=fmt)
            arm = fmt if audio_format == "mp3" else f"{fmt} {audio_format}"
            workers, client, prefix = await self._with_workers(f"wire-{fmt}-{audio_format}", topo)
            try:
                idle = UsageWindow(self._pids(workers)).start()
                await asyncio.sleep(WIRE_IDLE_S)  # the measure is time itself: nothing to await
                idle_cpu = pipeline_cpu_s(idle.stop()) / WIRE_IDLE_S
                cpu0 = workers.summed("synthesized.cpu_ms")
                spans0 = workers.counts("synthesized")
                bytes0 = log_bytes(self.settings, prefix)
                run = await self._measure(
                    workers,
                    client,
                    name=f"{arm} c={self.plan.concurrency}",
                    section="wire",
                    voice=voice,
                    workload="customer_service",
                    items=items,
                    concurrency=self.plan.concurrency,
                    duration_s=duration,
                    # Every request sent must finish: an unfinished one's PCM is in the log
                    # growth but not in the audio delivered (a slow engine's long answer
                    # queued behind the others takes several times its own time).
                    request_timeout_s=max(self.plan.drain_s + 30, 10 * per_item * self.plan.concurrency),
                    audio_format=audio_format,
                )
                # Each span's log line is written before its audio leaves; the thread that
                # reads the log may still be a line behind: wait for every delivered span's.
                spans = sum(r.spans for r in run.records)
                await _until(partial(_spans_logged, workers, spans0 + spans), 5.0)
                inference_s = (workers.summed("synthesized.cpu_ms") - cpu0) / 1000
                grown = {t: b - bytes0.get(t, 0) for t, b in log_bytes(self.settings, prefix).items()}
                rps = max(run.summary.throughput_rps, 1e-9)
                run.extra = wire_measures(run, inference_s, grown) | {
                    "arm": arm,
                    "idle_cpu_ms_per_s": round(idle_cpu * 1000, 1),
                    "idle_cpu_ms_per_request": round(idle_cpu * 1000 / rps, 1),
                }
            finally:
                await self._close(workers, client, prefix)

    async def _custom(self) -> None:
        c = self.plan.custom
        assert c is not None
        voice = self.plan.voices[0]
        workers, client, prefix = await self._with_workers(
            "custom", Topology(1, self.plan.threads, warm_voices=(voice,))
        )
        try:
            await self._overhead(workers, client, voice, "overhead")
            if c.rate:
                if c.workload == "burst":
                    schedule = burst_schedule(c.rate, load_burst_profile(), self.rng)
                else:
                    schedule = poisson_schedule(c.rate, c.duration_s, self.rng)
                await self._measure(
                    workers,
                    client,
                    name="custom",
                    section="burst" if c.workload == "burst" else "custom",
                    voice=voice,
                    workload=c.workload,
                    schedule=schedule,
                    offered=c.rate,
                    items=draw_mix(self.pools[voice], len(schedule), self.rng),
                )
            else:
                n = max(1, int(c.duration_s * 5))  # more than can finish: the duration bounds it
                await self._measure(
                    workers,
                    client,
                    name="custom",
                    section="custom",
                    voice=voice,
                    workload=c.workload,
                    items=draw_mix(self.pools[voice], n, self.rng),
                    concurrency=c.concurrency,
                    duration_s=c.duration_s,
                )
        finally:
            await self._close(workers, client, prefix)


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


def run_bench(plan: Plan, out_dir: Path) -> BenchResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(Bench(plan, out_dir).run())
