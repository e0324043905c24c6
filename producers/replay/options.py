"""How a replay runs, whatever it selects (`replay dlq`, `request` and `window` alike)."""

from __future__ import annotations

from dataclasses import dataclass

from streamtts.producers.replay.ledger import ReplayLedger
from streamtts.producers.replay.pacing import Pacer, Progress
from streamtts.producers.replay.summary import ReplaySummary


@dataclass(frozen=True)
class ReplayOptions:
    """The options every replay takes (the CLI's `--dry-run`, `--rate`, `--force`)."""

    dry_run: bool = False
    """Count and list what would move (`ReplaySummary.planned`); send nothing."""
    rate: float | None = None
    """At most this many records a second (None: unlimited)."""
    force: bool = False
    """Replay again what the ledger says was replayed (and dead letters at `max_attempts`)."""
    progress: bool | None = None
    """A progress line on stderr (None: when stderr is a terminal); `replay request` has none."""

    def summary(self) -> ReplaySummary:
        """An empty summary of this run."""
        return ReplaySummary(dry_run=self.dry_run)

    def pacer(self) -> Pacer:
        return Pacer(self.rate)

    def progress_line(self, label: str) -> Progress:
        return Progress(label, self.progress)

    def already_replayed(self, ledger: ReplayLedger, key: str, summary: ReplaySummary) -> bool:
        """Whether to skip `key` because the ledger has it (unless `force`); a skip is counted
        in `summary` as "already_replayed"."""
        if ledger.seen(key) and not self.force:
            summary.skip("already_replayed")
            return True
        return False


DEFAULT_OPTIONS = ReplayOptions()
"""A replay that sends, unpaced, skips what the ledger has, with a progress line on a terminal."""
