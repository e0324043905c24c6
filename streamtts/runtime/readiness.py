"""Liveness and readiness state of a worker, as the probes report it."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

STARTUP_EXIT_GRACE_S = 10.0
"""Time a worker past its start-up bound has to unwind and exit before liveness fails."""


@dataclass
class Readiness:
    """Ready = every stage started and joined its group, the model warmed (if this worker
    synthesizes), and the canary passing. Each false condition is named in /readyz."""

    needs_model: bool = False
    stages_started: bool = False
    model_ready: bool = False
    canary_ok: bool = True
    canary_reason: str = ""
    assignments: Callable[[], dict[str, bool]] = dict
    """Stage → joined its group yet; read from the services when asked, not copied."""
    failures: Callable[[], dict[str, str]] = dict
    """Stage → why its consuming loop died (a dead loop is never ready)."""
    brokers_down: Callable[[], str | None] = lambda: None
    """Why no Kafka broker answers this process now, or None while one does."""
    started_at: float = field(default_factory=time.monotonic)
    startup_deadline: float | None = None
    """While the worker starts: when its start-up bound runs out (monotonic). Start-up past it
    is a process that should have exited: liveness fails so a supervisor replaces it."""

    def startup_overdue(self, now: float | None = None) -> bool:
        """Still starting, past the start-up bound plus a grace for the exit itself."""
        if self.startup_deadline is None:
            return False
        return (time.monotonic() if now is None else now) > self.startup_deadline + STARTUP_EXIT_GRACE_S

    def problems(self) -> list[str]:
        out = []
        if not self.stages_started:
            out.append("stages not started")
        if self.needs_model and not self.model_ready:
            out.append("model not loaded/warmed")
        out += [f"{stage}: no partition assignment yet" for stage, ok in self.assignments().items() if not ok]
        out += [f"{stage}: loop died ({why})" for stage, why in self.failures().items()]
        if (down := self.brokers_down()) is not None:
            out.append(down)
        if not self.canary_ok:
            out.append(f"canary failing: {self.canary_reason}")
        return out

    @property
    def ready(self) -> bool:
        return not self.problems()
