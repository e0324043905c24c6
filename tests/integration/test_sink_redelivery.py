"""Chunks of finished requests that are read again after a restart (they lie past the
committed offset, behind an unfinished request) never produce a second result — in either
processing guarantee."""

from __future__ import annotations

import asyncio

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

from streamtts.runtime.kafka import client_kwargs, make_consumer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, FilePart, TTSRequest
from streamtts.worker import Worker
from tests.factories import file_part, request
from tests.services import Services

pytestmark = pytest.mark.integration


async def _sink(kafka: KafkaSettings, services: Services, pipeline: PipelineSettings) -> Worker:
    worker = Worker(["sink"], Settings(kafka=kafka, s3=services.s3), pipeline, ops=False)
    await worker.start()
    async with asyncio.timeout(60):
        while not worker.service("sink").assigned:  # noqa: ASYNC110 - the group join has no event
            await asyncio.sleep(0.1)
    return worker


async def _results_until(results, seen: list[CompletionResult], request_id: str) -> None:  # type: ignore[no-untyped-def]
    """Read results into `seen` until `request_id`'s is among them."""
    async with asyncio.timeout(60):
        while not any(r.request_id == request_id for r in seen):
            for records in (await results.getmany(timeout_ms=500)).values():
                seen.extend(CompletionResult.from_bytes(r.value) for r in records)


async def _read_to_end(results, seen: list[CompletionResult]) -> None:  # type: ignore[no-untyped-def]
    """Every result written so far: a second result of a request the sink finished before the
    last one seen may sit on another partition of tts.results, not yet read."""
    parts = list(results.assignment())
    ends = await results.end_offsets(parts)
    async with asyncio.timeout(30):
        while [tp for tp in parts if await results.position(tp) < ends[tp]]:
            for records in (await results.getmany(timeout_ms=500)).values():
                seen.extend(CompletionResult.from_bytes(r.value) for r in records)


def _statuses(seen: list[CompletionResult]) -> dict[str, list[str]]:
    """Each request's result statuses, in the order they were read."""
    out: dict[str, list[str]] = {}
    for r in seen:
        out.setdefault(r.request_id, []).append(r.status)
    return out


def _two_requests(finished_text: str) -> tuple[TTSRequest, TTSRequest, list[FilePart], list[FilePart]]:
    """An unfinished request (its second chunk comes later) and one finished meanwhile: the
    first holds the partition's commit back, so the second's chunks lie past it."""
    unfinished, finished = request("still coming"), request(finished_text)
    return (
        unfinished,
        finished,
        [file_part(unfinished, seq, 2, samples=2400) for seq in range(2)],
        [file_part(finished, seq, 2, samples=2400) for seq in range(2)],
    )


