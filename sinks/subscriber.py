"""Downstream client: subscribe to an audio topic and reassemble requests' chunks in order.

What a customer-service platform embeds to play or store streamed speech. It reads without a
consumer group by default (every subscriber sees every chunk), dedupes redelivered chunks by
(request_id, seq, part), detects gaps, and reports a request complete when the `last` chunk
and everything before it have arrived.

Barge-in: it follows `tts.control` too (`follow_cancels`), so a cancelled request's chunks
encoded after its cancel are not delivered (their place in the stream still counts, so the
request completes); `ReceivedAudio.cancelled` says it was cut. Audio and control are keyed by
request id over the same partition count, so with a group the member reading a request's
audio also reads its cancels.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import Literal

from aiokafka import TopicPartition

from streamtts.audio.codecs import assemble
from streamtts.errors import StreamTTSError
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.lifecycle import AsyncLifecycle
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk, ContractError, ControlMessage, WordTiming, wire
from streamtts.schemas.captions import retimed


@dataclass
class ReceivedAudio:
    request_id: str
    format: str
    sample_rate: int
    chunks: list[AudioChunk] = field(default_factory=list)
    first_chunk_at: float = 0.0
    """Monotonic time the first chunk arrived here (time to first audio, subscriber side)."""
    completed_at: float = 0.0
    duplicates: int = 0
    cancelled: bool = False
    """A cancel cut it: `chunks` holds what came before it (and the stream's empty markers)."""

    @property
    def data(self) -> bytes:
        """The whole file, built from the chunks in order (see `encoders.assemble`)."""
        return assemble([c.audio for c in self.chunks], self.format, sample_rate=self.sample_rate)

    @property
    def duration_ms(self) -> float:
        return sum(c.duration_ms for c in self.chunks)

    @property
    def degraded(self) -> list[object]:
        return [c.degradation for c in self.chunks if c.degradation is not None]

    @property
    def words(self) -> list[WordTiming] | None:
        """The request's words (it asked for timestamps), timed from the audio received;
        None without timestamps."""
        if not any(c.words is not None for c in self.chunks):
            return None
        return retimed([(c.duration_ms, c.offset_ms, c.words or []) for c in self.chunks])


@dataclass
class _Partial:
    audio: ReceivedAudio
    parts: dict[tuple[int, int], AudioChunk] = field(default_factory=dict)
    last_part_of: dict[int, int] = field(default_factory=dict)
    total: int | None = None
    cancel: ControlMessage | None = None

    def add(self, chunk: AudioChunk) -> bool:
        key = (chunk.seq, chunk.part)
        if key in self.parts:
            self.audio.duplicates += 1
            return False
        if chunk.cancelled:
            self.audio.cancelled = True
        self.parts[key] = self._cut(chunk)
        # A streamed utterance's chunks say MAX_SEGMENTS until its last, which knows the total.
        self.total = chunk.total if self.total is None else min(self.total, chunk.total)
        if chunk.last_part:
            self.last_part_of[chunk.seq] = chunk.part
        return True

    def cut_at(self, cancel: ControlMessage) -> None:
        """The request was cancelled: what was encoded after the cancel is not delivered."""
        self.cancel = cancel
        self.audio.cancelled = True
        self.parts = {k: self._cut(c) for k, c in self.parts.items()}

    def _cut(self, chunk: AudioChunk) -> AudioChunk:
        if self.cancel is None or chunk.cancelled or chunk.encoded_at <= self.cancel.at:
            return chunk
        # Its place in the stream stays (the request still completes); its audio does not.
        empty = {"audio": b"", "duration_ms": 0.0, "words": None, "marks": None, "cancelled": True}
        return chunk.model_copy(update=empty)

    def complete(self) -> bool:
        if self.total is None or len(self.last_part_of) < self.total:
            return False
        return all((s, p) in self.parts for s, last in self.last_part_of.items() for p in range(last + 1))


class AudioSubscriber(AsyncLifecycle):
    """`async with AudioSubscriber(kafka, topic) as sub: async for audio in sub.completed(): ...`"""

    def __init__(
        self,
        kafka: KafkaSettings,
        topic: str,
        *,
        request_ids: Iterable[str] | None = None,
        start: Literal["end", "beginning"] = "end",
        group_id: str | None = None,
        follow_cancels: bool = True,
    ) -> None:
        self.kafka = kafka
        self.topic = topic
        self.control_topic = TopicNames(kafka.topic_prefix).control if follow_cancels else None
        self._cancels: dict[str, ControlMessage] = {}
        """Cancels seen of wanted requests not complete yet (a cancel may come first)."""
        self.wanted = set(request_ids) if request_ids is not None else None
        self.start_at = start
        self.group_id = group_id
        self._consumer = make_consumer(
            kafka, group_id=group_id, auto_offset_reset="latest" if start == "end" else "earliest"
        )
        self._partial: dict[str, _Partial] = {}
        self._tenant: dict[str, str] = {}
        self._ready: deque[ReceivedAudio] = deque()
        self._yielded: set[str] = set()
        self.first_chunk_at: dict[str, float] = {}

    async def start(self) -> None:
        try:
            await self._consumer.start()
            control = []
            if self.control_topic is not None:  # a deployment without it: no cancels to follow
                control = [
                    TopicPartition(self.control_topic, p)
                    for p in sorted(await topic_partitions(self.kafka, self.control_topic))
                ]
            if self.group_id:
                self._consumer.subscribe([self.topic, *({tp.topic for tp in control})])
                return
            partitions = await topic_partitions(self.kafka, self.topic)
            if not partitions:
                raise StreamTTSError(f"audio topic {self.topic!r} does not exist")
            tps = [TopicPartition(self.topic, p) for p in sorted(partitions)] + control
            self._consumer.assign(tps)
            if self.start_at == "end":
                await self._consumer.seek_to_end(*tps)
            else:
                await self._consumer.seek_to_beginning(*tps)
            for tp in tps:  # pin the start position now, before any request is sent
                await self._consumer.position(tp)
        except BaseException:
            await self._consumer.stop()
            raise

    async def stop(self) -> None:
        await self._consumer.stop()

    def add_request_ids(self, ids: Iterable[str]) -> None:
        if self.wanted is None:
            self.wanted = set()
        self.wanted.update(ids)

    async def completed(self, timeout_s: float | None = None) -> AsyncIterator[ReceivedAudio]:
        """Yield each wanted request once its audio is complete; stops after all wanted ones
        (when ids were given) or at the timeout."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout_s is None else loop.time() + timeout_s
        while True:
            while self._ready:
                audio = self._ready.popleft()
                self._yielded.add(audio.request_id)
                yield audio
            if self.wanted is not None and self.wanted <= self._yielded:
                return
            if deadline is not None and loop.time() >= deadline:
                return
            await self._pump(
                500 if deadline is None else int(max(0.0, min(0.5, deadline - loop.time())) * 1000)
            )

    async def wait_first_chunk(self, request_id: str, timeout_s: float) -> float:
        """Wait until `request_id`'s first chunk arrived; returns its monotonic arrival time.
        Requests completing meanwhile are kept for `completed()`."""
        async with asyncio.timeout(timeout_s):
            while request_id not in self.first_chunk_at:
                await self._pump(300)
        return self.first_chunk_at[request_id]

    async def _pump(self, wait_ms: int) -> None:
        batch = await self._consumer.getmany(timeout_ms=wait_ms)
        for tp, records in batch.items():
            for record in records:
                if tp.topic == self.control_topic:
                    audio = self._cancel(record.value)
                else:
                    audio = self._accept(record.value, record.headers)
                if audio is not None and audio.request_id not in self._yielded:
                    self._ready.append(audio)

    def _cancel(self, value: bytes) -> ReceivedAudio | None:
        try:
            cancel = ControlMessage.from_bytes(value)
        except ContractError:
            return None
        rid = cancel.request_id
        if (self.wanted is not None and rid not in self.wanted) or rid in self._yielded:
            return None
        partial = self._partial.get(rid)
        if partial is None:
            self._cancels[rid] = cancel  # its chunks come later (or never: then it is kept a while)
            while len(self._cancels) > 10_000:
                self._cancels.pop(next(iter(self._cancels)))
        elif self._tenant.get(rid) == cancel.tenant:
            partial.cut_at(cancel)  # another tenant's cancel matches nothing
        return None

    def _accept(self, value: bytes, headers: object = None) -> ReceivedAudio | None:
        try:
            chunk = wire.decode(AudioChunk, value, headers)
        except ContractError:
            return None  # not ours to judge; the producing stage dead-letters bad output
        rid = chunk.request_id
        if self.wanted is not None and rid not in self.wanted:
            return None
        now = time.monotonic()
        partial = self._partial.get(rid)
        if partial is None:
            partial = self._partial[rid] = _Partial(
                ReceivedAudio(rid, chunk.format, chunk.sample_rate, first_chunk_at=now)
            )
            self._tenant[rid] = chunk.tenant
            self.first_chunk_at[rid] = now
            early = self._cancels.pop(rid, None)
            if early is not None and early.tenant == chunk.tenant:
                partial.cut_at(early)
        partial.add(chunk)
        if not partial.complete():
            return None
        audio = partial.audio
        audio.chunks = [partial.parts[k] for k in sorted(partial.parts)]
        audio.completed_at = now
        del self._partial[rid]
        self._tenant.pop(rid, None)
        return audio
