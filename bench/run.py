"""`streamtts bench`: the whole benchmark in one bounded run.

Order matters on a 2-core machine: the in-process baseline runs first, while no worker
exists, so it gets the cores to itself; then worker processes are started per scenario on a
fresh topic prefix (scenarios never see each other's records) and stopped afterwards.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from streamtts.bench.baseline import direct_pass
from streamtts.bench.bench_plan import ENCODE_ARMS, BenchResult, Plan
from streamtts.bench.bench_state import Bench
from streamtts.bench.pipeline_sections import custom, main_pipeline
from streamtts.bench.side_by_side import guarantees, scale_out, wire_formats
from streamtts.bench.tracing_bench import tracing_cost


async def _run(bench: Bench) -> BenchResult:
    plan = bench.plan
    workload = plan.custom.workload if plan.custom else "customer_service"
    await direct_pass(bench, 1, workload)  # picks each voice's texts; no workers exist yet
    if plan.custom:
        await custom(bench)
    else:
        if plan.pipeline:
            await main_pipeline(bench)
        if plan.guarantees:
            await guarantees(bench)
        if plan.scale_out:
            await scale_out(bench)
        if plan.wire:
            await wire_formats(bench)
        if plan.encode:
            await wire_formats(bench, ENCODE_ARMS, section="encode")
        if plan.tracing:
            await tracing_cost(bench)
        if plan.tail:
            from streamtts.bench.tail import tail_section

            await tail_section(bench)
    if (plan.pipeline or plan.custom) and bench.fits("baseline pass 2", 40 if plan.quick else 90):
        await direct_pass(bench, 2, workload)
    bench.result.wall_s = time.monotonic() - bench.t0
    return bench.result


def run_bench(plan: Plan, out_dir: Path) -> BenchResult:
    out_dir.mkdir(parents=True, exist_ok=True)
    return asyncio.run(_run(Bench(plan, out_dir)))
