"""Which records a stage may be handling a second time, so their spans say so.

Kafka delivers at least once: after a rebalance, a crash or a failed commit, a partition's new
reader starts at its committed offset, and what was read after that offset is read again. A
reader cannot ask the broker whether anyone handled a record before; two rules it can apply
from what it saw are sound:

1. `reread` — this process already read an offset at or past this one on the partition (its
   read position went back: a rebalance or a seek to the committed offset). The record was
   certainly delivered before; whether its outputs were written is what exactly-once decides.
2. `taken_over` — the partition is newly this worker's (it did not hold it in its previous
   assignment, or the process just started) and the record was written before the assignment.
   Its previous reader may have handled it without committing (a SIGKILLed worker does), or
   may never have reached it: "possibly redelivered". The window closes at the partition's
   first record written after the assignment — offsets grow with time, so what follows it is
   new work (a producer clock behind ours can keep the window open a little longer).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Redelivery = Literal["reread", "taken_over"]
Partition = tuple[str, int]
"""(topic, partition)."""


class RedeliveryWatch:
    """Per source partition: the highest offset this process read, and, while a taken-over
    partition's backlog is being read, when this worker got it. Bounded by the partitions."""

    def __init__(self) -> None:
        self._highest: dict[Partition, int] = {}
        self._held: set[Partition] = set()
        self._taken_at_ms: dict[Partition, float] = {}
        """Partitions newly held, whose records written before this time may be redelivered."""

    def assigned(self, partitions: Iterable[Partition], now_ms: float) -> None:
        """The group's new assignment of this worker's source partitions (the whole of it)."""
        held = set(partitions)
        for tp in held - self._held:
            self._taken_at_ms[tp] = now_ms
        for tp in self._held - held:  # someone else's now: a later return is a new takeover
            self._taken_at_ms.pop(tp, None)
        self._held = held

    def read(self, tp: Partition, offset: int, timestamp_ms: float | None) -> Redelivery | None:
        """Note a record read (in the partition's order); whether it may be a redelivery, why."""
        highest = self._highest.get(tp)
        self._highest[tp] = offset if highest is None else max(highest, offset)
        if highest is not None and offset <= highest:
            return "reread"
        taken_at = self._taken_at_ms.get(tp)
        if taken_at is None:
            return None
        if timestamp_ms is None or timestamp_ms < taken_at:  # no timestamp: cannot rule it out
            return "taken_over"
        del self._taken_at_ms[tp]  # written after the takeover: the backlog is behind us
        return None
