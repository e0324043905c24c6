"""Which records may be redelivered (`RedeliveryWatch`, pure), and the stage runtime saying so
on their spans, with the stage-time exemplar (no Kafka: the record-handling methods directly)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from faust.types import TP
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from streamtts.runtime.faust_stage import FaustStage
from streamtts.runtime.redelivery import RedeliveryWatch
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import Taken
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.tracing import Tracing, TracingSettings
from streamtts.schemas.trace import TraceContext

P0 = ("tts.requests", 0)
P1 = ("tts.requests", 1)
T = 1_000_000.0  # the assignment's time, ms


def test_a_fresh_partition_reads_its_backlog_as_possibly_redelivered_until_new_records() -> None:
    watch = RedeliveryWatch()
    watch.assigned([P0], now_ms=T)
    assert watch.read(P0, 10, T - 5_000) == "taken_over"  # written before: its old reader may have had it
    assert watch.read(P0, 11, None) == "taken_over"  # no timestamp: cannot rule it out
    assert watch.read(P0, 12, T + 1) is None  # written after the assignment: new work
    assert watch.read(P0, 13, T - 10) is None  # and so is all that follows it (the window closed)


def test_reading_an_offset_again_is_a_reread_whatever_the_assignment() -> None:
    watch = RedeliveryWatch()
    watch.assigned([P0, P1], now_ms=T)
    for offset in range(5):
        watch.read(P0, offset, T + 1)
    watch.assigned([P0, P1], now_ms=T + 100)  # kept across a rebalance: not a takeover
    assert watch.read(P0, 3, T + 1) == "reread"  # the position went back to the committed offset
    assert watch.read(P0, 4, T + 1) == "reread"
    assert watch.read(P0, 5, T + 1) is None  # past everything read: new
    assert watch.read(P1, 0, T + 200) is None  # the other partition has its own history


def test_a_partition_given_away_and_back_is_a_new_takeover() -> None:
    watch = RedeliveryWatch()
    watch.assigned([P0], now_ms=T)
    assert watch.read(P0, 0, T + 1) is None
    watch.assigned([P1], now_ms=T + 10)  # P0 went to another worker, which read on
    watch.assigned([P0, P1], now_ms=T + 20)
    assert watch.read(P0, 0, T + 1) == "reread"  # this process read it itself
    assert watch.read(P0, 7, T + 15) == "taken_over"  # the other reader may have handled it
    assert watch.read(P0, 8, T + 25) is None


@dataclass
class Message:
    offset: int
    timestamp: float  # faust: seconds
    headers: list[tuple[str, bytes]] = field(default_factory=list)
    topic: str = "tts.requests"
    partition: int = 0
    key: bytes = b"req-1"
    generation_id: int = 1


@dataclass
class Event:
    message: Message


class Manual:
    def __init__(self) -> None:
        self.acked: list[int] = []

    async def ack(self, event: Event) -> None:
        self.acked.append(event.message.offset)


class Handled(FaustStage):
    name = "segment"

    async def handle(self, taken: Taken[object]) -> str | None:
        return "ok"


async def test_the_stage_marks_the_span_and_names_the_trace_in_its_stage_time() -> None:
    exporter = InMemorySpanExporter()
    telemetry = Telemetry(Tracing.to(TracingSettings(), "worker", exporter=exporter))
    stage = Handled(StageParts.of(telemetry=telemetry))
    source = stage.sources[0]
    await stage._on_assigned(stage.app, {TP(source, 0)})
    caller = TraceContext.start()
    old = Event(Message(3, time.time() - 60, caller.headers(), topic=source))
    new = Event(Message(4, time.time() + 60, caller.headers(), topic=source))
    manual = Manual()
    for event in (old, new, old):  # the last: read again (a seek back)
        taken = stage._marked(Taken(event), stage._redelivery(event))  # as the agent reads
        await stage.process(taken, manual)  # type: ignore[arg-type]
    marks = [
        (s.attributes.get("streamtts.redelivered"), s.attributes.get("streamtts.redelivery"))
        for s in exporter.get_finished_spans()
    ]
    assert marks == [(True, "taken_over"), (None, None), (True, "reread")]
    assert manual.acked == [3, 4, 3]
    body, _ = telemetry.exposition_for("application/openmetrics-text")
    stage_lines = [ln for ln in body.decode().splitlines() if ln.startswith("streamtts_stage_seconds_bucket")]
    assert any(f'trace_id="{caller.trace_id}"' in ln for ln in stage_lines), stage_lines
    stage.release()
