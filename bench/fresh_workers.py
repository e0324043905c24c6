"""Worker processes on a single-use topic prefix: the topics made, the workers started, and
both gone again afterwards, whatever the load in between did (a scenario never sees another's
records, and repeated runs leave no topics behind)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path

from streamtts.bench.bench_facts import apply_bench_topics, drop_bench_topics
from streamtts.bench.worker_procs import Topology, WorkerSet
from streamtts.runtime.settings import Settings


@asynccontextmanager
async def workers_on(
    settings: Settings,
    prefix: str,
    topology: Topology,
    log_dir: Path,
    env: Mapping[str, str],
) -> AsyncIterator[tuple[WorkerSet, float]]:
    """The started workers (their environment: this one, the prefix, then `env`) and the
    seconds they took to start."""
    await apply_bench_topics(settings, prefix)
    await asyncio.to_thread(log_dir.mkdir, parents=True, exist_ok=True)
    workers = WorkerSet(topology, {**os.environ, "STREAMTTS_TOPIC_PREFIX": prefix, **env}, log_dir)
    took = await asyncio.to_thread(workers.start)
    try:
        yield workers, took
    finally:
        await asyncio.to_thread(workers.stop)
        await drop_bench_topics(settings, prefix)
