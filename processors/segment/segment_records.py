"""How the segment stage writes a request's segments: each a record keyed by its request id,
the first marked as such (synthesize lets it overtake later spans), all carrying the
request's trace. One writer for whole requests and streamed utterances alike."""

from __future__ import annotations

from collections.abc import Iterable

from streamtts.runtime.stage_outputs import StageOutputs
from streamtts.schemas import Segment, wire
from streamtts.schemas.headers import FIRST_SEGMENT_HEADERS


async def send_segments(
    outputs: StageOutputs,
    topic: str,
    segments: Iterable[Segment],
    wire_format: wire.WireFormat,
    carried: list[tuple[str, bytes]],
) -> None:
    for segment in segments:
        first = FIRST_SEGMENT_HEADERS if segment.seq == 0 else []
        record = wire.encode(segment, wire_format, source=wire.SOURCE_PREFIX + "/segment")
        headers = [*first, *carried, *record.headers] or None
        await outputs.send(topic, segment.request_id.encode(), record.value, headers)
