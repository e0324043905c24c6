"""Re-drive a rolled-back candidate's stranded requests to the stable release, exactly once.

A candidate whose workers are gone (crashed, never started) leaves what its lane holds
unread: without this, those requests never complete. Per pool of the lane, while the lane's
consumer group has no member:

1. start a producer with the lane's transactional id: it fences any earlier re-driver of the
   same lane (another guard, the CLI) and waits until that one's transaction is complete, so
   the committed offsets read next are the final word;
2. read the lane from the group's committed offsets (the beginning of retention where it
   never committed) up to the end offsets;
3. drop the segments of requests that already have a result on `tts.results` (the candidate
   rendered them and died before committing);
4. in one transaction: send the rest to the stable release's topic of the same pool (same
   key, same headers, `request.release` set to stable) and commit the candidate group's
   offsets to the end — a candidate worker that comes back starts after them and renders
   none of it; a re-driver that runs again finds nothing.

Segments keep their rendering headers, so the sink counts a re-driven request as the same
rendering as the candidate's: if the candidate did deliver some chunks, the first copy of each
(seq, part) wins and the request has one result. A group that has members is left alone (its
workers drain it, and Kafka refuses a commit from outside a live group anyway).
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from aiokafka import ConsumerRecord, TopicPartition

from streamtts.features.releases.lane_health import LaneHealth, lane_group, resume_at
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import describe_partitions, make_consumer, make_producer, started_admin
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.snapshot import read_ranges, snapshot
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, ContractError, Segment
from streamtts.schemas.names import POOLS

log = logging.getLogger("streamtts.releases")

REDRIVEN_FROM = "streamtts.release.redriven_from"
"""On a re-driven segment: "<lane topic>/<partition>@<offset>" it was read from."""
RequestKey = tuple[str, str]


@dataclass
class Redrive:
    """What one re-drive of a candidate's lane did."""

    release: str
    to: str
    requests: set[str] = field(default_factory=set)
    """Request ids re-driven to `to`."""
    segments: int = 0
    already_finished: set[str] = field(default_factory=set)
    """Requests found on the lane that have a result already (not re-driven)."""
    live_pools: list[str] = field(default_factory=list)
    """Pools left alone: their group has members that drain the lane."""


@dataclass(frozen=True)
class LaneRecord:
    tp: TopicPartition
    offset: int
    key: bytes | None
    value: bytes
    headers: tuple[tuple[str, bytes], ...]
    timestamp_ms: int
    request: RequestKey | None
    """(tenant, request_id) of the segment; None if the value is not a segment."""


def unfinished(records: list[LaneRecord], finished: set[RequestKey]) -> list[LaneRecord]:
    """The records to re-drive: those whose request has no result (pure)."""
    return [r for r in records if r.request is None or r.request not in finished]


def on_stable(value: bytes, stable: str) -> bytes:
    """A candidate's segment as the stable release renders it (unparsable: as it came, so
    stable's synthesize dead-letters it as it would have on the candidate)."""
    try:
        segment = Segment.from_bytes(value)
    except ContractError:
        return value
    request = segment.request.model_copy(update={"release": stable})
    return segment.model_copy(update={"request": request}).to_bytes()


async def redrive_lane(
    kafka: KafkaSettings, candidate: str, stable: str, *, topics: TopicNames | None = None
) -> Redrive:
    """Re-drive `candidate`'s stranded segments to `stable` (see the module's steps)."""
    topics = topics or TopicNames(kafka.topic_prefix)
    report = Redrive(candidate, stable)
    for pool in POOLS:
        await _redrive_pool(kafka, topics, candidate, stable, pool, report)
    if report.requests or report.already_finished:
        log_event(
            log,
            "release_lane_redriven",
            logging.WARNING,  # requests a candidate never rendered: worth a look
            release=candidate,
            to=stable,
            requests=len(report.requests),
            segments=report.segments,
            already_finished=len(report.already_finished),
            live_pools=report.live_pools or None,
        )
    return report


