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
import logging
import time
from collections import OrderedDict
from collections.abc import Callable

from aiokafka import AIOKafkaConsumer

from streamtts.gateway.metrics import GatewayMetrics
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.results_history import find_result
from streamtts.runtime.kafka import attach_at_end, make_consumer, partitions_of
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
    wire,
)

log = logging.getLogger("streamtts.gateway.fanout")
# The sink reports its own failures as results; the stages that write no results only
# dead-letter, so their DLQs are where the gateway learns of their failures.
DLQ_STAGES = tuple(spec.name for spec in TOPOLOGY if "results" not in spec.outputs)


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
            wanted = [
                self.topics.audio,
                self.topics.results,
                self.topics.control,  # cancels from any source stop this gateway's streams too
                *(self.topics.dlq(s) for s in DLQ_STAGES),
            ]
            tps = await partitions_of(self.kafka, wanted)
            if not any(tp.topic == self.topics.audio for tp in tps):
                from streamtts.errors import StreamTTSError

                raise StreamTTSError(
                    f"audio topic {self.topics.audio!r} does not exist; run `streamtts topics apply`"
                )
            await attach_at_end(consumer, tps)  # before any request is submitted through us
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
                result = await find_result(
                    self.kafka, self.topics.results, request_id, self.history_lookback_s
                )
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
