"""Load generation against a running pipeline: Poisson (open-loop) and N-client (closed-loop).

Open loop sends on a schedule whatever happens downstream, so queueing shows up as latency
(what real callers do); closed loop keeps N requests in flight, which measures the throughput
the pipeline sustains when it is never idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass

from streamtts.bench.stats import RequestRecord
from streamtts.bench.workloads import BurstPhase, WorkItem
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import STAGES, TopicNames


def poisson_schedule(rate: float, duration_s: float, rng: random.Random) -> list[float]:
    """Send offsets (s) of a Poisson process: exponential gaps with mean 1/rate."""
    if rate <= 0 or duration_s <= 0:
        return []
    out, t = [], rng.expovariate(rate)
    while t < duration_s:
        out.append(t)
        t += rng.expovariate(rate)
    return out


def burst_schedule(base_rate: float, phases: Sequence[BurstPhase], rng: random.Random) -> list[float]:
    """Poisson arrivals whose rate changes by phase (quiet → burst → quiet …)."""
    out: list[float] = []
    start = 0.0
    for phase in phases:
        out += [start + t for t in poisson_schedule(base_rate * phase.rate_factor, phase.duration_s, rng)]
        start += phase.duration_s
    return out


@dataclass(frozen=True)
class RequestShape:
    voice: str
    format: str = "mp3"


class PipelineClient:
    """Sends requests and watches both outputs of the pipeline: audio chunks (time to first
    audio, completion at the subscriber) and completion results (stored file, failures).

    Both readers attach at the end of their topics *before* anything is sent, and read every
    record of the (fresh, per-scenario) topic prefix."""

    def __init__(self, kafka: KafkaSettings) -> None:
        from streamtts.producers.request_producer import RequestProducer
        from streamtts.runtime.kafka import make_consumer
        from streamtts.sinks.subscriber import AudioSubscriber

        self.kafka = kafka
        self.topics = TopicNames(kafka.topic_prefix)
        self.producer = RequestProducer(kafka, self.topics)
        self.subscriber = AudioSubscriber(kafka, self.topics.audio)
        self._results = make_consumer(kafka, group_id=None, auto_offset_reset="latest")
        self.records: dict[str, RequestRecord] = {}
        self._done: dict[str, asyncio.Event] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def start(self) -> None:
        from streamtts.runtime.kafka import attach_at_end, partitions_of

        await self.subscriber.start()
        await self._results.start()
        await attach_at_end(self._results, await partitions_of(self.kafka, [self.topics.results]))
        await self.producer.start()
        self._tasks = [asyncio.create_task(self._read_audio()), asyncio.create_task(self._read_results())]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.producer.stop()
        await self.subscriber.stop()
        await self._results.stop()

    async def send(self, item: WorkItem, shape: RequestShape) -> RequestRecord:
        from streamtts.schemas import TTSRequest
        from streamtts.schemas.trace import TraceContext

        request = TTSRequest.new(
            item.text, voice=shape.voice, language=item.request_language, format=shape.format
        )
        rid = request.request_id
        trace = None if item.traced is None else TraceContext.start(sampled=item.traced)
        rec = RequestRecord(
            rid, len(item.text), item.lang, item.kind, sent_at=time.monotonic(), traced=item.traced
        )
        self.records[rid] = rec
        self._done[rid] = asyncio.Event()
        # The send's own ack wait counts: a caller's latency starts before it hands over.
        await self.producer.submit(request, trace=trace)
        return rec

    async def wait(self, rec: RequestRecord, timeout_s: float) -> bool:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._done[rec.request_id].wait(), timeout_s)
        return self._done[rec.request_id].is_set()

    async def wait_all(self, records: Sequence[RequestRecord], timeout_s: float) -> int:
        """Wait until every record is done or the deadline passes; returns how many are not."""
        deadline = time.monotonic() + timeout_s
        for rec in records:
            await self.wait(rec, max(0.0, deadline - time.monotonic()))
        return sum(1 for r in records if not self._done[r.request_id].is_set())

    def _check_done(self, rec: RequestRecord) -> None:
        if rec.failed or (rec.audio_done_at is not None and rec.result_at is not None):
            self._done[rec.request_id].set()

    async def _read_audio(self) -> None:
        async for audio in self.subscriber.completed():
            rec = self.records.get(audio.request_id)
            if rec is None:
                continue  # warm-up leftovers or another client's request
            rec.first_chunk_at = audio.first_chunk_at
            rec.audio_done_at = audio.completed_at
            rec.audio_s = audio.duration_ms / 1000
            rec.degraded = max(rec.degraded, len(audio.degraded))
            heads = [c for c in audio.chunks if c.part == 0]
            rec.spans = len(heads)
            rec.cache_hits = sum(c.cache == "hit" for c in heads)
            rec.first_cached = bool(heads) and heads[0].seq == 0 and heads[0].cache == "hit"
            if heads:
                rec.first_left_s = (heads[0].encoded_at - heads[0].created_at).total_seconds()
            self._check_done(rec)

    def first_chunk_seen(self, rec: RequestRecord) -> None:
        """Copy a partial request's first-chunk time (TTFA of requests that never completed)."""
        at = self.subscriber.first_chunk_at.get(rec.request_id)
        if rec.first_chunk_at is None and at is not None:
            rec.first_chunk_at = at

    async def _read_results(self) -> None:
        from streamtts.runtime.records import parsed
        from streamtts.schemas import CompletionResult

        while True:
            batch = await self._results.getmany(timeout_ms=500)
            now = time.monotonic()
            for result in parsed(batch, CompletionResult):
                rec = self.records.get(result.request_id)
                if rec is None:
                    continue
                rec.result_at = now
                rec.failed = result.status != "completed"
                rec.degraded = max(rec.degraded, len(result.degraded))
                self._check_done(rec)

    async def dlq_counts(self) -> dict[str, int]:
        """Records on each stage's dead-letter topic (the prefix is fresh: all of them are ours)."""
        from aiokafka import TopicPartition

        from streamtts.runtime.kafka import make_consumer

        consumer = make_consumer(self.kafka, group_id=None)
        await consumer.start()
        try:
            tps = [TopicPartition(self.topics.dlq(s), 0) for s in STAGES]
            ends = await consumer.end_offsets(tps)
            begins = await consumer.beginning_offsets(tps)
        finally:
            await consumer.stop()
        return {tp.topic.rsplit(".", 2)[-2]: ends[tp] - begins[tp] for tp in tps}


