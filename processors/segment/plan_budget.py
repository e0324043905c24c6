"""The time one request may spend being planned (pure; no threads here).

The planner is linear, but linear in 20,000 characters of hostile text is still a second
or more of CPU, and the segment stage handles one record at a time: whatever one request
costs, every request behind it waits. So planning carries a deadline and checks it
cooperatively, once per sentence, SSML block and planned span (each of those is bounded
work), and gives up with `TooCostly` (reason `too_costly`) at the first check past it. The
stage runs the planner off its event loop, so heartbeats and SIGTERM are served meanwhile.

Wall-clock time, not CPU time: what a request costs the others is how long the stage is
busy with it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from streamtts.processors.segment.exceptions import TooCostly


class PlanAbandoned(Exception):
    """The planner's owner is stopping: the plan is dropped (not a verdict on the request,
    so never dead-lettered; its record is read again by the next owner)."""


@dataclass(frozen=True)
class PlanDeadline:
    """When planning one request must stop. `offset` shifts reported positions (a block of
    an SSML document reports where it is in the document)."""

    budget_s: float
    expires_at: float
    text_chars: int
    """What the request holds (for the message)."""
    clock: Callable[[], float] = field(default=time.monotonic, compare=False)
    offset: int = 0
    stopping: threading.Event | None = field(default=None, compare=False)
    """Set by the owner when it stops: the plan ends at its next check (PlanAbandoned)."""

    @classmethod
    def start(
        cls,
        budget_s: float,
        text_chars: int,
        clock: Callable[[], float] = time.monotonic,
        *,
        stopping: threading.Event | None = None,
    ) -> PlanDeadline:
        """A deadline `budget_s` from now (call it where planning starts, not where it is queued)."""
        return cls(budget_s, clock() + budget_s, text_chars, clock, stopping=stopping)

    def within(self, offset: int) -> PlanDeadline:
        """The same deadline for a part of the text that starts at `offset`."""
        return replace(self, offset=offset)

    def check(self, at: int) -> None:
        """Raise TooCostly if the deadline has passed; `at`: the character reached (in the
        part this deadline is `within`); PlanAbandoned if the owner is stopping."""
        if self.stopping is not None and self.stopping.is_set():
            raise PlanAbandoned(f"planning stopped at character {self.offset + at}: its owner is stopping")
        if self.clock() > self.expires_at:
            raise TooCostly(
                f"planning took longer than its budget of {self.budget_s:g} s: stopped at "
                f"character {self.offset + at} of {self.text_chars}"
            )
