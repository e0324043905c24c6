"""One request as the gateway follows it: its chunks released in (seq, part) order (redeliveries
dropped), its result, its failure, and the live streams of its audio to clients. Readers follow
the chunk list at their own pace (`chunks_in_order`); every change wakes them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal

from streamtts.gateway.delivery import Delivery, heard_ms
from streamtts.schemas import AudioChunk, CompletionResult, Degradation

Status = Literal["queued", "streaming", "completed", "failed", "cancelled"]


class StreamFailed(Exception):
    """The request failed (dead-lettered or a failed result) before all its audio arrived."""


class StreamIncomplete(Exception):
    """The request completed but this process did not see all its chunks (use the stored file)."""


@dataclass
class RequestState:
    request_id: str
    tenant: str
    format: str
    expects_result: bool
    """True when the request asked for storage: the sink's result, not the last chunk, ends it."""
    submitted_at: float = field(default_factory=time.monotonic)
    status: Status = "queued"
    chunks: list[AudioChunk] = field(default_factory=list)
    result: CompletionResult | None = None
    degradations: list[Degradation] = field(default_factory=list)
    error: str | None = None
    first_chunk_at: float | None = None
    finished_at: float | None = None
    streamed: bool = False
    """Every chunk up to the `last` one has been released in order."""
    listeners: int = 0
    audio_bytes: int = 0
    """Audio held for this request (released and waiting chunks): the cache is bounded in bytes."""
    tracked: bool = False
    """Registered before submission, so every chunk passes through this process."""
    deliveries: list[Delivery] = field(default_factory=list)
    """Live streams of this request's audio to clients (see `gateway.delivery`)."""
    heard_ms: float | None = None
    """Set when a cancel stopped its live deliveries: the audio the listener got."""
    traceparent: str | None = None
    """The request's W3C trace context (the caller's, or one the gateway started)."""
    on_first_chunk: Callable[[], None] | None = None
    """Told once, when the first audio chunk arrives (the gateway's first-audio span)."""
    on_last_chunk: Callable[[], None] | None = None
    """Told once, when every chunk up to the last has arrived (the gateway's last-audio span)."""
    _pending: dict[tuple[int, int], AudioChunk] = field(default_factory=dict)
    _next: tuple[int, int] = (0, 0)
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def terminal(self) -> bool:
        return self.status in ("completed", "failed", "cancelled")

    @property
    def audio_ms(self) -> float:
        return sum(c.duration_ms for c in self.chunks)

    def add_chunk(self, chunk: AudioChunk) -> None:
        key = (chunk.seq, chunk.part)
        if key < self._next or key in self._pending or self.streamed:
            return  # a redelivered chunk (at-least-once upstream)
        self._pending[key] = chunk
        self.audio_bytes += len(chunk.audio)
        # Release in (seq, part) order; a chunk that overtook its predecessor waits here.
        while self._next in self._pending:
            c = self._pending.pop(self._next)
            self.chunks.append(c)
            if c.degradation is not None:
                self.degradations.append(c.degradation)
            self._next = (c.seq + 1, 0) if c.last_part else (c.seq, c.part + 1)
            self.streamed = c.last
        if self.first_chunk_at is None:
            self.first_chunk_at = time.monotonic()
            if self.on_first_chunk is not None:
                self.on_first_chunk()
        if self.streamed and self.on_last_chunk is not None:
            told, self.on_last_chunk = self.on_last_chunk, None
            told()
        if self.status == "queued":
            self.status = "streaming"
        if self.streamed and not self.expects_result and self.status != "failed":
            self._finish("cancelled" if any(c.cancelled for c in self.chunks) else "completed")
        self._notify()

    def add_result(self, result: CompletionResult) -> None:
        self.result = result
        if result.degraded:
            self.degradations = list(result.degraded)  # the sink's list is the whole request's
        if result.status == "failed":
            self.error = result.error or "failed"
        self._finish(result.status)
        self._notify()

    def fail(self, reason: str) -> None:
        if self.terminal:
            return
        self.error = reason
        self._finish("failed")
        self._notify()

    def deliver(self, delivery: Delivery) -> Delivery:
        """Register a live stream of this request (stopped at once if a cancel came first)."""
        self.deliveries.append(delivery)
        if self.heard_ms is not None:
            delivery.stopped = True
        return delivery

    def stop_deliveries(self, played_ms: float | None) -> float | None:
        """Barge-in: stop every live stream of this request; returns what was heard (None
        when nothing was being streamed: then nothing changes). Readers waiting in
        `chunks_in_order` wake up."""
        live = [d for d in self.deliveries if d.live]
        if not live:
            return None
        for d in live:
            d.stop()
        heard = heard_ms(self.deliveries, played_ms)
        self.heard_ms = heard if self.heard_ms is None or heard is None else min(self.heard_ms, heard)
        self._notify()
        return self.heard_ms

    def heard_until(self, heard_ms: float) -> bool:
        """A request wholly written to its client, but played only to `heard_ms` when the
        client was cut (fast pacing leaves audio in the client's buffer): that is what was
        heard. False when it had been heard whole (nothing changes)."""
        sent = max((d.sent_ms for d in self.deliveries), default=0.0)
        if heard_ms >= sent or (self.heard_ms is not None and self.heard_ms <= heard_ms):
            return False
        self.heard_ms = max(0.0, heard_ms)
        self._notify()
        return True

    async def wait_result(self, timeout_s: float) -> CompletionResult:
        """The sink's result (or a failure), once it arrives."""
        async with asyncio.timeout(timeout_s):
            while self.result is None:
                changed = self._changed
                await changed.wait()
        return self.result

    def _finish(self, status: Status) -> None:
        self.status = status
        self.finished_at = self.finished_at or time.monotonic()

    def _notify(self) -> None:
        # Wake every waiter once; later waiters wait on the fresh event.
        self._changed.set()
        self._changed = asyncio.Event()

    async def chunks_in_order(
        self, idle_timeout_s: float, delivery: Delivery | None = None
    ) -> AsyncIterator[AudioChunk]:
        """Every chunk from the first, as they arrive; ends after the `last` one, or at once
        when `delivery` is stopped (a cancel: what is not written yet is dropped).

        Raises StreamFailed, StreamIncomplete, or TimeoutError when nothing new arrives for
        `idle_timeout_s`.
        """
        i = 0
        self.listeners += 1
        try:
            while True:
                changed = self._changed
                while i < len(self.chunks):
                    if delivery is not None and delivery.stopped:
                        return
                    yield self.chunks[i]
                    i += 1
                if self.streamed or (delivery is not None and delivery.stopped):
                    return
                if self.status == "failed":
                    raise StreamFailed(self.error or "failed")
                if self.status in ("completed", "cancelled") and not self.tracked:
                    # Known only from its result: this process never saw its chunks. (A tracked
                    # request's result can overtake its last chunks: the sink and the encode
                    # stage read tts.pcm independently, so those keep streaming.)
                    raise StreamIncomplete(self.request_id)
                async with asyncio.timeout(idle_timeout_s):
                    await changed.wait()
        finally:
            self.listeners -= 1

    async def wait_terminal(self, timeout_s: float) -> None:
        async with asyncio.timeout(timeout_s):
            while not self.terminal:
                await self._changed.wait()
