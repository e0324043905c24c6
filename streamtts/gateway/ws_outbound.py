"""The WebSocket session's way out: one bounded queue of frames and events, the one task that
writes them to the socket, and the session clock (the audio written, which is what the client
can have heard).

Session-level events (`session`, `started`, `cancelled`, …) stay in the queue through a
cancel; a sentence's frames and events (audio, chunk, words, marks, degraded, completed) go
as `Queued` items and a cancel drops those not written yet. Back-pressure: a client that
reads nothing for `send_timeout_s` while the queue is full is a `SlowConsumer`.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.websockets import WebSocket

from streamtts.gateway.delivery import Delivery

_CLOSE = object()


class SlowConsumer(Exception):
    """The client read nothing for the send timeout while its queue was full."""


@dataclass(frozen=True)
class Queued:
    """A frame of one sentence in the outbound queue, with the audio it carries."""

    payload: bytes | str
    delivery: Delivery
    audio_ms: float = 0.0
    ends: bool = False
    """The sentence's last frame: once written, all of it is on the wire."""


@dataclass
class Outbound:
    ws: WebSocket
    queue_frames: int
    send_timeout_s: float
    queue: asyncio.Queue[Any] = field(init=False)
    sent_bytes: int = 0
    """Bytes of every frame sent to the client (the audit event's `bytes`)."""
    starts_ms: dict[str, float] = field(default_factory=dict)
    """Per sentence request: where its first written frame sits on the session clock."""
    written_ms: float = 0.0
    """The session clock: audio written to the socket (what the client can have heard)."""
    written_frames: int = 0
    queued_ms: float = 0.0
    """Audio handed to the queue (the clock of `session_offset_ms`)."""
    queued_frames: int = 0
    unwritten_ms: float = 0.0
    """Audio in the queue, not written yet."""
    unwritten_frames: int = 0

    def __post_init__(self) -> None:
        self.queue = asyncio.Queue(maxsize=self.queue_frames)

    async def event(self, event: dict[str, Any]) -> None:
        """A session-level event: a cancel keeps it."""
        await self.queue.put(orjson.dumps(event).decode())

    async def frame(
        self, delivery: Delivery, frame: bytes | dict[str, Any], audio_ms: float = 0.0, *, ends: bool = False
    ) -> None:
        """Queue one frame of a sentence (a cancel drops it until the socket has it)."""
        item = orjson.dumps(frame).decode() if isinstance(frame, dict) else frame
        try:
            async with asyncio.timeout(self.send_timeout_s):
                await self.queue.put(Queued(item, delivery, audio_ms, ends))
        except TimeoutError:
            raise SlowConsumer() from None
        if audio_ms:
            self.unwritten_ms += audio_ms
            self.unwritten_frames += 1

    async def close(self) -> None:
        """The writer ends after what is queued before this."""
        await self.queue.put(_CLOSE)

    def drop_sentence_frames(self, request_ids: set[str] | None = None) -> None:
        """Every sentence frame not written yet goes (or only those of `request_ids`);
        session events stay, in order. The clock loses the audio dropped (another reply
        may play on: its offsets count from what the client gets)."""
        kept = []
        dropped_ms, dropped_frames = 0.0, 0
        while not self.queue.empty():
            item = self.queue.get_nowait()
            if not isinstance(item, Queued) or (
                request_ids is not None and item.delivery.request_id not in request_ids
            ):
                kept.append(item)
            elif item.audio_ms:
                dropped_ms += item.audio_ms
                dropped_frames += 1
        for item in kept:
            self.queue.put_nowait(item)
        self.unwritten_ms -= dropped_ms
        self.unwritten_frames -= dropped_frames
        self.queued_ms -= dropped_ms
        self.queued_frames -= dropped_frames

    def heard_of(self, delivery: Delivery, heard_at: float) -> float:
        """What of a request was heard when playback stood at `heard_at` (session clock)."""
        start = self.starts_ms.get(delivery.request_id)
        return 0.0 if start is None else max(0.0, min(delivery.sent_ms, heard_at - start))

    def plays_past(self, delivery: Delivery, played_ms: float | None) -> bool:
        """A request wholly written whose end the client's playback (`played_ms`) had not
        reached: audio still in the client's buffer."""
        start = self.starts_ms.get(delivery.request_id)
        if played_ms is None or delivery.live or start is None:
            return False
        return start + delivery.sent_ms > played_ms

    def restart_clock(self) -> float:
        """After a cancel: the queued clock goes on from what was written and the audio still
        queued (another reply's, when one context was cut); returns it."""
        self.queued_ms = self.written_ms + self.unwritten_ms
        self.queued_frames = self.written_frames + self.unwritten_frames
        return self.queued_ms

    async def write(self) -> None:
        """The writer: every queued item to the socket, in order, until `close`."""
        while (item := await self.queue.get()) is not _CLOSE:
            if isinstance(item, Queued):
                delivery = item.delivery
                if item.audio_ms:
                    self.unwritten_ms -= item.audio_ms
                    self.unwritten_frames -= 1
                if delivery.stopped:
                    continue  # cancelled (from elsewhere) after it was queued: never sent
                if item.audio_ms:
                    # Counted before the write: once it starts, the frame is on the wire.
                    self.starts_ms.setdefault(delivery.request_id, self.written_ms)
                    delivery.wrote(item.audio_ms)
                    self.written_ms += item.audio_ms
                    self.written_frames += 1
                if item.ends:
                    delivery.ended = True
                frame = item.payload
            else:
                frame = item
            if isinstance(frame, bytes):
                await self.ws.send_bytes(frame)
                self.sent_bytes += len(frame)
            else:
                await self.ws.send_text(frame)
                self.sent_bytes += len(frame.encode())
