"""The pipeline a bench section loads: workers on fresh topics, warmed up through the whole
path, and the client that sends to it and hears its outputs."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass

from streamtts.bench.bench_facts import say
from streamtts.bench.bench_state import Bench
from streamtts.bench.fresh_workers import workers_on
from streamtts.bench.loadgen import PipelineClient, RequestShape
from streamtts.bench.worker_procs import Topology, WorkerSet
from streamtts.bench.workloads import WorkItem
from streamtts.errors import StreamTTSError

WARM_UP_S = 90


@dataclass(frozen=True)
class Pipeline:
    workers: WorkerSet
    client: PipelineClient
    prefix: str


@asynccontextmanager
async def pipeline_up(
    bench: Bench, label: str, topology: Topology, extra_env: Mapping[str, str] | None = None
) -> AsyncIterator[Pipeline]:
    prefix = f"bench{bench.stamp}-{label}-"
    # The render cache off: these sections compare the pipeline with direct synthesis of
    # the same texts, and repeated texts served from the cache (or from a shared tier a
    # previous run filled) measured the cache instead. `bench --cache` measures it.
    env = {"STREAMTTS_RENDER_CACHE": "0", **(extra_env or {})}
    say(f"{label}: starting workers {topology.label} (prefix {prefix})")
    async with workers_on(bench.settings, prefix, topology, bench.out / "logs" / label, env) as (
        workers,
        took,
    ):
        bench.result.worker_start_s[label] = round(took, 1)
        client = PipelineClient(bench.kafka_for(prefix))
        try:
            await client.start()
            await _warm_up(client, label, topology.warm_voices)
            say(f"{label}: workers ready in {took:.1f} s, warm-up done")
            yield Pipeline(workers, client, prefix)
        finally:
            await client.stop()


async def _warm_up(client: PipelineClient, label: str, voices: tuple[str, ...]) -> None:
    """Requests through the whole path: group joins, first encodes, first uploads."""
    warm = [WorkItem("Warming up.", "en", "short")] * 6
    shapes = [RequestShape(voices[i % len(voices)]) for i in range(len(warm))]
    recs = [await client.send(item, shape) for item, shape in zip(warm, shapes, strict=True)]
    missing = await client.wait_all(recs, WARM_UP_S)
    if missing:
        raise StreamTTSError(f"{label}: {missing} warm-up request(s) did not complete in {WARM_UP_S} s")
