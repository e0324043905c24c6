"""Worker processes on a single-use topic prefix: the topics made, the workers started, and
both gone again afterwards, whatever the load in between did (a scenario never sees another's
records, and repeated runs leave no topics behind)."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import random
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

from streamtts.bench.bench_facts import apply_bench_topics, drop_bench_topics
from streamtts.bench.loadgen import poisson_schedule
from streamtts.bench.worker_procs import Topology, WorkerSet
from streamtts.gateway.app import create_app
from streamtts.gateway.server import GatewayServer
from streamtts.gateway.settings import GatewaySettings, RateLimit
from streamtts.runtime.settings import Settings

BENCH_KEY = "bench-key"
"""The API key (tenant `bench`) a bench's client gives the gateway of `bench_gateway`."""


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


@dataclass(frozen=True)
class Scenario:
    """One voice × mode run of a side-by-side bench."""

    settings: Settings
    bench: str
    voice: str
    mode: str
    rate: float
    log_dir: Path
    drain_s: float
    threads: int

    @asynccontextmanager
    async def workers(self, env: Mapping[str, str]) -> AsyncIterator[tuple[str, WorkerSet]]:
        """`workers_on` for the scenario: one worker warm on the voice, its topics and logs named
        after the scenario. Yields the topic prefix and the workers."""
        prefix = f"bench{self.bench}{time.strftime('%H%M%S')}-{self.voice.replace('_', '')}-{self.mode}-"
        topology = Topology(1, self.threads, warm_voices=(self.voice,))
        log_dir = self.log_dir / f"{self.voice}-{self.mode}"
        async with workers_on(self.settings, prefix, topology, log_dir, env) as (workers, _):
            yield prefix, workers


@dataclass(frozen=True)
class ScenarioPlan:
    """A side-by-side bench: every mode of each voice on the same Poisson schedule (drawn from
    `seed` at the voice's rate for `duration_s`), the workers' logs under `out_dir`/logs, and up
    to `drain_s` after the last send for the stragglers."""

    voices: Sequence[str]
    rates: Mapping[str, float]
    duration_s: float
    seed: int
    out_dir: Path
    drain_s: float = 90.0
    threads: int = 2

    def schedule(self, voice: str) -> tuple[random.Random, list[float]]:
        """The voice's send times, and the generator they came from (for the voice's other draws)."""
        rng = random.Random(self.seed)
        return rng, poisson_schedule(self.rates[voice], self.duration_s, rng)

    def scenario(self, settings: Settings, bench: str, voice: str, mode: str) -> Scenario:
        return Scenario(
            settings, bench, voice, mode, self.rates[voice], self.out_dir / "logs", self.drain_s, self.threads
        )


@asynccontextmanager
async def gateway_on(
    settings: Settings, prefix: str, topology: Topology, log_dir: Path, gateway: GatewaySettings
) -> AsyncIterator[tuple[Settings, str]]:
    """`workers_on` with the render cache off (every reply rendered) and a gateway in this
    process in front of them: the pipeline's settings (on `prefix`) and the gateway's
    `/v1/stream` WebSocket URL."""
    pipeline = dataclasses.replace(settings, kafka=dataclasses.replace(settings.kafka, topic_prefix=prefix))
    async with workers_on(settings, prefix, topology, log_dir, {"STREAMTTS_RENDER_CACHE": "0"}):
        server = GatewayServer(create_app(gateway, pipeline))
        try:
            await server.start()
            yield pipeline, f"ws://127.0.0.1:{server.port}/v1/stream"
        finally:
            await server.stop()


@asynccontextmanager
async def bench_gateway(
    bench: str, threads: int, voices: Sequence[str], log_dir: Path, *, ws_sessions: int | None = None
) -> AsyncIterator[tuple[Settings, str]]:
    """`gateway_on` for a bench that talks to the gateway as a client: one worker warm on
    `voices`, topics named after the bench, and a gateway that admits `BENCH_KEY` at 100
    requests/s (and `ws_sessions` WebSocket sessions, if given, where the defaults are too few).
    Yields the pipeline's settings and the `/v1/stream` URL with the key."""
    prefix = f"bench{bench}{time.strftime('%H%M%S')}-"
    gateway = GatewaySettings(api_keys={BENCH_KEY: "bench"}, default_rate=RateLimit(per_s=100.0, burst=200.0))
    if ws_sessions is not None:
        gateway = dataclasses.replace(
            gateway, ws_max_sessions=ws_sessions, ws_max_sessions_per_tenant=ws_sessions
        )
    topology = Topology(1, threads, warm_voices=tuple(voices))
    async with gateway_on(Settings.from_env(), prefix, topology, log_dir, gateway) as (pipeline, stream_url):
        yield pipeline, f"{stream_url}?api_key={BENCH_KEY}"
