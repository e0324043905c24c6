"""Reassembles each request's chunks in (seq, part) order (pure, no I/O): PCM chunks, or the
file parts the encode stage writes for the sink (streamed frames, PCM, or no audio).

Which offsets may be committed is the stage loop's in-order acks: the sink holds a chunk's
ack until its request is finished, so a crash re-reads every chunk of every unfinished request.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from functools import cached_property

import numpy as np

from streamtts.schemas import Degradation, RequestContext, WordTiming
from streamtts.schemas.captions import retimed
from streamtts.schemas.chunks import ChunkRecord, FileCarries, FilePart, MarkTiming, PcmChunk, StreamUse

TopicPart = tuple[str, int]
RequestKey = tuple[str, str]
"""(tenant, request_id): two tenants may use the same id; their chunks never mix."""


@dataclass
class _Pending:
    ctx: RequestContext
    total: int
    sample_rate: int
    parts: dict[tuple[int, int], ChunkRecord] = field(default_factory=dict)
    last_part_of: dict[int, int] = field(default_factory=dict)
    first_offset: dict[TopicPart, int] = field(default_factory=dict)
    records: list[tuple[TopicPart, int, bytes, tuple[tuple[str, bytes], ...]]] = field(default_factory=list)
    """(partition, offset, raw value, headers) of every record, to dead-letter them as they came."""
    read: list[tuple[TopicPart, int, int]] = field(default_factory=list)
    """(partition, offset, epoch) of every record read for it, redelivered duplicates too: the
    records whose acks wait until the request is finished (`finish` returns them)."""
    updated_at: float = 0.0

    def complete(self) -> bool:
        if len(self.last_part_of) < self.total:
            return False
        return all((seq, p) in self.parts for seq, last in self.last_part_of.items() for p in range(last + 1))

    def missing(self, limit: int = 20) -> list[int]:
        """The first `limit` segments not (wholly) received."""
        out: list[int] = []
        for seq in range(self.total):
            last = self.last_part_of.get(seq)
            if last is None or any((seq, p) not in self.parts for p in range(last + 1)):
                out.append(seq)
                if len(out) >= limit:
                    break
        return out


@dataclass(frozen=True)
class StreamedPart:
    """One part of a request that came as a `FilePart` (what the stored file is built from)."""

    carries: FileCarries
    audio: bytes
    """Its streamed payload ("frames"), its PCM ("pcm"), or nothing ("none")."""
    n_samples: int
    stream: StreamUse | None


@dataclass(frozen=True)
class AssembledRequest:
    ctx: RequestContext
    sample_rate: int
    pcm: bytes
    """The s16le samples of every part that carried PCM, in order: all of them when the
    request came as PCM chunks (`streamed` empty)."""
    chunks: int
    degraded: list[Degradation]
    records: list[tuple[TopicPart, int, bytes, tuple[tuple[str, bytes], ...]]]
    words: list[WordTiming] | None = None
    """With timestamps: every word, timed from the assembled audio's start."""
    cancelled: bool = False
    """The request was cancelled: `pcm` is what was spoken before it (maybe nothing)."""
    played_ms: float | None = None
    """The playback position the client reported with its cancel."""
    marks: list[MarkTiming] | None = None
    """SSML marks, timed from the assembled audio's start."""
    first_synthesized_at: datetime | None = None
    """When the request's first chunk (seq 0, part 0) was synthesized."""
    streamed: tuple[StreamedPart, ...] = ()
    """Its parts in order, when it came as file parts (see `sinks.stored_audio`)."""

    @cached_property
    def samples(self) -> np.ndarray:
        """`pcm` as int16 samples (a view, no copy)."""
        return np.frombuffer(self.pcm, dtype="<i2")

    @property
    def n_samples(self) -> int:
        """Samples of the whole audio, whatever form its parts came in."""
        if self.streamed:
            return sum(p.n_samples for p in self.streamed)
        return len(self.pcm) // 2

    @property
    def duration_ms(self) -> float:
        return self.n_samples / self.sample_rate * 1000.0

    @property
    def first_headers(self) -> tuple[tuple[str, bytes], ...]:
        """The headers of the request's first record (they name its rendering)."""
        return self.records[0][3] if self.records else ()

    @property
    def first_audio_ms(self) -> float | None:
        """created_at → the first chunk synthesized: the first-audio latency of the release that
        rendered it, without a lookup (the encode stage's TTFA metric adds the encode step)."""
        if self.first_synthesized_at is None:
            return None
        return round(max(0.0, (self.first_synthesized_at - self.ctx.created_at).total_seconds() * 1000), 1)


