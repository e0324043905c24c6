"""Completion sink (aiokafka + minio): tts.pcm → assembled file in object storage → tts.results.

Per request, once every (seq, part) has arrived:
1. assemble the PCM in order and encode the whole file once (proper headers, one stream);
2. upload it under a deterministic key (retried with capped exponential backoff);
3. publish the completion result (claim check) with the idempotent producer, acks=all;
4. only then let the request's offsets be committed.
A crash anywhere before 4 re-reads the request's chunks and redoes 1–3: the object is
overwritten, and consumers dedupe results by request_id.
"""

from __future__ import annotations

import asyncio
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import numpy as np
from aiokafka import ConsumerRebalanceListener, ConsumerRecord, TopicPartition
from aiokafka.errors import KafkaError

from streamtts.audio.codecs import encode_file
from streamtts.errors import TransientError
from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord, worker_id
from streamtts.runtime.faust_app import group_id
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_consumer, make_producer
from streamtts.runtime.settings import KafkaSettings, PipelineSettings, S3Settings
from streamtts.runtime.stage import aimed_elsewhere
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult, ContractError, PcmChunk, StorageRef
from streamtts.schemas.headers import header_pairs
from streamtts.sinks.assembler import AssembledRequest, RequestAssembler
from streamtts.sinks.object_store import ObjectStore

log = logging.getLogger("streamtts.sink")


class StorageUnavailable(TransientError):
    """Object storage kept failing through every retry (a transient fault, dead-lettered)."""

    reason = "storage_unavailable"


