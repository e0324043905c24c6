"""What a replay did, counted by outcome and reason."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field


@dataclass
class ReplaySummary:
    read: int = 0
    redriven: int = 0
    failed: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    """Skipped records by reason: "filtered", "already_replayed", "max_attempts", ..."""
    failures: Counter[str] = field(default_factory=Counter)
    dry_run: bool = False
    planned: list[str] = field(default_factory=list)
    """With dry_run: one line per record that would move."""

    def skip(self, reason: str) -> None:
        self.skipped[reason] += 1

    def lines(self) -> list[str]:
        verb = "would re-drive" if self.dry_run else "re-driven"
        out = [
            f"read {self.read}, {verb} {self.redriven}, skipped {sum(self.skipped.values())}, "
            f"failed {self.failed}"
        ]
        out += [f"  skipped {n}: {reason}" for reason, n in sorted(self.skipped.items())]
        out += [f"  failed {n}: {reason}" for reason, n in sorted(self.failures.items())]
        return out