Progress = Callable[[str], None]


def progress_line(label: str) -> Progress:
    def say(msg: str) -> None:
        print(f"[bench] {label}: {msg}", file=sys.stderr, flush=True)

    return say


async def _ticker(client: PipelineClient, recs: list[RequestRecord], say: Progress, every_s: float) -> None:
    started = time.monotonic()
    while True:
        await asyncio.sleep(every_s)
        done = sum(1 for r in recs if r.completed_at is not None)
        say(f"{time.monotonic() - started:4.0f} s  sent {len(recs)}  done {done}")


@contextlib.asynccontextmanager
async def _watched(
    client: PipelineClient, recs: list[RequestRecord], say: Progress | None
) -> AsyncIterator[None]:
    """A load's progress line every 5 s while it runs (with `say`); once it has run, each
    request's first-chunk time copied in (the TTFA of requests that never completed)."""
    ticker = asyncio.create_task(_ticker(client, recs, say, 5.0)) if say else None
    try:
        yield
    finally:
        if ticker:
            ticker.cancel()
    for rec in recs:
        client.first_chunk_seen(rec)


async def open_loop(
    client: PipelineClient,
    items: Sequence[WorkItem],
    schedule: Sequence[float],
    shape: RequestShape,
    *,
    drain_s: float,
    say: Progress | None = None,
) -> list[RequestRecord]:
    """Send `items[i]` at `schedule[i]` seconds from now, then wait up to `drain_s` for all."""
    recs: list[RequestRecord] = []
    sends: list[asyncio.Task[RequestRecord]] = []
    start = time.monotonic()
    async with _watched(client, recs, say):
        for item, offset in zip(items, schedule, strict=False):
            delay = start + offset - time.monotonic()
            if delay > 0:
                await asyncio.sleep(delay)
            # A send must not delay the next arrival: each one is its own task.
            task = asyncio.create_task(client.send(item, shape))
            task.add_done_callback(
                lambda t: recs.append(t.result()) if not t.cancelled() and t.exception() is None else None
            )
            sends.append(task)
        recs[:] = await asyncio.gather(*sends)  # schedule order, not ack order
        await client.wait_all(recs, drain_s)
    return recs


async def closed_loop(
    client: PipelineClient,
    items: Sequence[WorkItem],
    concurrency: int,
    shape: RequestShape,
    *,
    duration_s: float,
    request_timeout_s: float,
    say: Progress | None = None,
) -> list[RequestRecord]:
    """`concurrency` clients, each sending its next text when its previous one is done, until
    the texts run out or `duration_s` has passed."""
    queue = list(reversed(items))
    recs: list[RequestRecord] = []
    deadline = time.monotonic() + duration_s

    async def client_loop() -> None:
        while queue and time.monotonic() < deadline:
            rec = await client.send(queue.pop(), shape)
            recs.append(rec)
            await client.wait(rec, request_timeout_s)

    async with _watched(client, recs, say):
        await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return recs
