"""Where each request's next segment starts in the request's audio (word timestamps).

Word times count from the start of the whole request, so segment k starts after the audio of
segments 0..k-1 (their pauses included). One synthesize worker sees a request's segments in
order, so it keeps a running sum per request. After a rebalance (or a restart) the new owner
of a partition starts mid-request without that sum: it recovers it from what was already
published on `tts.pcm` for the request (`published_audio_ms`), read-committed, from the
request's creation time on — no extra state store, and exactly the audio subscribers got.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from datetime import datetime

from aiokafka import TopicPartition

from streamtts.runtime.kafka import key_partition, make_consumer, topic_partitions
from streamtts.runtime.settings import KafkaSettings
from streamtts.schemas import ContractError, PcmChunk, Segment, wire

log = logging.getLogger(__name__)


class RequestTimeline:
    """Running audio length per request (bounded LRU: a request that never finishes here —
    its partition moved — is forgotten eventually)."""

    def __init__(self, max_requests: int = 20_000) -> None:
        self._next: OrderedDict[str, tuple[int, float]] = OrderedDict()
        self._max = max_requests

    def start_of(self, segment: Segment) -> float | None:
        """Where `segment` starts (ms); None when this worker has not seen the segments
        before it (recover with `published_audio_ms`)."""
        if segment.seq == 0:
            return 0.0
        known = self._next.get(segment.request_id)
        if known is None or known[0] != segment.seq:
            return None
        return known[1]

    def advance(self, segment: Segment, start_ms: float, duration_ms: float) -> None:
        """`segment` was published: the next one starts after it."""
        key = segment.request_id
        if segment.last:
            self._next.pop(key, None)
            return
        self._next[key] = (segment.seq + 1, start_ms + duration_ms)
        self._next.move_to_end(key)
        while len(self._next) > self._max:
            self._next.popitem(last=False)


async def published_audio_ms(
    kafka: KafkaSettings, topic: str, segment: Segment, created_at: datetime
) -> float | None:
    """Sum of the audio already published on `topic` for segments 0..seq-1 of the request,
    or None when some of them are not all there (each (seq, part) counted once)."""
    key = segment.request_id.encode()
    partitions = sorted(await topic_partitions(kafka, topic))
    if not partitions:
        return None
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    try:
        # The partition faust's producer picked for this key (it uses the same partitioner).
        tp = TopicPartition(topic, key_partition(key, partitions))
        consumer.assign([tp])
        since = int(created_at.timestamp() * 1000) - 5_000  # producer clocks differ a little
        found = await consumer.offsets_for_times({tp: max(0, since)})
        end = (await consumer.end_offsets([tp]))[tp]
        start = found[tp].offset if found.get(tp) is not None else end
        consumer.seek(tp, start)
        parts: dict[tuple[int, int], float] = {}
        last_part: dict[int, int] = {}
        # Until the end offset: an empty poll on a busy node is not the end (the caller bounds
        # the whole recovery in time; giving up early here left a takeover's words at 0 ms).
        while start < end and await consumer.position(tp) < end:
            batch = await consumer.getmany(tp, timeout_ms=500, max_records=500)
            for record in batch.get(tp, []):
                if record.key != key or record.value is None:
                    continue
                try:
                    chunk = wire.decode(PcmChunk, record.value, record.headers)
                except ContractError:
                    continue
                if chunk.seq < segment.seq and chunk.request.tenant == segment.request.tenant:
                    # The first copy wins, as for every reader (a redelivered render of a
                    # Piper span can differ in length and in parts).
                    parts.setdefault((chunk.seq, chunk.part), chunk.duration_ms)
                    if chunk.last_part:
                        last_part.setdefault(chunk.seq, chunk.part)
        complete = all(
            seq in last_part and all((seq, p) in parts for p in range(last_part[seq] + 1))
            for seq in range(segment.seq)
        )
        return sum(parts.values()) if complete else None
    finally:
        await consumer.stop()
