"""Capacity search: the highest request rate at which P99 time to first audio stays within the
target with nothing lost.

Rates grow geometrically from a start rate until a step fails, then the bracket between the
last pass and the first fail is bisected. A failed step leaves a backlog; when it cannot be
drained the search stops there (later steps would measure the backlog, not their own rate).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from streamtts.bench.stats import Summary

P99_TTFA_TARGET_S = 1.2


@dataclass
class Step:
    rate: float
    summary: Summary
    backlog: int = 0
    """Requests of this step still unfinished after the drain (blocks further steps)."""

    @property
    def passed(self) -> bool:
        s = self.summary
        return s.lost == 0 and s.completed > 0 and s.ttfa.p99 <= P99_TTFA_TARGET_S


@dataclass
class Capacity:
    voice: str
    steps: list[Step] = field(default_factory=list)
    stopped: str = ""
    """Why the search ended early (time budget, backlog), empty when it converged."""

    @property
    def best(self) -> Step | None:
        passed = [s for s in self.steps if s.passed]
        return max(passed, key=lambda s: s.rate) if passed else None

    @property
    def first_fail(self) -> Step | None:
        best = self.best
        fails = [s for s in self.steps if not s.passed and (best is None or s.rate > best.rate)]
        return min(fails, key=lambda s: s.rate) if fails else None

    @property
    def rate(self) -> float:
        best = self.best
        return best.rate if best else 0.0


def round_rate(rate: float) -> float:
    """Two significant digits: rates read well in tables and plots."""
    if rate <= 0:
        return 0.0
    digits = 1 - math.floor(math.log10(rate))
    return round(rate, max(digits, 0))


async def search(
    voice: str,
    measure: Callable[[float], Awaitable[Step]],
    start_rate: float,
    *,
    growth: float = 1.5,
    max_steps: int = 6,
    refine: int = 1,
    deadline: float = math.inf,
    step_cost_s: Callable[[float], float] | None = None,
    min_rate: float = 0.05,
    on_step: Callable[[Step], None] | None = None,
) -> Capacity:
    """Search `voice`'s capacity; `measure(rate)` runs one step. `deadline` is monotonic time;
    a step is started only if `step_cost_s(rate)` still fits before it."""
    cap = Capacity(voice)
    rate = round_rate(start_rate)
    refined = 0

    async def run(r: float) -> Step | None:
        if len(cap.steps) >= max_steps:
            cap.stopped = cap.stopped or "step limit"
            return None
        if time.monotonic() + (step_cost_s(r) if step_cost_s else 0.0) > deadline:
            cap.stopped = "time budget"
            return None
        step = await measure(r)
        cap.steps.append(step)
        if on_step:
            on_step(step)
        if step.backlog:
            cap.stopped = f"backlog of {step.backlog} not drained at {r:g} req/s"
            return None
        return step

    # 1. Bracket: grow while passing; shrink while failing (down to min_rate).
    step = await run(rate)
    if step is None:
        return cap
    direction = growth if step.passed else 1 / growth
    while True:
        nxt = round_rate(rate * direction)
        if nxt < min_rate or nxt == rate:
            cap.stopped = cap.stopped or f"target not met down to {rate:g} req/s"
            return cap
        rate = nxt
        step = await run(rate)
        if step is None:
            return cap
        if step.passed != (direction > 1):
            break
    # 2. Refine between the highest pass and the lowest fail above it.
    while refined < refine:
        best, fail = cap.best, cap.first_fail
        if best is None or fail is None:
            break
        mid = round_rate((best.rate + fail.rate) / 2)
        if mid in (best.rate, fail.rate):
            break
        refined += 1
        if await run(mid) is None:
            break
    return cap
