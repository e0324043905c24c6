"""One load run on a pipeline, open or closed loop: its records as they stood at the deadline,
summarized with the processes' CPU and the dead letters it caused, added to the result."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass

from streamtts.bench.bench_plan import LoadRun
from streamtts.bench.bench_state import Bench
from streamtts.bench.loadgen import RequestShape, closed_loop, open_loop, progress_line
from streamtts.bench.pipeline_up import Pipeline
from streamtts.bench.stats import RequestRecord, summarize
from streamtts.bench.worker_procs import UsageWindow
from streamtts.bench.workloads import WorkItem


def snapshot(records: Sequence[RequestRecord]) -> list[RequestRecord]:
    # Late results keep updating the live records; a run is judged as it stood at its deadline.
    return [dataclasses.replace(r) for r in records]


def progress_ms(s: float) -> str:
    return "-" if math.isnan(s) else f"{s * 1000:.0f} ms"


@dataclass(frozen=True)
class Loads:
    """The load runs of one voice in one section on one pipeline."""

    bench: Bench
    pipe: Pipeline
    section: str
    voice: str
    workload: str = "customer_service"

    async def measure(
        self,
        name: str,
        items: Sequence[WorkItem],
        *,
        concurrency: int | None = None,
        schedule: Sequence[float] | None = None,
        offered: float | None = None,
        duration_s: float = 120.0,
        request_timeout_s: float | None = None,
        audio_format: str = "mp3",
    ) -> LoadRun:
        """Open loop on `schedule` (`offered` req/s), else closed with `concurrency` clients.
        `request_timeout_s` (closed loop): how long a client waits for its request before
        counting it lost (default: the drain time + 30 s)."""
        bench, client = self.bench, self.pipe.client
        shape = RequestShape(self.voice, audio_format)
        label = progress_line(f"{name} {self.voice}")
        dlq_before = await client.dlq_counts()
        usage = UsageWindow(bench.pids(self.pipe.workers)).start()
        if schedule is not None:
            mode = (
                f"open, Poisson {offered:g} req/s"
                if self.section != "burst"
                else f"open, burst (base {offered:g})"
            )
            recs = await open_loop(client, items, schedule, shape, drain_s=bench.plan.drain_s, say=label)
        else:
            assert concurrency is not None
            mode = f"closed, {concurrency} client{'s' * (concurrency > 1)}"
            recs = await closed_loop(
                client,
                items,
                concurrency,
                shape,
                duration_s=duration_s,
                request_timeout_s=request_timeout_s or bench.plan.drain_s + 30,
                say=label,
            )
        used = usage.stop()
        recs = snapshot(recs)
        dlq_after = await client.dlq_counts()
        run = LoadRun(
            name,
            self.section,
            self.voice,
            self.workload,
            mode,
            self.pipe.workers.topology.label,
            summarize(recs),
            offered_rps=offered,
            usage=used,
            records=recs,
            dlq={k: dlq_after[k] - dlq_before.get(k, 0) for k in dlq_after},
        )
        s = run.summary
        label(
            f"{s.completed}/{s.sent} done, {s.throughput_rps:.2f} req/s, TTFA p50 {progress_ms(s.ttfa.p50)} "
            f"p99 {progress_ms(s.ttfa.p99)}, {s.lost} lost, {s.degraded} degraded, {run.dlq_total} DLQ"
        )
        bench.result.runs.append(run)
        return run
