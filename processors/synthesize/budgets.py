"""Time budgets of a span's steps (G2P, inference), and the guard threads that enforce them:
a budgeted call runs in a guard thread so the caller can stop waiting, in the caller's context,
with its CPU time added to the render's."""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Budgets:
    """Time a span may take before it is treated as failed (field practice: a slow phoneme
    parser once blocked whole requests for seconds)."""

    g2p_s: float | None = 0.5
    """None: no budget (the direct path, where nobody else waits on the process)."""
    inference_base_s: float | None = 4.0
    inference_per_char_s: float = 0.15

    @classmethod
    def unbounded(cls) -> Budgets:
        """No budget at all: every step may take as long as it takes."""
        return cls(g2p_s=None, inference_base_s=None)

    def inference_s(self, text: str) -> float | None:
        if self.inference_base_s is None:
            return None
        return self.inference_base_s + self.inference_per_char_s * len(text)


class BudgetExceeded(TimeoutError):
    def __init__(self, what: str, budget_s: float) -> None:
        self.what = what
        super().__init__(f"{what} exceeded its {budget_s * 1000:.0f} ms budget")


class BudgetGuard:
    """Runs budgeted calls in its own threads. A stalled call keeps its thread; the breaker
    stops feeding that class, so stalls cannot pile up unbounded."""

    def __init__(self, workers: int = 4) -> None:
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="synth-guard")

    def within(self, budget_s: float | None, what: str, fn: Callable[..., object], *args: object) -> object:
        """`fn(*args)`, or BudgetExceeded naming `what` once it takes over `budget_s` (None:
        no budget, called here)."""
        if budget_s is None:
            return fn(*args)
        # In the caller's context: a lane's run control reaches the model call (see `lanes`),
        # and the guard thread's CPU is added to the render's.
        future = self._pool.submit(contextvars.copy_context().run, _timed, fn, *args)
        try:
            return future.result(timeout=budget_s)
        except FutureTimeout:
            future.cancel()
            raise BudgetExceeded(what, budget_s) from None

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)


def cpu_ms_of(fn: Callable[[], T]) -> tuple[T, float]:
    """`fn()` and the CPU milliseconds it took: in this thread and in the guard threads that
    ran its budgeted calls."""
    guarded: list[float] = []
    token = _GUARD_CPU.set(guarded)
    started = time.thread_time()
    try:
        result = fn()
    finally:
        _GUARD_CPU.reset(token)
    return result, (time.thread_time() - started + sum(guarded)) * 1000.0


_GUARD_CPU: contextvars.ContextVar[list[float] | None] = contextvars.ContextVar(
    "streamtts_guard_cpu", default=None
)
"""The CPU seconds that the budget guard's threads spent for the render in progress."""


def _timed(fn: Callable[..., object], *args: object) -> object:
    started = time.thread_time()
    try:
        return fn(*args)
    finally:
        spent = _GUARD_CPU.get()
        if spent is not None:
            spent.append(time.thread_time() - started)
