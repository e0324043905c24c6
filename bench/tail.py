"""`streamtts bench --tail`: first audio against load, the old scheduler and the new side by side.

For each voice (engine), on the customer-service mix with the render cache off, each
scheduler gets fresh workers and, in order:

1. idle: one request at a time — the first-audio p50 every ratio is taken against;
2. saturation: closed loop, 4 clients — the most the worker completes per second;
3. open-loop Poisson at 20 %, 50 % and 80 % of the *first* scheduler's saturation, so both
   schedulers see the same arrival times and the same texts at the same absolute rates.

The synthesize log lines are summed meanwhile (`worker_procs.SUMMED`): preemptions and the
compute they threw away, so the cost of preemption is measured where it happens.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from streamtts.bench.load_runs import Loads
from streamtts.bench.loadgen import poisson_schedule
from streamtts.bench.pipeline_up import pipeline_up
from streamtts.bench.tables import markdown_table
from streamtts.bench.worker_procs import Topology
from streamtts.bench.workloads import WorkItem, draw_mix

if TYPE_CHECKING:
    from streamtts.bench.bench_plan import LoadRun
    from streamtts.bench.bench_state import Bench


@dataclass(frozen=True)
class SchedulerSetup:
    label: str
    scheduler: str
    threads: int
    """Intra-op threads per model run."""
    lanes: int = 0
    """Lanes (0: the setting's default, one per core ÷ threads)."""
    first_lanes: int = 0
    """Lanes for first spans only, on top (-1: one per lane; bulk model calls then run nicer)."""
    encode_lookahead: int = 16
    """PCM records the encode stage reads ahead so first chunks overtake (0: one at a time)."""
    sink_alone: bool = False
    """The sink in its own process (not beside the segment and encode stages)."""
    sink_nice: int = 0
    """That process's nice."""


SCHEDULERS: tuple[SchedulerSetup, ...] = (
    # Before: one span at a time on both cores, the encode stage one record at a time.
    SchedulerSetup("fifo", "fifo", 2, encode_lookahead=0),
    # Two lanes of one thread, first spans queued first.
    SchedulerSetup("lanes2x1", "lanes", 1, 2, encode_lookahead=0),
    # ... and two lanes for first spans only, bulk model calls niced; encode one at a time.
    SchedulerSetup("lanes2x1-first2-encode1", "lanes", 1, 2, first_lanes=2, encode_lookahead=0),
    # ... and first chunks overtaking at the encode stage: the defaults on 2 cores.
    SchedulerSetup("lanes2x1-first2", "lanes", 1, 2, first_lanes=2),
)
"""The first is the baseline whose saturation sets the offered loads."""
TOPOLOGY_SETUPS: tuple[SchedulerSetup, ...] = (
    # The defaults with the sink in a process of its own: a deployment choice, run when named.
    SchedulerSetup("lanes2x1-first2-sink1", "lanes", 1, 2, first_lanes=2, sink_alone=True),
    # ... and that process at nice 10: its file encodes and uploads yield to first audio.
    SchedulerSetup(
        "lanes2x1-first2-sink1-nice10", "lanes", 1, 2, first_lanes=2, sink_alone=True, sink_nice=10
    ),
)
LOADS: tuple[float, ...] = (0.2, 0.5, 0.8)
"""Offered load as a share of the first scheduler's saturation throughput."""


@dataclass(frozen=True)
class TailSizes:
    idle_n: int
    saturation_s: float
    load_n: int
    """Requests per open-loop load (the schedule's length is `load_n / rate`)."""
    loads: tuple[float, ...] = LOADS


def sizes(quick: bool, fast: bool) -> TailSizes:
    """Enough requests for a p99 that means something in a full run; a smoke test with --quick.
    A slow engine (Kokoro, ~0.23 req/s on 2 cores) gets fewer, and only the 50 and 80 % loads
    the targets name: 30 requests at 50 % of its saturation are already ~4.5 minutes."""
    if fast:
        return TailSizes(12, 20, 40) if quick else TailSizes(24, 40, 120)
    # Quick on a slow engine: 20 % alone would take ~5 minutes per scheduler; 50 and 80 % are
    # what the targets name.
    # Full: 20 % of a slow engine's saturation is ~11 minutes per setup for 30 requests.
    return TailSizes(4, 60, 8, (0.5, 0.8)) if quick else TailSizes(8, 150, 30, (0.5, 0.8))


def setups(labels: Sequence[str]) -> tuple[SchedulerSetup, ...]:
    """The named setups in the order named (the first is the baseline whose saturation sets
    the loads, and they run in that order: naming them the other way round as well shows
    what the order itself does: later setups saturated 8-13 % higher); every scheduler when
    none are named. Raises ValueError on an unknown or repeated label."""
    by_label = {setup.label: setup for setup in SCHEDULERS + TOPOLOGY_SETUPS}
    unknown = [label for label in labels if label not in by_label]
    if unknown:
        raise ValueError(f"unknown --tail-setups {','.join(unknown)}; known: {','.join(sorted(by_label))}")
    if len(set(labels)) != len(labels):
        raise ValueError(f"--tail-setups names a setup twice: {','.join(labels)}")
    return tuple(by_label[label] for label in labels) if labels else SCHEDULERS


async def tail_section(bench: Bench) -> None:
    for voice in bench.plan.voices:
        await _one_engine(bench, voice)


async def _one_engine(bench: Bench, voice: str) -> None:
    fast = bench.voice_fast[voice]
    size = sizes(bench.plan.quick, fast)
    if bench.plan.tail_requests:
        size = replace(size, load_n=bench.plan.tail_requests)
    if bench.plan.tail_loads:
        size = replace(size, loads=bench.plan.tail_loads)
    pool = bench.pools[voice]
    rng = random.Random(bench.plan.seed)  # the same texts and arrivals for every scheduler
    idle_items = draw_mix(pool, size.idle_n, rng)
    saturation_items = draw_mix(pool, 400, rng)  # more than a closed loop finishes in time
    loads: list[tuple[float, float, list[float], list[WorkItem]]] | None = None
    for setup in setups(bench.plan.tail_setups):
        scheduler = setup.label
        label = f"tail-{voice}-{scheduler}"
        topology = Topology(
            1, setup.threads, warm_voices=(voice,), sink_alone=setup.sink_alone, sink_nice=setup.sink_nice
        )
        env = {
            "STREAMTTS_SYNTH_SCHEDULER": setup.scheduler,
            "STREAMTTS_SYNTH_LANES": str(setup.lanes),
            "STREAMTTS_SYNTH_FIRST_LANES": str(setup.first_lanes),
            "STREAMTTS_ENCODE_LOOKAHEAD": str(setup.encode_lookahead),
        }
        async with pipeline_up(bench, label, topology, env) as pipe:
            workers = pipe.workers
            tail_runs = Loads(bench, pipe, "tail", voice)
            before = _lane_sums(workers)
            idle = await tail_runs.measure(f"{scheduler} idle", idle_items, concurrency=1, duration_s=600)
            saturation = await tail_runs.measure(
                f"{scheduler} saturation", saturation_items, concurrency=4, duration_s=size.saturation_s
            )
            if loads is None:  # from the first scheduler: both are offered the same rates
                sat = saturation.summary.throughput_rps
                loads = []
                for share in size.loads:
                    rate = round(sat * share, 4)
                    schedule = poisson_schedule(rate, size.load_n / rate, rng) if rate > 0 else []
                    loads.append((share, rate, schedule, draw_mix(pool, len(schedule), rng)))
            for share, rate, schedule, items in loads:
                if not schedule or not bench.fits(f"tail {voice} {scheduler} {share:.0%}", schedule[-1] + 60):
                    continue
                run = await tail_runs.measure(
                    f"{scheduler} {share:.0%}", items, schedule=schedule, offered=rate
                )
                run.extra = {"scheduler": scheduler, "load": share}
            after = _lane_sums(workers)
            for run in (idle, saturation):
                run.extra = {"scheduler": scheduler, "load": run.name.split()[-1]}
            saturation.extra["lanes"] = {k: round(after[k] - before[k], 1) for k in after}


def _lane_sums(workers: Any) -> dict[str, float]:
    return {
        "preemptions": workers.summed("synthesized.preemptions"),
        "wasted_ms": workers.summed("synthesized.wasted_ms"),
        "lane_run_ms": workers.summed("synthesized.lane_run_ms"),
    }


# -- the report ---------------------------------------------------------------------------------


def tail_rows(runs: Sequence[LoadRun]) -> dict[str, dict[str, dict[str, LoadRun]]]:
    """voice → scheduler → load name ("idle", "saturation", "20%", …) → run."""
    out: dict[str, dict[str, dict[str, LoadRun]]] = {}
    for run in runs:
        if run.section != "tail" or not run.extra:
            continue
        scheduler = str(run.extra["scheduler"])
        load = run.name.split()[-1]
        out.setdefault(run.voice, {}).setdefault(scheduler, {})[load] = run
    return out


def tail_markdown(runs: Sequence[LoadRun]) -> list[str]:
    """One table per voice: saturation, idle p50, and first audio at each load, both schedulers."""
    rows_by_voice = tail_rows(runs)
    if not rows_by_voice:
        return []
    lines = [
        "",
        "## First audio against load (`--tail`): the baseline (the first setup run) against the others",
        "",
        "Customer-service mix, render cache off. Loads are shares of the baseline's saturation, the",
        "same arrival times and texts for every setup, run in the order of the table. Ratios: p99",
        "first audio / the setup's own idle p50, and / the baseline's idle p50.",
    ]
    for voice, by_scheduler in rows_by_voice.items():
        header = ["scheduler", "saturation req/s", "idle p50 ms"]
        names = {name for by_load in by_scheduler.values() for name in by_load}
        loads = sorted((n for n in names if n.endswith("%")), key=lambda n: float(n[:-1]))
        baseline = next(iter(by_scheduler))
        header += [f"{load}: rate, p50/p99 ms (p99 ÷ own, ÷ {baseline} idle p50), lost" for load in loads]
        header += ["preemptions, wasted compute (whole setup)"]
        table = []
        base = next(iter(by_scheduler.values())).get("idle")
        base_p50 = base.summary.ttfa.p50 if base and not math.isnan(base.summary.ttfa.p50) else None
        for scheduler, by_load in by_scheduler.items():
            idle = by_load.get("idle")
            sat = by_load.get("saturation")
            idle_p50 = idle.summary.ttfa.p50 if idle and not math.isnan(idle.summary.ttfa.p50) else None
            cells = [
                scheduler,
                f"{sat.summary.throughput_rps:.3f}" if sat else "-",
                f"{idle_p50 * 1000:.0f}" if idle_p50 else "-",
            ]
            for load in loads:
                run = by_load.get(load)
                if run is None or math.isnan(run.summary.ttfa.p99):
                    cells.append("-")
                    continue
                t = run.summary.ttfa
                ratio = f" ({t.p99 / idle_p50:.1f}×" if idle_p50 else " (-"
                ratio += f", {t.p99 / base_p50:.1f}×)" if base_p50 else ")"
                cells.append(
                    f"{run.offered_rps:g}/s, {t.p50 * 1000:.0f}/{t.p99 * 1000:.0f}{ratio}, {run.summary.lost}"
                )
            lanes = sat.extra.get("lanes", {}) if sat else {}
            run_ms = lanes.get("lane_run_ms", 0.0)
            wasted = lanes.get("wasted_ms", 0.0)
            cells.append(
                f"{lanes.get('preemptions', 0):.0f}, {wasted / run_ms:.1%} of lane time" if run_ms else "-"
            )
            table.append(cells)
        lines += ["", f"**{voice}**", ""]
        lines += markdown_table(header, table)
    return lines


def plot_tail(runs: Sequence[LoadRun], ax_for: Any) -> bool:
    """First-audio p50 and p99 against utilization, per voice and scheduler, on the axes that
    `ax_for(voice)` gives. Returns whether anything was drawn."""
    drew = False
    for voice, by_scheduler in tail_rows(runs).items():
        ax = ax_for(voice)
        for scheduler, by_load in by_scheduler.items():
            xs, p50, p99 = [], [], []
            # Idle (one request at a time) is drawn at 0 %: the floor every ratio is taken against.
            shares = sorted((float(name[:-1]), name) for name in by_load if name.endswith("%"))
            points = [("idle", 0.0), *((name, x) for x, name in shares)]
            for name, x in points:
                run = by_load.get(name)
                if run is None or math.isnan(run.summary.ttfa.p99):
                    continue
                xs.append(x)
                p50.append(run.summary.ttfa.p50)
                p99.append(run.summary.ttfa.p99)
            if xs:
                ax.plot(xs, p99, marker="o", label=f"{scheduler} p99")
                ax.plot(xs, p50, marker=".", linestyle="--", label=f"{scheduler} p50")
                drew = True
        ax.set_title(f"{voice}: first audio vs load")
        ax.set_xlabel("offered load, % of the baseline's saturation (0: idle, one at a time)")
        ax.set_ylabel("seconds")
        ax.legend()
    return drew
