"""A record as the one stage loop (`runtime.stage_loop`) reads it, by faust's `Message` names,
for the sources that are not faust's stream: the sink's aiokafka batches and the in-memory
topology."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LoopRecord:
    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...] = ()
    timestamp: float | None = None
    """Seconds (faust's unit; aiokafka gives milliseconds)."""
    generation_id: int = 0
    """The partition's assignment it was read under (the sink's `SinkCheckpoint.epoch`; in
    memory one, for good)."""

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.partition)


@dataclass(frozen=True, slots=True)
class LoopEvent:
    """What a stage's `take` receives: faust's `EventT` for the attributes stages use."""

    message: LoopRecord
