"""One shared reader of the pipeline's output topics, fanned out to per-request waiters.

The gateway reads `tts.audio`, `tts.results` and the stages' dead-letter topics with one
consumer, without a consumer group (every gateway replica sees everything; none steals
partitions) and from the end (attached before the first request is submitted). Chunks of
requests this process submitted are kept, reordered by (seq, part) and deduplicated, in a
bounded status cache (LRU + TTL); readers follow a request's chunk list at their own pace, so
a slow reader never blocks the consumer or other readers. Results of any request are cached
too (they are small), so a status lookup works for requests another replica submitted; a
request the cache lost is looked up in `tts.results` history (bounded look-back).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Literal

from aiokafka import AIOKafkaConsumer, TopicPartition

from streamtts.gateway.delivery import Delivery, heard_ms
from streamtts.gateway.metrics import GatewayMetrics
from streamtts.runtime.kafka import make_consumer, topic_partitions
from streamtts.runtime.lifecycle import cancel_and_wait
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import TOPOLOGY
from streamtts.schemas import (
    AudioChunk,
    CompletionResult,
    ContractError,
    ControlMessage,
    DeadLetter,
    Degradation,
    wire,
)

log = logging.getLogger("streamtts.gateway.fanout")
Status = Literal["queued", "streaming", "completed", "failed", "cancelled"]
# The sink reports its own failures as results; the stages that write no results only
# dead-letter, so their DLQs are where the gateway learns of their failures.
DLQ_STAGES = tuple(spec.name for spec in TOPOLOGY if "results" not in spec.outputs)


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


class Fanout:
    def __init__(
        self,
        kafka: KafkaSettings,
        metrics: GatewayMetrics,
        *,
        entries: int,
        ttl_s: float,
        history_lookback_s: float,
        max_bytes: int = 256 * 1024 * 1024,
        on_cancel: Callable[[RequestState, ControlMessage], None] | None = None,
    ) -> None:
        self.kafka = kafka
        self.topics = TopicNames(kafka.topic_prefix)
        self.metrics = metrics
        self.entries = entries
        self.max_bytes = max_bytes
        self.cached_bytes = 0
        """Audio bytes held by all cached requests (bounded by `max_bytes`, not only entries)."""
        self.ttl_s = ttl_s
        self.history_lookback_s = history_lookback_s
        self.cache: OrderedDict[str, RequestState] = OrderedDict()
        self.last_poll = 0.0
        self._consumer: AIOKafkaConsumer | None = None
        self._task: asyncio.Task[None] | None = None
        self._history_gate = asyncio.Semaphore(1)  # history scans are costly: one at a time
        self.history_waiting = 0
        """Lookups waiting for the running history scan (the gateway bounds this line)."""
        self.on_cancel = on_cancel
        """Called for a cancel on `tts.control` of a request held here (whoever sent it)."""

    async def start(self) -> None:
        consumer = make_consumer(self.kafka, group_id=None, auto_offset_reset="latest")
        await consumer.start()
        try:
            tps: list[TopicPartition] = []
            wanted = [
                self.topics.audio,
                self.topics.results,
                self.topics.control,  # cancels from any source stop this gateway's streams too
                *(self.topics.dlq(s) for s in DLQ_STAGES),
            ]
            for topic in wanted:
                tps += [TopicPartition(topic, p) for p in sorted(await topic_partitions(self.kafka, topic))]
            if not any(tp.topic == self.topics.audio for tp in tps):
                from streamtts.errors import StreamTTSError

                raise StreamTTSError(
                    f"audio topic {self.topics.audio!r} does not exist; run `streamtts topics apply`"
                )
            consumer.assign(tps)
            await consumer.seek_to_end(*tps)
            for tp in tps:  # pin "end" now, before any request is submitted through us
                await consumer.position(tp)
        except BaseException:
            await consumer.stop()
            raise
        self._consumer = consumer
        self.last_poll = time.monotonic()
        self._task = asyncio.create_task(self._run(), name="gateway-fanout")

    async def stop(self) -> None:
        await cancel_and_wait(self._task)
        if self._consumer:
            await self._consumer.stop()

    @property
    def healthy(self) -> bool:
        return self._task is not None and not self._task.done() and time.monotonic() - self.last_poll < 10.0

    def track(self, request_id: str, tenant: str, fmt: str, *, expects_result: bool) -> RequestState:
        """Register a request before it is submitted, so none of its chunks are missed."""
        state = RequestState(request_id, tenant, fmt, expects_result, tracked=True)
        self._insert(state)
        return state

    def forget(self, request_id: str) -> None:
        self._drop(request_id)

    def _drop(self, request_id: str) -> None:
        state = self.cache.pop(request_id, None)
        if state is not None:
            self.cached_bytes -= state.audio_bytes

    def get(self, request_id: str) -> RequestState | None:
        state = self.cache.get(request_id)
        if state is not None:
            self.cache.move_to_end(request_id)
        return state

    async def lookup(self, request_id: str) -> RequestState | None:
        """The cached state, else one rebuilt from the request's result in `tts.results`."""
        state = self.get(request_id)
        if state is not None:
            return state
        self.history_waiting += 1
        entered = False
        try:
            async with self._history_gate:
                entered = True
                self.history_waiting -= 1
                result = await self._result_from_history(request_id)
        finally:
            if not entered:  # cancelled while waiting in line
                self.history_waiting -= 1
        if result is None:
            return None
        state = self.get(request_id)  # it may have arrived while we searched
        if state is None:
            state = RequestState(result.request_id, result.tenant, result.format, expects_result=True)
            state.add_result(result)
            self._insert(state)
        return state

    async def _run(self) -> None:
        assert self._consumer is not None
        last_sweep = 0.0
        while True:
            try:
                batch = await self._consumer.getmany(timeout_ms=500, max_records=200)
            except asyncio.CancelledError:
                raise
            except Exception as err:  # the client reconnects by itself; keep the loop alive
                log.warning("fanout poll failed: %s", err)
                await asyncio.sleep(1.0)
                continue
            self.last_poll = time.monotonic()
            for tp, records in batch.items():
                for record in records:
                    self._dispatch(tp.topic, record.key, record.value, record.headers)
            if self.last_poll - last_sweep > 1.0:
                last_sweep = self.last_poll
                self._sweep()

    def _dispatch(self, topic: str, key: bytes | None, value: bytes | None, headers: object = ()) -> None:
        rid = key.decode(errors="replace") if key else ""
        if topic == self.topics.audio:
            state = self.cache.get(rid)
            if state is None:
                return  # not submitted through this gateway: not ours to hold
            try:
                chunk = wire.decode(AudioChunk, value, headers)
            except ContractError:
                return
            if chunk.tenant != state.tenant:
                return  # another tenant's request with the same id: never mixed into this one
            self.metrics.fanout_records.labels("audio").inc()
            before = state.audio_bytes
            state.add_chunk(chunk)
            self.cached_bytes += state.audio_bytes - before
            if self.cached_bytes > self.max_bytes:
                self._evict(len(self.cache), until=lambda: self.cached_bytes <= self.max_bytes)
        elif topic == self.topics.results:
            try:
                result = CompletionResult.from_bytes(value)
            except ContractError:
                return
            self.metrics.fanout_records.labels("result").inc()
            state = self.cache.get(result.request_id)
            if state is not None and state.tenant != result.tenant:
                return  # another tenant's request with the same id
            if state is None:
                state = RequestState(result.request_id, result.tenant, result.format, expects_result=True)
                self._insert(state)
            state.add_result(result)
        elif topic == self.topics.control:
            state = self.cache.get(rid)
            if state is None or self.on_cancel is None:
                return
            try:
                message = ControlMessage.from_bytes(value)
            except ContractError:
                return
            if message.tenant == state.tenant:  # another tenant's cancel matches nothing
                self.on_cancel(state, message)
        else:
            state = self.cache.get(rid)
            if state is None:
                return
            try:
                letter = DeadLetter.from_record(key, value, headers)
            except ContractError:
                return
            self.metrics.fanout_records.labels("dead_letter").inc()
            # The segment stage's messages are written for the requester ("invalid SSML at
            # line 1, column 9: …"); later stages' are internal: only their reason is shown.
            detail = f": {letter.error_message[:300]}" if letter.stage == "segment" else ""
            state.fail(f"{letter.stage}: {letter.reason}{detail}")

    def _insert(self, state: RequestState) -> None:
        if state.request_id in self.cache:
            self._drop(state.request_id)
        self.cache[state.request_id] = state
        self.cached_bytes += state.audio_bytes
        if len(self.cache) > self.entries:
            self._evict(len(self.cache) - self.entries)
        self.metrics.cache_entries.set(len(self.cache))

    def _evict(self, n: int, until: Callable[[], bool] | None = None) -> None:
        """Drop up to `n` requests, oldest first (or until `until()` holds): finished ones
        first, then idle unfinished ones; never one a client is reading."""
        for pick in (lambda s: s.terminal and not s.listeners, lambda s: not s.listeners):
            for rid in [rid for rid, s in self.cache.items() if pick(s)]:
                if n <= 0 or (until is not None and until()):
                    return
                self._drop(rid)
                n -= 1
        self.metrics.cache_entries.set(len(self.cache))

    def _sweep(self) -> None:
        now = time.monotonic()
        expired = [
            rid
            for rid, s in self.cache.items()
            if not s.listeners
            and (
                (s.finished_at is not None and now - s.finished_at > self.ttl_s)
                or (s.finished_at is None and now - s.submitted_at > 4 * self.ttl_s)
            )
        ]
        for rid in expired:
            self._drop(rid)
        self.metrics.cache_entries.set(len(self.cache))

    async def _result_from_history(self, request_id: str) -> CompletionResult | None:
        topic = self.topics.results
        consumer = make_consumer(self.kafka, group_id=None, auto_offset_reset="earliest")
        await consumer.start()
        found: CompletionResult | None = None
        try:
            tps = [TopicPartition(topic, p) for p in sorted(await topic_partitions(self.kafka, topic))]
            if not tps:
                return None
            consumer.assign(tps)
            since_ms = int((time.time() - self.history_lookback_s) * 1000)
            starts = await consumer.offsets_for_times({tp: since_ms for tp in tps})
            ends = await consumer.end_offsets(tps)
            todo: set[TopicPartition] = set()
            for tp in tps:
                start = starts.get(tp)
                if start is None or start.offset >= ends[tp]:
                    continue
                consumer.seek(tp, start.offset)
                todo.add(tp)
            key = request_id.encode()
            async with asyncio.timeout(15.0):
                while todo:
                    batch = await consumer.getmany(*todo, timeout_ms=500)
                    for tp, records in batch.items():
                        for record in records:
                            if record.key == key:
                                with contextlib.suppress(ContractError):
                                    found = CompletionResult.from_bytes(record.value)
                            if record.offset + 1 >= ends[tp]:
                                todo.discard(tp)
                    for tp in list(todo):
                        if await consumer.position(tp) >= ends[tp]:
                            todo.discard(tp)
        except TimeoutError:
            log.warning("results history search for %s timed out", request_id)
        finally:
            await consumer.stop()
        return found
