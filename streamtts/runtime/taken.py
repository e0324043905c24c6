"""What the stage runtime hands a stage's handler: the record, and what the stage made of it
when it was read. Decoded once, it travels with the record through the read-ahead queue (no
table on the side keyed by `id(event)`: a reused id once handed one record another's segment)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from streamtts.runtime.redelivery import Redelivery

V = TypeVar("V")


@dataclass(frozen=True, slots=True)
class Taken(Generic[V]):
    """A record read by the stage runtime (`FaustStage.take` makes it)."""

    event: Any
    """faust's `EventT` (or `runtime.loop_record.LoopEvent`: the same attributes)."""
    value: V | None = None
    """The stage's reading of the record (e.g. the decoded segment); None if it reads it in
    its handler, or could not read it (`error`)."""
    error: Exception | None = None
    """Why the record could not be read: the handler dead-letters it."""
    first: bool = False
    """A request's first record (what its caller waits for): it overtakes queued later ones."""
    now: bool = False
    """Handled at once, in the reading loop, never queued: a record bound for the DLQ (it
    waits for nothing) or one served without work (a render cache hit)."""
    read_at: float = field(default_factory=time.perf_counter)
    """When it was read (its wait in the read-ahead queue is in its span)."""
    redelivery: Redelivery | None = None
    """Why it may have been delivered before (see `runtime.redelivery`); its span says so."""

    @property
    def key(self) -> bytes:
        """The record's key: the request id, so one request's records share it."""
        return self.event.message.key or b""


@dataclass(frozen=True)
class ReadAhead:
    """How a stage reads ahead of its work (`FaustStage.read_ahead`): `capacity` records
    queued, first records first; at most `caps[first]` of each kind handled at once and one
    per request (its outputs leave in order); with `total`, at most that many in all."""

    capacity: int
    caps: Mapping[bool, int]
    total: int | None = None
