"""What a chaos run counted, per guarantee: the fault windows, and each acknowledged request's
results as the independent subscriber saw them (lost, duplicated, flipped, how long it waited
after the fault that delayed it)."""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from streamtts.bench.tables import markdown_rows


@dataclass
class FaultWindow:
    name: str
    started: float
    ended: float = 0.0
    target: str = ""
    """What the fault hit, when the plan does not say (the broker that led the partitions)."""

    @property
    def label(self) -> str:
        return f"{self.name} ({self.target})" if self.target else self.name


@dataclass
class ChaosReport:
    guarantee: str
    sent: int = 0
    completed: int = 0
    failed: int = 0
    lost: int = 0
    duplicate_results: int = 0
    flips: int = 0
    dead_letters: int = 0
    poison_sent: int = 0
    poison_dead_lettered: int = 0
    longest_wait_after_fault_s: float = 0.0
    longest_settle_s: float = 0.0
    """The longest any request took from acknowledged send to its first result."""
    wait_after: dict[str, float] = field(default_factory=dict)
    """Per fault: the longest a request waited after that fault ended (it was the last one
    before the request's result). For `poison`, what hostile records cost the others."""
    faults: list[FaultWindow] = field(default_factory=list)
    duration_s: float = 0.0
    unplanned_restarts: int = 0
    """Worker processes that exited by themselves (a dead stage loop) and were restarted, as
    an orchestrator would."""
    drain_timed_out: bool = False
    """Not every request had a result (or the sink had not committed to the end) in time."""

    def row(self) -> dict[str, object]:
        return {
            "guarantee": self.guarantee,
            "sent": self.sent,
            "completed": self.completed,
            "failed": self.failed,
            "lost": self.lost,
            "duplicate results": self.duplicate_results,
            "flips": self.flips,
            "dead letters (poison)": f"{self.poison_dead_lettered}/{self.poison_sent}",
            "dead letters (all)": self.dead_letters,
            "longest settle s": round(self.longest_settle_s, 1),
            "longest wait after a fault s": round(self.longest_wait_after_fault_s, 1),
            "longest wait by fault s": ", ".join(f"{k} {v:.1f}" for k, v in self.wait_after.items()),
            "unplanned restarts": self.unplanned_restarts,
            "drained": not self.drain_timed_out,
            "faults s": ", ".join(f"{f.label} {f.ended - f.started:.1f}" for f in self.faults),
        }

    def tally(
        self,
        sent_at: Mapping[str, float],
        poison_ids: Collection[str],
        results: Mapping[str, list[tuple[str, float]]],
        dead_letters: Mapping[str, int],
    ) -> None:
        """Count the acknowledged sends (`sent_at`: key → when) against what the subscriber
        saw: `results` (key → (status, when) in order) and `dead_letters` (key → how many)."""
        good = [k for k in sent_at if k not in poison_ids]
        self.sent = len(good)
        self.poison_sent = sum(1 for k in poison_ids if k in sent_at)
        self.poison_dead_lettered = sum(1 for k in poison_ids if dead_letters.get(k))
        self.dead_letters = sum(dead_letters.values())
        windows = sorted(self.faults, key=lambda f: f.ended)
        for key in good:
            seen = results.get(key, [])
            if not seen:
                self.lost += 1
                continue
            statuses = [s for s, _ in seen]
            self.completed += statuses[0] == "completed"
            self.failed += statuses[0] != "completed"
            self.duplicate_results += len(seen) > 1
            self.flips += "completed" in statuses and statuses[-1] != "completed"
            at = seen[0][1]
            self.longest_settle_s = max(self.longest_settle_s, at - sent_at[key])
            # The fault that delayed it: the last one to end before its result, unless another
            # began since and was still on when the result came (a result that waits out
            # fault B, begun seconds after fault A ended, was delayed by B, not by A).
            boundaries = [(f.ended if f.ended <= at else f.started, f) for f in windows if f.started <= at]
            last_at, last = max(boundaries, key=lambda b: b[0]) if boundaries else (0.0, None)
            origin = max(sent_at[key], last_at)
            self.longest_wait_after_fault_s = max(self.longest_wait_after_fault_s, at - origin)
            if last is not None:
                self.wait_after[last.name] = max(self.wait_after.get(last.name, 0.0), at - origin)


def markdown(reports: list[ChaosReport]) -> str:
    return markdown_rows([rep.row() for rep in reports])