def retimed_marks(ordered: list[ChunkRecord]) -> list[MarkTiming] | None:
    """Marks re-timed on the assembled audio: a chunk's marks keep their distance from the
    chunk's start, whatever the chunk's own offset said."""
    out: list[MarkTiming] = []
    at = 0.0
    for c in ordered:
        for m in c.marks or ():
            within = m.time_ms - c.offset_ms if c.offset_ms is not None else 0.0
            out.append(MarkTiming(name=m.name, time_ms=round(at + max(0.0, min(within, c.duration_ms)), 1)))
        at += c.duration_ms
    return out or None


class RequestAssembler:
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._pending: dict[RequestKey, _Pending] = {}
        self._clock = clock

    def pending_ids(self) -> list[RequestKey]:
        return list(self._pending)

    def add(
        self,
        tp: TopicPart,
        offset: int,
        raw: bytes,
        chunk: ChunkRecord,
        headers: tuple[tuple[str, bytes], ...] = (),
        *,
        epoch: int = 0,
    ) -> AssembledRequest | None:
        """Record one chunk; returns the assembled request when it just became complete.
        `epoch`: the partition's assignment it was read under (given back by `finish`)."""
        key = (chunk.request.tenant, chunk.request_id)
        p = self._pending.get(key)
        if p is None:
            p = self._pending[key] = _Pending(chunk.request, chunk.total, chunk.sample_rate)
        # A streamed utterance's chunks say MAX_SEGMENTS until its last, which knows the total.
        p.total = min(p.total, chunk.total)
        if chunk.request.ended is not None:  # a streamed utterance's end: the result says why
            p.ctx = chunk.request
        p.first_offset.setdefault(tp, offset)
        p.updated_at = self._clock()
        p.read.append((tp, offset, epoch))
        position = (chunk.seq, chunk.part)
        if position in p.parts:
            return None  # a redelivered duplicate: the first copy wins
        p.parts[position] = chunk
        p.records.append((tp, offset, raw, headers))
        if chunk.last_part:
            p.last_part_of[chunk.seq] = chunk.part
        if not p.complete():
            return None
        ordered = [p.parts[k] for k in sorted(p.parts)]
        return AssembledRequest(
            ctx=p.ctx,
            sample_rate=p.sample_rate,
            pcm=b"".join(_pcm_of(c) for c in ordered),
            chunks=len(ordered),
            degraded=[c.degradation for c in ordered if c.degradation is not None],
            records=p.records,
            words=retimed([(c.duration_ms, c.offset_ms, c.words or []) for c in ordered])
            if p.ctx.timestamps
            else None,
            cancelled=any(c.cancelled for c in ordered),
            marks=retimed_marks(ordered) if p.ctx.marks else None,
            played_ms=next((c.played_ms for c in ordered if c.played_ms is not None), None),
            first_synthesized_at=ordered[0].synthesized_at,
            streamed=tuple(
                StreamedPart(c.carries, c.audio, c.n_samples, c.stream)
                for c in ordered
                if isinstance(c, FilePart)
            ),
        )

    def finish(self, key: RequestKey) -> list[tuple[TopicPart, int, int]]:
        """Forget a request whose outputs are acknowledged; returns (partition, offset, epoch)
        of every record read for it, whose acks may go now."""
        p = self._pending.pop(key, None)
        return p.read if p is not None else []

    def stale(
        self, older_than_s: float
    ) -> list[tuple[RequestKey, TopicPart, RequestContext, list[int], tuple[tuple[str, bytes], ...]]]:
        """Requests with no new chunk for `older_than_s`: (key, its partition, context, missing
        seqs, headers of its first record)."""
        now = self._clock()
        return [
            (key, min(p.first_offset), p.ctx, p.missing(), p.records[0][3] if p.records else ())
            for key, p in self._pending.items()
            if now - p.updated_at > older_than_s
        ]

    def drop_partitions(self, tps: set[TopicPart]) -> None:
        """On revocation: forget what came from those partitions (the next owner re-reads it)."""
        for key in [key for key, p in self._pending.items() if set(p.first_offset) & tps]:
            del self._pending[key]


def _pcm_of(chunk: ChunkRecord) -> bytes:
    """A PCM chunk's samples, or a file part's when it carries PCM."""
    return chunk.pcm if isinstance(chunk, PcmChunk | FilePart) else b""