async def _clients(kafka: KafkaSettings, topics: TopicNames) -> tuple[AIOKafkaProducer, AIOKafkaConsumer]:
    """A plain producer of chunks and a read-committed reader of the results, started."""
    producer = AIOKafkaProducer(**client_kwargs(kafka), enable_idempotence=True)
    await producer.start()
    results = make_consumer(kafka, topics.results, group_id=None)
    await results.start()
    return producer, results


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_no_second_result_for_chunks_read_again_after_a_restart(
    guarantee: str,
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    pipeline_settings: PipelineSettings,
) -> None:
    pipeline = pipeline_settings.replace(processing_guarantee=guarantee)
    unfinished, finished, (c0, c1), (f0, f1) = _two_requests("done before the restart")
    producer, results = await _clients(kafka_settings, topics)
    seen: list[CompletionResult] = []

    async def send(chunk) -> None:  # type: ignore[no-untyped-def]
        # One partition for all: the unfinished request holds the committed offset back.
        await producer.send_and_wait(
            topics.file_parts, chunk.to_bytes(), key=chunk.request_id.encode(), partition=0
        )

    try:
        worker = await _sink(kafka_settings, services, pipeline)
        try:
            for chunk in (c0, f0, f1):
                await send(chunk)
            await _results_until(results, seen, finished.request_id)
        finally:
            await worker.stop()  # commits up to c0: f0 and f1 will be read again
        worker = await _sink(kafka_settings, services, pipeline)
        try:
            await send(c1)
            await _results_until(results, seen, unfinished.request_id)  # after the re-read of f0, f1
            await _read_to_end(results, seen)
        finally:
            await worker.stop()
    finally:
        await results.stop()
        await producer.stop()
    assert _statuses(seen) == {finished.request_id: ["completed"], unfinished.request_id: ["completed"]}


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
async def test_a_sink_taking_over_a_live_peers_partition_does_not_finish_its_requests_again(
    guarantee: str,
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    pipeline_settings: PipelineSettings,
) -> None:
    """Two sinks in one group. The one that will take over started first, so its memory of
    finished requests was read before the peer finished anything. The peer finishes a request
    whose chunks lie past its last commit (an unfinished one holds the commit back), then
    leaves; the taker re-reads those chunks and must know from the results, not from its own
    memory, that the request is finished (the network-fault checker found it finished twice)."""
    pipeline = pipeline_settings.replace(processing_guarantee=guarantee)
    unfinished, finished, (c0, c1), (f0, f1) = _two_requests("done by the peer")
    producer, results = await _clients(kafka_settings, topics)
    seen: list[CompletionResult] = []

    try:
        taker = await _sink(kafka_settings, services, pipeline)
        try:
            peer = await _sink(kafka_settings, services, pipeline)
            try:
                async with asyncio.timeout(60):  # the taker gave the peer its share
                    while not (owned := peer.service("sink").checkpoint.owned):  # noqa: ASYNC110
                        await asyncio.sleep(0.1)  # the group's rebalance has no event outside it
                _, partition = min(owned)
                for chunk in (c0, f0, f1):  # all on a partition the peer holds
                    await producer.send_and_wait(
                        topics.file_parts,
                        chunk.to_bytes(),
                        key=chunk.request_id.encode(),
                        partition=partition,
                    )
                await _results_until(results, seen, finished.request_id)
            finally:
                await peer.stop()  # commits up to c0: the taker reads f0 and f1 again
            await producer.send_and_wait(
                topics.file_parts, c1.to_bytes(), key=c1.request_id.encode(), partition=partition
            )
            await _results_until(results, seen, unfinished.request_id)  # after its re-read of f0, f1
            await _read_to_end(results, seen)
        finally:
            await taker.stop()
    finally:
        await results.stop()
        await producer.stop()
    assert _statuses(seen) == {finished.request_id: ["completed"], unfinished.request_id: ["completed"]}


async def test_a_request_whose_transaction_was_fenced_is_finished_again_when_read_again(
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    pipeline_settings: PipelineSettings,
) -> None:
    """Exactly-once. The sink finishes a request (its result sent inside the partition's open
    transaction), then its producer is fenced before that transaction commits and a rebalance
    revokes the partition: the commit on revoke fails, nothing of it is visible. When the
    partition comes back and the chunks are read again, the request must be finished again —
    the sink had remembered it as finished and skipped it, so it was lost (10 requests in a
    10-minute network-fault run)."""
    from streamtts.sinks.checkpoint import transactional_id

    pipeline = pipeline_settings.replace(processing_guarantee="exactly_once")
    req = request("fenced before its commit")
    chunks = [file_part(req, seq, 2, samples=2400) for seq in range(2)]
    producer = AIOKafkaProducer(**client_kwargs(kafka_settings), enable_idempotence=True)
    await producer.start()
    results = make_consumer(kafka_settings, topics.results, group_id=None)
    uncommitted = make_consumer(
        kafka_settings, topics.results, group_id=None, isolation_level="read_uncommitted"
    )
    await results.start()
    await uncommitted.start()
    seen: list[CompletionResult] = []
    try:
        worker = await _sink(kafka_settings, services, pipeline)
        try:
            sink = worker.service("sink")
            held = sink.checkpoint.commit

            async def hold(offsets) -> None:  # type: ignore[no-untyped-def]
                return None  # the loop's commits wait: the transaction stays open

            sink.checkpoint.commit = hold
            for chunk in chunks:
                await producer.send_and_wait(
                    topics.file_parts, chunk.to_bytes(), key=req.request_id.encode(), partition=0
                )
            sent: list[CompletionResult] = []
            await _results_until(uncommitted, sent, req.request_id)  # in the open transaction
            # A newer producer with the partition's transactional id fences the sink's.
            fencer = AIOKafkaProducer(
                **client_kwargs(kafka_settings),
                transactional_id=transactional_id(sink._group, (topics.file_parts, 0)),
            )
            await fencer.start()
            await fencer.stop()
            # A member joins: the sink's partitions are revoked and the commit on revoke is
            # fenced, while its loop goes on. The peer then leaves: the sink takes every
            # partition back and reads the chunks again.
            peer = make_consumer(kafka_settings, topics.file_parts, group_id=sink._group)
            await peer.start()
            async with asyncio.timeout(60):
                while not peer.assignment():
                    await peer.getmany(timeout_ms=200)
            sink.checkpoint.commit = held
            await peer.stop()
            await _results_until(results, seen, req.request_id)
            await _read_to_end(results, seen)
        finally:
            await worker.stop()
    finally:
        await uncommitted.stop()
        await results.stop()
        await producer.stop()
    assert [r.status for r in seen if r.request_id == req.request_id] == ["completed"]


