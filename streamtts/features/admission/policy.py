"""Predicted first audio of a request, and whether its deadline admits it. Pure: no Kafka.

A request's first span is keyed by its request id to one partition of `tts.segments` (or of
`tts.segments.long` for the long pool): the worker owning that partition speaks it. Its first
audio is predicted as that worker's reported first-span wait, plus the first span's own
compute from the worker's fitted cost line (the first span is at most `FIRST_SPAN_CHARS`), plus
the pipeline around synthesis (`PIPELINE_MS`: segment, encode, Kafka hops; measured ~50 ms).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from aiokafka.partitioner import murmur2

from streamtts.schemas.load import CostLine, LoadReport

FIRST_SPAN_CHARS = 40
"""The segment stage cuts a request's first span to whole clauses of at most ~40 characters."""
PIPELINE_MS = 100.0
"""Time outside synthesis before first audio leaves: segment, encode and three Kafka hops."""


def partition_of(key: bytes, partitions: int) -> int:
    """Kafka's default partitioner (murmur2, as the Java client and aiokafka) for a keyed record."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions


@dataclass(frozen=True)
class Prediction:
    first_audio_ms: float
    """Predicted first audio after the request is queued, ms."""
    wait_ms: float
    """Of which: waiting for a lane on the owning worker."""
    worker: str
    first_ms: float = 0.0
    """Predicted compute of the request's first span: what it adds to the wait of the next
    first span on that worker (first spans overtake later spans, so only they queue ahead of
    one another) until the worker's next report counts it."""


@dataclass(frozen=True)
class Refusal:
    """A request refused at admission: its predicted first audio misses its deadline."""

    reason = "overloaded"
    predicted_ms: float
    deadline_ms: int
    worker: str

    @property
    def retry_after_s(self) -> float:
        """When the queue ahead of it would have drained enough (a hint, not a promise)."""
        return max(1.0, (self.predicted_ms - self.deadline_ms) / 1000)

    def message(self) -> str:
        return (
            f"overloaded: first audio predicted in {self.predicted_ms:.0f} ms, over the request's "
            f"deadline of {self.deadline_ms} ms (worker {self.worker})"
        )


def predict(
    reports: Iterable[LoadReport],
    *,
    request_id: str,
    topic: str,
    partitions: int,
    engine: str,
    chars: int,
    unreported_ms: Callable[[LoadReport], float] = lambda report: 0.0,
) -> Prediction | None:
    """The first audio of a request keyed `request_id` whose first span goes to `topic`
    (`partitions` of them), spoken by `engine`. `unreported_ms(report)`: first-span compute
    this client queued on that worker since the report (a burst arrives faster than reports),
    shared by its lanes. None: no fresh report covers the partition, or the owner makes no prediction —
    admission then lets the request through (it cannot tell)."""
    if partitions <= 0:
        return None
    partition = partition_of(request_id.encode(), partitions)
    for report in reports:
        if partition not in report.partitions.get(topic, ()) or report.first_wait_ms is None:
            continue
        line = report.cost.get(engine.split(":", 1)[0])

        def compute(n: int, line: CostLine | None = line) -> float:
            return line.intercept_ms + line.ms_per_phoneme * line.phonemes_per_char * n if line else 0.0

        wait = report.first_wait_ms + unreported_ms(report) / report.slots
        first = compute(min(chars, FIRST_SPAN_CHARS))
        return Prediction(wait + first + PIPELINE_MS, wait, report.worker, first)
    return None


def admit(prediction: Prediction | None, deadline_ms: int | None) -> Refusal | None:
    """A refusal when the prediction misses the deadline; None admits the request."""
    if prediction is None or deadline_ms is None or prediction.first_audio_ms <= deadline_ms:
        return None
    return Refusal(round(prediction.first_audio_ms, 1), deadline_ms, prediction.worker)
