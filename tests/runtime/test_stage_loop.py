"""The one stage loop with acks held past the handling (the sink's shape): a record's ack
waits until the stage releases it, and acks leave in offset order, so a partition's committable
offset never passes the first record of its oldest unfinished request."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from streamtts.runtime.loop_record import LoopEvent, LoopRecord
from streamtts.runtime.stage_loop import HELD, StageLoop
from streamtts.runtime.taken import Taken
from streamtts.runtime.telemetry import Telemetry
from streamtts.schemas.headers import REPLAY_STAGE

TOPIC = "tts.file.parts"


def _event(
    offset: int, key: bytes, headers: tuple[tuple[str, bytes], ...] = (), generation: int = 1
) -> LoopEvent:
    """A record of the kind the sink and the in-memory topology give the loop, read under assignment `generation`."""
    return LoopEvent(LoopRecord(TOPIC, 0, offset, key, b"", headers, generation_id=generation))


@dataclass
class Source:
    records: list[LoopEvent]
    acked: list[int] = field(default_factory=list)
    acked_before: dict[int, list[int]] = field(default_factory=dict)
    """offset → what was acked when the loop asked for that record (all before it handled)."""

    async def events(self) -> AsyncIterator[LoopEvent]:
        for event in self.records:
            self.acked_before[event.message.offset] = list(self.acked)
            yield event

    async def ack(self, event: Any) -> None:
        self.acked.append(event.message.offset)

    def generation(self) -> int:
        return 1


class Requests(StageLoop):
    """Holds each record until its request's record marked `last` came, like the sink."""

    name = "sink"
    group = "sink"
    holds_acks = True

    def __init__(self, last: set[int]) -> None:
        super().__init__()
        self.telemetry = Telemetry()
        self.last = last
        self.held: dict[bytes | None, list[LoopRecord]] = {}

    async def handle(self, taken: Taken[Any]) -> str | None:
        msg = taken.event.message
        if msg.key == b"done-before":
            return "already_finished"
        self.held.setdefault(msg.key, []).append(msg)
        if msg.offset not in self.last:
            return HELD
        for held in self.held.pop(msg.key):
            await self.release_ack(held.tp, held.offset, held.generation_id)
        return "ok"


async def test_acks_wait_for_the_oldest_unfinished_request_then_leave_in_order() -> None:
    source = Source(
        [
            _event(10, b"a"),  # a is unfinished from offset 10 on
            _event(11, b"b"),
            _event(12, b"b"),  # b is finished: 11 and 12 are done, but wait for 10
            _event(13, b"done-before"),  # handled without being held
            _event(14, b"a"),  # a is finished
            _event(15, b"c", ((REPLAY_STAGE, b"encode"),)),  # a replay aimed at encode
        ]
    )
    await Requests(last={12, 14}).run(source)
    assert source.acked_before[13] == [], "b is done, but a (older) still holds offset 10"
    assert source.acked_before[14] == [], "13 is done too, and waits for 10 as well"
    assert source.acked_before[15] == [10, 11, 12, 13, 14], "a done: the run leaves in offset order"
    assert source.acked == [10, 11, 12, 13, 14, 15]


async def test_a_held_record_read_under_an_earlier_assignment_is_not_released() -> None:
    stage = Requests(last={2})
    source = Source([_event(1, b"a", generation=1), _event(2, b"a", generation=2)])
    await stage.run(source)
    assert source.acked == [2], "offset 1 belonged to the earlier assignment: the next owner's"
