"""A bench run's plan (what to measure, how long, which voices) and its results (each load
run's summary, usage and records; the capacity search)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from streamtts.bench.capacity import Capacity
from streamtts.bench.stats import RequestRecord, Summary
from streamtts.bench.worker_procs import ProcUsage

SUSTAIN_RATE = 1.2
"""100 000 requests/day ≈ 1.16 req/s."""
WIRE_ARMS = (
    ("two encodes", "cloudevents", "mp3", False),
    ("one encode", "cloudevents", "mp3", True),
    ("v1, one encode", "v1", "mp3", True),
    ("no encoder", "cloudevents", "pcm", True),
)
"""The wire section's arms (name, wire format, requested audio format, whether the sink stores
the streamed frames), the first the baseline: mp3 encoded twice (chunks, then the file, as
before one encode per request), once, once with the v1 wire format, and pcm, which runs no
encoder anywhere (its difference to mp3 bounds what encoder work can save)."""
ENCODE_ARMS = (WIRE_ARMS[0], WIRE_ARMS[1], WIRE_ARMS[1], WIRE_ARMS[0])
"""`--sections encode`: mp3 encoded twice vs once only, in the order twice, once, once, twice
(ABBA), each arm's two rounds pooled: a drift over the run (the broker warming up, a
neighbour) falls on both arms alike instead of on whichever ran second."""
WIRE_IDLE_S = 15.0
"""Seconds each wire arm measures the pipeline idle before its load."""


@dataclass(frozen=True)
class CustomLoad:
    """One user-chosen load instead of the suite (`--rate` / `--concurrency` / `--workload`)."""

    workload: str
    rate: float | None
    concurrency: int
    duration_s: float


@dataclass(frozen=True)
class Plan:
    quick: bool
    voices: tuple[str, ...]
    """First = primary voice (sustained load, burst, long-form, guarantees)."""
    threads: int
    concurrency: int
    fast_n: int
    """Texts per overhead run for a fast engine (Piper); a Kokoro voice gets `slow_n`."""
    slow_n: int
    sustain_s: float
    burst_scale: float
    long_form_n: int
    fast_step_s: float
    slow_step_s: float
    max_steps: int
    min_arrivals: int
    """Expected requests per capacity step at least (low rates get longer steps) …"""
    max_step_s: float
    """… up to this long; lower rates are not tried."""
    drain_s: float
    guarantees: bool
    scale_out: bool
    budget_s: float
    seed: int
    custom: CustomLoad | None = None
    pipeline: bool = True
    """Overhead, sustained, burst, long-form and capacity (off: only --guarantees/--scale-out)."""
    wire: bool = False
    """wire_format v1 vs cloudevents side by side at capacity (`--sections wire`)."""
    encode: bool = False
    """Two encodes vs one only, ABBA (`--sections encode`, `ENCODE_ARMS`)."""
    tracing: bool = False
    """Tracing at 100 % sampling vs off, side by side (`--sections tracing`, `bench.tracing_bench`)."""
    tail: bool = False
    """First audio against load, scheduler fifo vs lanes (`--tail`, `bench.tail`)."""
    tail_requests: int | None = None
    """Requests per offered load in `--tail` (None: by engine speed and --quick)."""
    tail_setups: tuple[str, ...] = ()
    """Scheduler setups of `--tail` by label (empty: all, `bench.tail.SCHEDULERS`)."""
    tail_loads: tuple[float, ...] = ()
    """Offered loads of `--tail` as shares of saturation (empty: by engine speed and --quick)."""

    @classmethod
    def make(
        cls,
        *,
        quick: bool,
        voices: Sequence[str],
        guarantees: bool | None,
        scale_out: bool | None,
        budget_s: float | None,
        seed: int,
        custom: CustomLoad | None,
        threads: int = 2,
        concurrency: int = 4,
        pipeline: bool = True,
        wire: bool = False,
        tracing: bool = False,
        encode: bool = False,
        tail: bool = False,
        tail_requests: int | None = None,
        tail_setups: Sequence[str] = (),
        tail_loads: Sequence[float] = (),
    ) -> Plan:
        # Quick: every core section with small samples (< 5 min); full: the README numbers.
        return cls(
            quick=quick,
            voices=tuple(voices),
            threads=threads,
            concurrency=concurrency,
            fast_n=24 if quick else 40,
            slow_n=6 if quick else 14,
            sustain_s=20 if quick else 90,
            burst_scale=0.5 if quick else 1.0,
            long_form_n=0 if quick else 3,
            fast_step_s=12 if quick else 30,
            slow_step_s=15 if quick else 35,
            max_steps=3 if quick else 6,
            min_arrivals=6 if quick else 10,
            max_step_s=25 if quick else 60,
            drain_s=20 if quick else 40,
            guarantees=(not quick) if guarantees is None else guarantees,
            scale_out=(not quick) if scale_out is None else scale_out,
            # --tail waits out open loops at a slow engine's rates: tens of minutes, not ~17.
            # A side section (wire, encode, tracing) runs only when named: it brings its own time
            # (four or more fresh worker sets each), or it would be skipped for lack of it.
            budget_s=budget_s
            or (
                (1800 if quick else 5400)
                if tail
                else (270 if quick else 1000) + (420 if quick else 600) * (wire + encode + tracing)
            ),
            seed=seed,
            custom=custom,
            pipeline=pipeline,
            wire=wire,
            tracing=tracing,
            encode=encode,
            tail=tail,
            tail_requests=tail_requests,
            tail_setups=tuple(tail_setups),
            tail_loads=tuple(tail_loads),
        )


@dataclass
class LoadRun:
    name: str
    section: str
    voice: str
    workload: str
    mode: str
    topology: str
    summary: Summary
    offered_rps: float | None = None
    usage: dict[str, ProcUsage] = field(default_factory=dict)
    dlq: dict[str, int] = field(default_factory=dict)
    records: list[RequestRecord] = field(default_factory=list)
    extra: dict[str, Any] = field(default_factory=dict)
    """Section-specific measures (the wire section: CPU and Kafka bytes per request)."""

    @property
    def dlq_total(self) -> int:
        return sum(self.dlq.values())


@dataclass
class BenchResult:
    plan: Plan
    started_at: str
    machine: dict[str, Any]
    runs: list[LoadRun] = field(default_factory=list)
    capacity: list[Capacity] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    worker_start_s: dict[str, float] = field(default_factory=dict)
    wall_s: float = 0.0

    def run(self, section: str, voice: str | None = None, name: str | None = None) -> LoadRun | None:
        for r in self.runs:
            if (
                r.section == section
                and (voice is None or r.voice == voice)
                and (name is None or r.name == name)
            ):
                return r
        return None