async def _redrive_pool(
    kafka: KafkaSettings, topics: TopicNames, candidate: str, stable: str, pool: str, report: Redrive
) -> None:
    group = lane_group(kafka, candidate, pool)
    source, target = topics.release_segments(candidate, pool), topics.release_segments(stable, pool)
    # 1. Fence earlier re-drivers of this lane (and wait for their transaction to settle).
    producer = make_producer(
        kafka, transactional_id=f"{kafka.topic_prefix}streamtts-redrive-{candidate}-{pool}"
    )
    await producer.start()
    health = LaneHealth(kafka, topics, ttl_s=0.0)
    try:
        if await health.live(candidate, pool):
            report.live_pools.append(pool)
            return
        # 2. The lane past the group's committed offsets.
        records, ends = await _unread(kafka, source, group)
        if not records:
            return
        # 3. Requests rendered already (results since the oldest stranded segment).
        since = datetime.fromtimestamp(min(r.timestamp_ms for r in records) / 1000, UTC)
        finished = await _finished(kafka, topics.results, since - timedelta(seconds=5))
        todo = unfinished(records, finished)
        report.already_finished |= {r.request[1] for r in records if r.request and r not in todo}
        # 4. The segments to stable and the candidate's offsets, together or not at all.
        async with producer.transaction():
            sent = []
            for r in todo:
                headers = [*r.headers, (REDRIVEN_FROM, f"{source}/{r.tp.partition}@{r.offset}".encode())]
                sent.append(
                    await producer.send(target, on_stable(r.value, stable), key=r.key, headers=headers)
                )
            await asyncio.gather(*sent)  # every segment acknowledged before the offsets move
            await producer.send_offsets_to_transaction(ends, group)
        report.segments += len(todo)
        report.requests |= {r.request[1] if r.request else f"{source}@{r.offset}" for r in todo}
    finally:
        await health.close()
        await producer.stop()


async def _unread(
    kafka: KafkaSettings, topic: str, group: str
) -> tuple[list[LaneRecord], dict[TopicPartition, int]]:
    """The records of `topic` past `group`'s committed offsets, and the end offsets read to."""
    async with started_admin(kafka) as admin:
        partitions = (await describe_partitions(admin, [topic])).get(topic, set())
        committed = await admin.list_consumer_group_offsets(group)
    tps = [TopicPartition(topic, p) for p in sorted(partitions)]
    if not tps:
        return [], {}
    consumer = make_consumer(kafka, group_id=None)
    await consumer.start()
    out: list[LaneRecord] = []
    try:
        begins, ends = await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
        starts: dict[TopicPartition, int] = {}
        for tp in tps:
            starts[tp] = resume_at(committed, tp, begins[tp])
        async for record in read_ranges(consumer, starts, ends):
            out.append(_lane_record(TopicPartition(record.topic, record.partition), record))
        return out, {tp: ends[tp] for tp in tps if starts[tp] < ends[tp]}
    finally:
        await consumer.stop()


def _lane_record(tp: TopicPartition, record: ConsumerRecord) -> LaneRecord:
    value = record.value or b""
    try:
        segment = Segment.from_bytes(value)
        request: RequestKey | None = (segment.request.tenant, segment.request_id)
    except ContractError:
        request = None
    headers = tuple((k, bytes(v or b"")) for k, v in record.headers or ())
    return LaneRecord(tp, record.offset, record.key, value, headers, record.timestamp, request)


async def _finished(kafka: KafkaSettings, results: str, since: datetime) -> set[RequestKey]:
    """(tenant, request_id) of every result on `results` since `since`."""
    found: set[RequestKey] = set()
    async for record in snapshot(kafka, results, since=since):
        try:
            result = CompletionResult.from_bytes(record.value or b"")
        except ContractError:
            continue
        found.add((result.tenant, result.request_id))
    return found