class CompletionSink:
    """The sink stage (a `Stage`): one aiokafka consumer of tts.pcm, one producer, one loop."""

    name = "sink"
    group = "sink"

    def __init__(
        self,
        kafka: KafkaSettings,
        s3: S3Settings,
        pipeline: PipelineSettings,
        topics: TopicNames | None = None,
        *,
        namespace: str = "",
        telemetry: Telemetry | None = None,
    ) -> None:
        self.topics = topics or TopicNames(kafka.topic_prefix)
        self.pipeline = pipeline
        self.namespace = namespace
        self.stale_after_s = pipeline.sink_stale_s
        self.consumer = make_consumer(
            kafka,
            group_id=group_id(kafka, "sink"),
            max_poll_records=200,
            session_timeout_ms=int(pipeline.session_timeout_s * 1000),
            heartbeat_interval_ms=1000,
        )
        # exactly_once: results, dead letters and the consumed offsets commit atomically in one
        # Kafka transaction per poll batch; at_least_once: idempotent sends, then commit.
        self.eos = pipeline.processing_guarantee == "exactly_once"
        self._group = group_id(kafka, "sink")
        self.producer = make_producer(
            kafka, transactional_id=f"{self._group}-{worker_id()}" if self.eos else None
        )
        self._in_tx = False
        self.store = ObjectStore(s3)
        self.assembler = RequestAssembler()
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sink")
        self._committed: dict[tuple[str, int], int] = {}
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.completed = 0
        self.telemetry = telemetry or Telemetry()
        self.assigned = False
        self.sources = [self.topics.pcm]
        self.dead_letters = DeadLetterPublisher(
            self.name, self.topics.dlq(self.name), self._send_dlq, self.telemetry
        )

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        await self.producer.start()
        self.consumer.subscribe([self.topics.pcm], listener=_Rebalance(self))
        await self.consumer.start()
        self._task = asyncio.create_task(self._run(), name="completion-sink")

    def failure(self) -> BaseException | None:
        """Why the consuming loop died (the worker then turns unready and exits non-zero)."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return None
        err = task.exception()
        if err is None and not self._stopping.is_set():
            return RuntimeError("the sink's loop ended without being stopped")
        return err

    async def stop(self) -> None:
        self._stopping.set()
        if self._task and not self._task.done():
            await self._task
        try:
            await self._commit()
        finally:
            await self.consumer.stop()
            await self.producer.stop()
            self.pool.shutdown(wait=True)

    # -- loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._stopping.is_set():
            batch = await self.consumer.getmany(timeout_ms=300, max_records=200)
            self.telemetry.pending_requests.set(len(self.assembler.pending_ids()))
            try:
                for tp, records in batch.items():
                    for record in records:
                        if self._stopping.is_set():
                            break  # unprocessed records stay uncommitted: the next owner reads them
                        await self._handle((tp.topic, tp.partition), record)
                await self._expire_stale()
                await self._commit()
            except BaseException:
                if self._in_tx:  # nothing of this batch becomes visible; a restart redoes it
                    self._in_tx = False
                    await self.producer.abort_transaction()
                raise

    async def _send(self, topic: str, key: bytes | None, value: bytes, headers: list | None = None) -> None:
        """Send and wait for the ack; in exactly_once mode, inside this batch's transaction."""
        if self.eos and not self._in_tx:
            await self.producer.begin_transaction()
            self._in_tx = True
        await self.producer.send_and_wait(topic, key=key, value=value, headers=headers)

    async def _handle(self, tp: tuple[str, int], record: ConsumerRecord[bytes, bytes]) -> None:
        raw = record.value or b""
        offset = record.offset
        try:
            chunk = PcmChunk.from_bytes(raw)
        except ContractError as err:
            source = SourceRecord(tp[0], tp[1], offset, record.key, raw, header_pairs(record.headers))
            await self.dead_letter(source, err)
            self.assembler.skip(tp, offset)
            return
        headers = header_pairs(record.headers)
        if aimed_elsewhere(headers, self.name):
            self.assembler.skip(tp, offset)  # a replay aimed at another consumer of tts.pcm
            return
        assembled = self.assembler.add(tp, offset, raw, chunk, headers)
        if assembled is not None:
            await self._finish(assembled)

    async def _finish(self, req: AssembledRequest) -> None:
        ctx = req.ctx
        started = time.perf_counter()
        samples = np.frombuffer(req.pcm, dtype="<i2")
        duration_ms = len(samples) / req.sample_rate * 1000.0
        storage: StorageRef | None = None
        if ctx.delivery.storage:
            try:
                storage = await self._store(req, samples, duration_ms)
            except StorageUnavailable as err:
                # Transient fault out of retries: dead-letter the request's records for replay
                # (`streamtts replay dlq`) and tell waiting clients it failed for now.
                for tp, offset, raw, headers in req.records:
                    await self.dead_letter(
                        SourceRecord(tp[0], tp[1], offset, ctx.request_id.encode(), raw, headers),
                        err,
                        request_id=ctx.request_id,
                        tenant=ctx.tenant,
                    )
                await self._publish(req, duration_ms, None, error=str(err))
                self.assembler.finish(ctx.request_id)
                return
        await self._publish(req, duration_ms, storage)
        self.assembler.finish(ctx.request_id)
        self.completed += 1
        self.telemetry.e2e_latency.labels(ctx.format).observe(
            max(0.0, (datetime.now(UTC) - ctx.created_at).total_seconds())
        )
        log_event(
            log,
            "completed",
            request_id=ctx.request_id,
            tenant=ctx.tenant,
            stage=self.name,
            voice=ctx.voice,
            format=ctx.format,
            audio_s=round(duration_ms / 1000, 3),
            chunks=req.chunks,
            degraded=len(req.degraded),
            key=storage.key if storage else None,
            e2e_ms=round((datetime.now(UTC) - ctx.created_at).total_seconds() * 1000, 1),
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    async def _store(self, req: AssembledRequest, samples: np.ndarray, duration_ms: float) -> StorageRef:
        loop = asyncio.get_running_loop()
        data = await loop.run_in_executor(self.pool, encode_file, samples, req.sample_rate, req.ctx.format)
        delay = 0.25
        attempts = max(1, self.pipeline.storage_retries)
        for attempt in range(1, attempts + 1):
            try:
                return await loop.run_in_executor(
                    self.pool,
                    lambda: self.store.put_audio(
                        req.ctx,
                        data,
                        sample_rate=req.sample_rate,
                        duration_ms=duration_ms,
                        presign_s=self.pipeline.presign_expiry_s if req.ctx.delivery.presign else None,
                        namespace=self.namespace,
                    ),
                )
            except Exception as err:  # urllib3/minio raise many kinds; all mean "not stored"
                log_event(
                    log,
                    "storage_retry",
                    logging.WARNING,
                    request_id=req.ctx.request_id,
                    attempt=attempt,
                    error=f"{type(err).__name__}: {str(err)[:200]}",
                )
                self.telemetry.retries.labels(self.name, "storage").inc()
                if attempt == attempts:
                    raise StorageUnavailable(
                        f"object storage failed {attempts} times: {type(err).__name__}"
                    ) from err
                try:  # back off, but wake at once on shutdown
                    await asyncio.wait_for(self._stopping.wait(), timeout=delay)
                    raise StorageUnavailable("shutting down during storage retries") from err
                except TimeoutError:
                    pass
                delay = min(delay * 2, 8.0)
        raise AssertionError("unreachable")

    async def _publish(
        self,
        req: AssembledRequest,
        duration_ms: float,
        storage: StorageRef | None,
        error: str | None = None,
    ) -> None:
        ctx = req.ctx
        result = CompletionResult(
            request_id=ctx.request_id,
            tenant=ctx.tenant,
            status="failed" if error else "completed",
            format=ctx.format,
            sample_rate=req.sample_rate,
            duration_ms=round(duration_ms, 3),
            chunks=req.chunks,
            storage=storage,
            degraded=req.degraded,
            error=error,
            metadata=ctx.metadata,
            created_at=ctx.created_at,
            completed_at=datetime.now(UTC),
        )
        await self._send(self.topics.results, ctx.request_id.encode(), result.to_bytes())
        self.telemetry.requests_completed.labels(result.status).inc()

    async def _expire_stale(self) -> None:
        """A request whose chunks stopped coming (a segment lost upstream) fails visibly."""
        for rid, ctx, missing in self.assembler.stale(self.stale_after_s):
            result = CompletionResult(
                request_id=rid,
                tenant=ctx.tenant,
                status="failed",
                format=ctx.format,
                sample_rate=ctx.sample_rate,
                duration_ms=0,
                chunks=0,
                metadata=ctx.metadata,
                error=f"incomplete: no audio for segments {missing[:20]} after {self.stale_after_s:.0f} s",
                created_at=ctx.created_at,
                completed_at=datetime.now(UTC),
            )
            await self._send(self.topics.results, rid.encode(), result.to_bytes())
            log_event(
                log,
                "request_incomplete",
                logging.ERROR,
                request_id=rid,
                tenant=ctx.tenant,
                missing=missing[:20],
            )
            self.assembler.finish(rid)

    async def dead_letter(
        self,
        source: SourceRecord,
        error: BaseException,
        *,
        request_id: str | None = None,
        tenant: str | None = None,
    ) -> str:
        """Write `source` to tts.sink.dlq (inside this batch's transaction in exactly-once mode)."""
        await self.dead_letters.publish(source, error, request_id=request_id, tenant=tenant)
        return "dead_lettered"

    async def _send_dlq(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]]
    ) -> None:
        await self._send(topic, key, value, headers)

    async def _commit(self, only: set[tuple[str, int]] | None = None) -> None:
        offsets = {
            TopicPartition(*tp): off
            for tp, off in self.assembler.committable().items()
            if (only is None or tp in only) and off > self._committed.get(tp, -1)
        }
        if self.eos:
            if not offsets and not self._in_tx:
                return
            if not self._in_tx:
                await self.producer.begin_transaction()
            if offsets:  # the consumed offsets commit atomically with this batch's outputs
                await self.producer.send_offsets_to_transaction(offsets, self._group)
            self._in_tx = False
            await self.producer.commit_transaction()
            for tp, off in offsets.items():
                self._committed[(tp.topic, tp.partition)] = off
            return
        if not offsets:
            return
        try:
            await self.consumer.commit(offsets)
        except KafkaError as err:  # e.g. a rebalance in progress: the next loop retries
            log_event(log, "commit_failed", logging.WARNING, error=str(err)[:200])
            return
        for tp, off in offsets.items():
            self._committed[(tp.topic, tp.partition)] = off


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, sink: CompletionSink) -> None:
        self.sink = sink

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        tps = {(tp.topic, tp.partition) for tp in revoked}
        await self.sink._commit(only=tps)
        self.sink.assembler.drop_partitions(tps)
        for tp in tps:
            self.sink._committed.pop(tp, None)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.sink.assigned = True
        log_event(
            log,
            "partitions_assigned",
            stage="sink",
            partitions=sorted(tp.partition for tp in assigned),
        )