async def test_a_sink_whose_first_assignment_comes_late_reads_the_results_again_before_its_records(
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    pipeline_settings: PipelineSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Exactly-once. A sink reads the finished requests at start, then joins its group; while
    it joins, the running peer finishes a request whose chunks lie past its commit and leaves.
    The newcomer's first assignment must read the results again (after the fence) — with only
    the start-time memory it finished the request a second time (a 12 s join in a 10-minute
    network-fault run)."""
    from streamtts.sinks.completion_sink import CompletionSink

    pipeline = pipeline_settings.replace(processing_guarantee="exactly_once")
    unfinished, finished, (c0, c1), (f0, f1) = _two_requests("done while the newcomer joins")
    producer, results = await _clients(kafka_settings, topics)
    seen: list[CompletionResult] = []

    async def send(chunk) -> None:  # type: ignore[no-untyped-def]
        await producer.send_and_wait(
            topics.file_parts, chunk.to_bytes(), key=chunk.request_id.encode(), partition=0
        )

    try:
        peer = await _sink(kafka_settings, services, pipeline)
        await send(c0)  # holds the peer's commit back: f0 and f1 will lie past it
        seeded = CompletionSink.remember_recent_results
        hooked = False

        async def seed_then_peer_finishes(self: CompletionSink) -> None:
            nonlocal hooked
            await seeded(self)
            if not hooked:  # the newcomer's start-time seed: now the peer finishes and leaves
                hooked = True
                await send(f0)
                await send(f1)
                await _results_until(results, seen, finished.request_id)
                await peer.stop()

        monkeypatch.setattr(CompletionSink, "remember_recent_results", seed_then_peer_finishes)
        newcomer = await _sink(kafka_settings, services, pipeline)
        try:
            assert hooked
            await send(c1)
            await _results_until(results, seen, unfinished.request_id)  # after its re-read of f0, f1
            await _read_to_end(results, seen)
        finally:
            await newcomer.stop()
    finally:
        await results.stop()
        await producer.stop()
    assert _statuses(seen) == {finished.request_id: ["completed"], unfinished.request_id: ["completed"]}


async def test_records_wait_while_the_results_cannot_be_read_again_and_are_finished_once_after(
    kafka_settings: KafkaSettings,
    topics: TopicNames,
    services: Services,
    pipeline_settings: PipelineSettings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The read again of the results before a gained partition's first record fails (the
    brokers are away): the records are put back, not handled and not lost; once the read
    succeeds they are finished, once."""
    from aiokafka.errors import KafkaConnectionError

    from streamtts.sinks.completion_sink import CompletionSink

    pipeline = pipeline_settings.replace(processing_guarantee="exactly_once")
    req = request("read again after the brokers came back")
    producer, results = await _clients(kafka_settings, topics)
    seen: list[CompletionResult] = []
    reads = 0
    real = CompletionSink.remember_recent_results

    async def fails_once_after_the_seed(self: CompletionSink) -> None:
        nonlocal reads
        reads += 1
        if reads == 2:  # the first read again, before the first record
            raise KafkaConnectionError("brokers away")
        await real(self)

    monkeypatch.setattr(CompletionSink, "remember_recent_results", fails_once_after_the_seed)
    try:
        for seq in range(2):
            chunk = file_part(req, seq, 2, samples=2400)
            await producer.send_and_wait(
                topics.file_parts, chunk.to_bytes(), key=req.request_id.encode(), partition=0
            )
        sink = await _sink(kafka_settings, services, pipeline)
        try:
            await _results_until(results, seen, req.request_id)
            await _read_to_end(results, seen)
        finally:
            await sink.stop()
    finally:
        await results.stop()
        await producer.stop()
    assert reads >= 3
    assert [r.status for r in seen if r.request_id == req.request_id] == ["completed"]
