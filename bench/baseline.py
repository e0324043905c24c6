"""The in-process baseline: every voice's texts through the pipeline's stages in memory (no
broker), one at a time. The first pass also picks each voice's texts for the whole run."""

from __future__ import annotations

import gc
import os

from streamtts.bench.bench_facts import say
from streamtts.bench.bench_plan import LoadRun
from streamtts.bench.bench_state import Bench
from streamtts.bench.load_runs import progress_ms
from streamtts.bench.loadgen import Progress, progress_line
from streamtts.bench.stats import RequestRecord, summarize
from streamtts.bench.worker_procs import ProcUsage, UsageWindow
from streamtts.bench.workloads import draw_mix, load_texts, speakable
from streamtts.errors import ConfigError


async def direct_pass(bench: Bench, n: int, workload: str) -> None:
    """One in-process pass over every voice's texts. Two passes (before the first and after
    the last worker) are pooled: a noisy neighbour then hits the baseline about as much as
    it hits the pipeline runs in between."""
    from streamtts.bench.direct import DirectSynth

    plan = bench.plan
    say(f"baseline pass {n}: loading {', '.join(plan.voices)} in-process ({plan.threads} threads)")
    direct = DirectSynth(plan.threads, plan.voices)
    for voice in plan.voices:
        if voice not in bench.pools:
            spec = direct.registry.spec(voice)
            bench.voice_fast[voice] = spec.engine.startswith("piper")
            pool = speakable(load_texts(workload), spec.languages)
            if not pool:
                raise ConfigError(f"voice {voice} speaks none of the {workload} texts")
            bench.pools[voice] = pool
            bench.overhead_items[voice] = draw_mix(pool, bench.n_for(voice), bench.rng)
    for voice in plan.voices:
        label = progress_line(f"direct {voice} pass {n}")
        usage = UsageWindow({"bench": os.getpid()}).start()
        recs = await direct.run(bench.overhead_items[voice], voice, deadline=bench.deadline - 30, say=label)
        _add_direct(bench, "direct", voice, workload, recs, usage.stop(), label)
    primary = plan.voices[0]
    if plan.long_form_n and plan.pipeline and not plan.custom:
        paragraphs = speakable(load_texts("long_form"), direct.registry.spec(primary).languages)
        long_items = bench.overhead_items["long_form"] = paragraphs[: plan.long_form_n]
        if long_items:
            label = progress_line(f"direct long-form {primary} pass {n}")
            recs = await direct.run(long_items, primary, deadline=bench.deadline - 30)
            _add_direct(bench, "direct long-form", primary, "long_form", recs, {}, label)
    direct.close()
    del direct
    gc.collect()  # free the baseline's sessions before workers load theirs


def _add_direct(
    bench: Bench,
    name: str,
    voice: str,
    workload: str,
    recs: list[RequestRecord],
    usage: dict[str, ProcUsage],
    label: Progress,
) -> None:
    """Pool this pass into the run of its name: throughput over the passes' summed wall time."""
    one = summarize(recs)
    label(f"{one.throughput_rps:.2f} req/s, first chunk p50 {progress_ms(one.ttfa.p50)}, n={one.completed}")
    run = bench.result.run("direct", voice, name)
    if run is None:
        run = LoadRun(name, "direct", voice, workload, "in-process, sequential", "in-process", one)
        run.usage = usage
        bench.result.runs.append(run)
        run.summary.extra["passes_rps"] = []
        run.summary.extra["passes_wall_s"] = []
    passes = run.summary.extra
    run.records += recs
    run.summary = summarize(run.records, wall_s=sum(passes["passes_wall_s"]) + one.wall_s)
    run.summary.extra = passes
    passes["passes_rps"].append(round(one.throughput_rps, 3))
    passes["passes_wall_s"].append(round(one.wall_s, 3))
    run.mode = f"in-process, sequential, {len(passes['passes_rps'])} pass(es)"
