"""What the sections of one bench run share: the plan and its time budget, each voice's texts
(picked by the baseline's first pass) and the result they add their runs to."""

from __future__ import annotations

import dataclasses
import os
import random
import time
from pathlib import Path

from streamtts.bench.bench_facts import WARM_BROKER_S, broker_note, infra_pids, machine, say
from streamtts.bench.bench_plan import BenchResult, Plan
from streamtts.bench.worker_procs import WorkerSet, process_age_s
from streamtts.bench.workloads import WorkItem
from streamtts.runtime.settings import KafkaSettings, Settings


class Bench:
    """One run's shared state; each section is a function of it (`run.py` calls them in order)."""

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
        kafka = self.infra_pids.get("kafka")
        age = process_age_s(kafka) if kafka else None
        if age is not None:
            self.result.machine["broker_age_s"] = round(age)
            if age < WARM_BROKER_S:
                say(broker_note(age))

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

    def per_item_s(self, voice: str) -> float:
        """The baseline's mean seconds per request of `voice` (1 s before it has any): what
        sizes a closed-loop run of its texts."""
        direct = self.result.run("direct", voice)
        return direct.summary.completion.mean if direct and direct.summary.completed else 1.0

    def pids(self, workers: WorkerSet) -> dict[str, int]:
        """The processes whose CPU a load run counts: workers, local infra, this client."""
        return {**workers.pids, **self.infra_pids, "bench": os.getpid()}
