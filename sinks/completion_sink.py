"""Completion sink (aiokafka + minio): tts.pcm → assembled file in object storage → tts.results.

Per request, once every (seq, part) has arrived:
1. assemble the PCM in order and encode the whole file once (proper headers, one stream);
2. upload it under a deterministic key (transient faults retried with capped backoff; a
   permanent refusal dead-letters the request at once, without holding up the others);
3. publish the completion result (claim check) and remember the request as finished;
4. only then let the request's offsets be committed (`SinkCheckpoint`: in one transaction
   with the outputs in exactly-once mode).
A crash before 4 re-reads the request's chunks and redoes 1–3: the object is overwritten.
A crash after 3 may re-read chunks of finished requests; the memory of finished requests
(seeded from `tts.results` at start) skips them, so no second result is published.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta

import numpy as np
from aiokafka import ConsumerRebalanceListener, ConsumerRecord, TopicPartition

from streamtts.audio.codecs import encode_file
from streamtts.errors import RecordError, TransientError
from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord
from streamtts.runtime.faust_app import group_id
from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.kafka import make_consumer
from streamtts.runtime.retention import RetentionPolicy, expiry_marker_key
from streamtts.runtime.settings import KafkaSettings, PipelineSettings, S3Settings
from streamtts.runtime.snapshot import snapshot
from streamtts.runtime.stage import DeadLettering, aimed_elsewhere
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import (
    Captions,
    CompletionResult,
    ContractError,
    PcmChunk,
    RequestContext,
    StorageRef,
    WordTiming,
)
from streamtts.schemas import captions as caption_files
from streamtts.schemas.headers import REPLAY_AT, REPLAY_OF, header, header_pairs
from streamtts.schemas.release import BASE_RELEASE
from streamtts.schemas.result import MAX_INLINE_MARKS, MAX_INLINE_WORDS
from streamtts.sinks.assembler import AssembledRequest, RequestAssembler, TopicPart
from streamtts.sinks.checkpoint import PartitionRevoked, SinkCheckpoint
from streamtts.sinks.finished import FinishedRequests, RenderKey
from streamtts.sinks.object_store import ObjectStore, is_transient_storage_error

log = logging.getLogger("streamtts.sink")


class StorageUnavailable(TransientError):
    """Object storage kept failing through every retry (a transient fault, dead-lettered)."""

    reason = "storage_unavailable"


class StorageRejected(RecordError):
    """Object storage refused this request's upload for good (e.g. a value it cannot carry):
    retrying cannot help, so it is dead-lettered at once."""

    reason = "storage_rejected"


class CompletionSink(DeadLettering):
    """The sink stage (a `Stage`): one aiokafka consumer of tts.pcm, one loop."""

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
        self.kafka = kafka
        self.topics = topics or TopicNames(kafka.topic_prefix)
        self.pipeline = pipeline
        self.namespace = namespace
        self.stale_after_s = pipeline.sink_stale_s
        self._group = group_id(kafka, "sink")
        self.consumer = make_consumer(
            kafka,
            group_id=self._group,
            max_poll_records=200,
            session_timeout_ms=int(pipeline.session_timeout_s * 1000),
            heartbeat_interval_ms=1000,
            metadata_max_age_ms=int(pipeline.metadata_refresh_s * 1000),
        )
        self.eos = pipeline.processing_guarantee == "exactly_once"
        self.checkpoint = SinkCheckpoint(kafka, self._group, self.consumer, exactly_once=self.eos)
        self.store = ObjectStore(s3)
        self.retention = RetentionPolicy.of(pipeline)
        self.assembler = RequestAssembler()
        # Long enough to cover every finished request whose chunks can still be re-read: the
        # committed offset lags by at most the stale timeout (then the oldest request fails).
        self.finished = FinishedRequests(ttl_s=max(900.0, 3 * self.stale_after_s))
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sink")
        self._stopping = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._tp: TopicPart = (self.topics.pcm, 0)
        """The partition whose record is being handled: its outputs join its checkpoint."""
        self.completed = 0
        self.telemetry = telemetry or Telemetry()
        self.assigned = False
        self.sources = [self.topics.pcm]
        self.dead_letters = DeadLetterPublisher(
            # Dead letters go out like every other output: inside the partition's transaction.
            self.name,
            self.topics.dlq(self.name),
            self._send,
            self.telemetry,
        )

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        await self.checkpoint.start()
        await self._remember_recent_results()
        self.consumer.subscribe([self.topics.pcm], listener=_Rebalance(self))
        await self.consumer.start()
        self._task = asyncio.create_task(self._run(), name="completion-sink")

    async def _remember_recent_results(self) -> None:
        """Seed the finished memory from the tail of tts.results (read_committed)."""
        since = datetime.now(UTC) - timedelta(seconds=self.finished.ttl_s)
        seen: list[tuple[RenderKey, str, datetime]] = []
        async for record in snapshot(self.kafka, self.topics.results, since=since):
            try:
                result = CompletionResult.from_bytes(record.value or b"")
            except ContractError:
                continue
            seen.append(((result.tenant, result.request_id, ""), result.status, result.completed_at))
        self.finished.seed(seen)
        log_event(log, "finished_requests_loaded", stage=self.name, requests=len(self.finished))

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
            if self.failure() is None:
                await self.checkpoint.commit(self.assembler.committable())
        finally:
            await self.consumer.stop()
            await self.checkpoint.stop()
            self.pool.shutdown(wait=True)

    # -- loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        while not self._stopping.is_set():
            batch = await self.consumer.getmany(timeout_ms=300, max_records=200)
            self.telemetry.pending_requests.set(len(self.assembler.pending_ids()))
            try:
                for tp, records in batch.items():
                    part = (tp.topic, tp.partition)
                    for record in records:
                        if self._stopping.is_set() or part not in self.checkpoint.owned:
                            break  # unprocessed records stay uncommitted: the next owner reads them
                        self._tp = part
                        try:
                            await self._handle(part, record)
                        except PartitionRevoked:  # mid-record: the next owner redoes it
                            break
                await self._expire_stale()
                await self.checkpoint.commit(self.assembler.committable())
            except BaseException:
                await self.checkpoint.abort()  # nothing of this batch becomes visible
                raise

    async def _send(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        await self.checkpoint.send(self._tp, topic, key, value, headers)

    async def _handle(self, tp: TopicPart, record: ConsumerRecord[bytes, bytes]) -> None:
        raw = record.value or b""
        offset = record.offset
        headers = header_pairs(record.headers)
        try:
            chunk = PcmChunk.from_bytes(raw)
        except ContractError as err:
            await self.dead_letter(SourceRecord(tp[0], tp[1], offset, record.key, raw, headers), err)
            self.assembler.skip(tp, offset)
            return
        if aimed_elsewhere(headers, self.name):
            self.assembler.skip(tp, offset)  # a replay aimed at another consumer of tts.pcm
            return
        if self.finished.has(_rendering(chunk.request, headers)) and not _redriven(headers):
            # A finished rendering's chunk read again (after a restart or rebalance, or
            # synthesized twice after a synthesize worker died): its result is already out; a
            # second one would be a duplicate or, for a partial re-read, a `failed` flip after
            # the stale timeout. (A replay is another rendering; a re-driven dead letter of
            # the sink is meant to be redone.)
            self.assembler.skip(tp, offset)
            self.telemetry.records.labels(self.name, "already_finished").inc()
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
        stored_captions: Captions | None = None
        stored_at: datetime | None = None
        keep = not req.cancelled or (ctx.delivery.keep_on_cancel and len(samples) > 0)
        if ctx.delivery.storage and keep:
            try:
                # Object storage counts expiry from the object's creation: take the time
                # before the upload, so `expires_at` never promises more than it keeps.
                stored_at = datetime.now(UTC)
                storage = await self._store(req, samples, duration_ms)
                await self._mark_expiry(req, storage, stored_at)
                if req.words is not None:
                    stored_captions = await self._captions_or_none(req, storage)
            except (StorageUnavailable, StorageRejected) as err:
                # Dead-letter the request's records for replay (`streamtts replay dlq`) and tell
                # waiting clients it failed; the stage goes on with the next request.
                for tp, offset, raw, headers in req.records:
                    await self.dead_letter(
                        SourceRecord(tp[0], tp[1], offset, ctx.request_id.encode(), raw, headers),
                        err,
                        request_id=ctx.request_id,
                        tenant=ctx.tenant,
                    )
                await self._publish(req, duration_ms, None, error=str(err))
                return
        await self._publish(req, duration_ms, storage, captions=stored_captions, stored_at=stored_at)
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
            release=ctx.release,
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
        data = await loop.run_in_executor(
            self.pool,
            functools.partial(encode_file, codec=req.ctx.codec),
            samples,
            req.sample_rate,
            req.ctx.format,
        )
        return await self._retrying(
            req,
            lambda: self.store.put_audio(
                req.ctx,
                data,
                sample_rate=req.sample_rate,
                duration_ms=duration_ms,
                presign_s=self.pipeline.presign_expiry_s if req.ctx.delivery.presign else None,
                namespace=self.namespace,
                tags=self.retention.tags_for(req.ctx.tenant),
            ),
        )

    async def _mark_expiry(self, req: AssembledRequest, audio: StorageRef, stored_at: datetime) -> None:
        """Best-effort marker of when the file expires (see `runtime.retention`): without it an
        expired request is 404 instead of 410 once its result is out of the gateway's reach;
        its failure must not fail a request whose audio is stored."""
        ctx = req.ctx
        expires = self.retention.expires_at(ctx.tenant, stored_at)
        if expires is None:
            return
        meta = {"expires-at": expires.isoformat(), "key": audio.key, "request-id": ctx.request_id}
        try:
            await asyncio.to_thread(
                self.store.put_marker, expiry_marker_key(ctx.tenant, ctx.request_id), meta
            )
        except Exception as err:  # storage trouble: the result still carries expires_at
            log_event(
                log,
                "expiry_marker_failed",
                logging.WARNING,
                request_id=ctx.request_id,
                tenant=ctx.tenant,
                error=f"{type(err).__name__}: {str(err)[:200]}",
            )

    async def _captions_or_none(self, req: AssembledRequest, audio: StorageRef) -> Captions | None:
        """Captions are best-effort next to stored audio: their failure must not fail (or
        dead-letter) a request whose audio is safely stored. The words stay in the result."""
        try:
            return await self._store_captions(req, audio)
        except (StorageUnavailable, StorageRejected) as err:
            log_event(
                log,
                "captions_not_stored",
                logging.WARNING,
                request_id=req.ctx.request_id,
                error=str(err)[:200],
            )
            return None

    async def _store_captions(self, req: AssembledRequest, audio: StorageRef) -> Captions:
        """WebVTT, SRT and the word list next to the audio (same key, other extensions)."""
        words = req.words or []
        refs: dict[str, StorageRef] = {}
        for fmt, extension in (("vtt", ".vtt"), ("srt", ".srt"), ("json", ".words.json")):
            body = caption_files.render(words, fmt)
            ctype = caption_files.CAPTION_CONTENT_TYPES[fmt]
            refs[fmt] = await self._retrying(
                req,
                functools.partial(
                    self.store.put_beside,
                    audio,
                    extension,
                    body,
                    ctype,
                    self.retention.tags_for(req.ctx.tenant),
                ),
            )
        return Captions(vtt=refs["vtt"], srt=refs["srt"], words=refs["json"])

    async def _retrying(self, req: AssembledRequest, put: Callable[[], StorageRef]) -> StorageRef:
        """One upload, transient faults retried with capped backoff.

        Raises:
            StorageRejected: a permanent refusal (at once).
            StorageUnavailable: every attempt failed transiently.
        """
        loop = asyncio.get_running_loop()
        delay = 0.25
        attempts = max(1, self.pipeline.storage_retries)
        for attempt in range(1, attempts + 1):
            try:
                return await loop.run_in_executor(self.pool, put)
            except Exception as err:  # urllib3/minio raise many kinds; classified once, below
                error = f"{type(err).__name__}: {str(err)[:200]}"
                if not is_transient_storage_error(err):
                    raise StorageRejected(f"object storage refused the upload: {error}") from err
                log_event(
                    log,
                    "storage_retry",
                    logging.WARNING,
                    request_id=req.ctx.request_id,
                    attempt=attempt,
                    error=error,
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
        captions: Captions | None = None,
        stored_at: datetime | None = None,
    ) -> None:
        ctx = req.ctx
        words = req.words if req.words is not None and len(req.words) <= MAX_INLINE_WORDS else None
        spoken_ms: float | None = None
        words_spoken: list[WordTiming] | None = None
        if req.cancelled and not error:
            spoken_ms = duration_ms if req.played_ms is None else min(duration_ms, req.played_ms)
            if req.words is not None:
                words_spoken = [w for w in req.words if w.start_ms < spoken_ms][:MAX_INLINE_WORDS]
        completed_at = datetime.now(UTC)
        result = CompletionResult(
            request_id=ctx.request_id,
            tenant=ctx.tenant,
            status="failed" if error else "cancelled" if req.cancelled else "completed",
            format=ctx.format,
            sample_rate=req.sample_rate,
            duration_ms=round(duration_ms, 3),
            chunks=req.chunks,
            storage=storage,
            degraded=req.degraded,
            captions=captions,
            words=words if not error else None,
            spoken_ms=round(spoken_ms, 1) if spoken_ms is not None else None,
            words_spoken=words_spoken,
            # Bounded like words: a result that cannot be built would stop the sink for all.
            marks=req.marks[:MAX_INLINE_MARKS] if req.marks and not error else None,
            lexicon_version=ctx.lexicon_version,
            notes=ctx.notes,
            error=error,
            metadata=ctx.metadata,
            release=ctx.release,
            first_audio_ms=_first_audio_ms(req),
            created_at=ctx.created_at,
            completed_at=completed_at,
            expires_at=self.retention.expires_at(ctx.tenant, stored_at or completed_at) if storage else None,
        )
        await self._send(self.topics.results, ctx.request_id.encode(), result.to_bytes())
        first_headers = req.records[0][3] if req.records else ()
        self._finished(_rendering(ctx, first_headers), result.status, result.completed_at)
        self.telemetry.requests_completed.labels(result.status).inc()
        release = result.release or BASE_RELEASE
        outcome = "degraded" if result.status == "completed" and result.degraded else result.status
        self.telemetry.release_requests.labels(release, outcome).inc()
        if result.first_audio_ms is not None and result.status == "completed":
            self.telemetry.release_first_audio.labels(release).observe(result.first_audio_ms / 1000)

    def _finished(self, rendering: RenderKey, status: str, at: datetime) -> None:
        self.finished.add(rendering, status, at)
        self.assembler.finish(rendering[:2])

    async def _expire_stale(self) -> None:
        """A request whose chunks stopped coming (a segment lost upstream) fails visibly."""
        for key, tp, ctx, missing, headers in self.assembler.stale(self.stale_after_s):
            if self.finished.status(key) == "completed":  # never flip a delivered request
                self.assembler.finish(key)
                continue
            if tp not in self.checkpoint.owned:
                continue  # dropped with its partition at the revocation
            self._tp = tp
            result = CompletionResult(
                request_id=ctx.request_id,
                tenant=ctx.tenant,
                status="failed",
                format=ctx.format,
                sample_rate=ctx.sample_rate,
                duration_ms=0,
                chunks=0,
                lexicon_version=ctx.lexicon_version,
                notes=ctx.notes,
                metadata=ctx.metadata,
                release=ctx.release,
                error=f"incomplete: no audio for segments {missing[:20]} after {self.stale_after_s:.0f} s",
                created_at=ctx.created_at,
                completed_at=datetime.now(UTC),
            )
            try:
                await self._send(self.topics.results, ctx.request_id.encode(), result.to_bytes())
            except PartitionRevoked:
                continue  # revoked meanwhile: its next owner decides
            self.telemetry.release_requests.labels(ctx.release or BASE_RELEASE, "failed").inc()
            log_event(
                log,
                "request_incomplete",
                logging.ERROR,
                request_id=ctx.request_id,
                tenant=ctx.tenant,
                missing=missing[:20],
            )
            self._finished(_rendering(ctx, headers), "failed", result.completed_at)


def _first_audio_ms(req: AssembledRequest) -> float | None:
    """created_at → the first chunk synthesized: the first-audio latency of the release that
    rendered it, without a lookup (the encode stage's TTFA metric adds the encode step)."""
    if req.first_synthesized_at is None:
        return None
    return round(max(0.0, (req.first_synthesized_at - req.ctx.created_at).total_seconds() * 1000), 1)


def _rendering(ctx: RequestContext, headers: tuple[tuple[str, bytes], ...]) -> RenderKey:
    """Which rendering of which request a chunk belongs to: the original one, or a replay
    (`streamtts replay request|window`, marked by the header carried from the request)."""
    at = header(headers, REPLAY_AT)
    return (ctx.tenant, ctx.request_id, at.decode(errors="replace") if at else "")


def _redriven(headers: tuple[tuple[str, bytes], ...]) -> bool:
    """A sink dead letter re-driven on purpose (`replay dlq --stage sink`)."""
    of = header(headers, REPLAY_OF)
    return of is not None and of.startswith(b"dlq:")


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, sink: CompletionSink) -> None:
        self.sink = sink

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        tps = {(tp.topic, tp.partition) for tp in revoked}
        await self.sink.checkpoint.revoke(tps, self.sink.assembler.committable())
        self.sink.assembler.drop_partitions(tps)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self.sink.checkpoint.assign({(tp.topic, tp.partition) for tp in assigned})
        self.sink.assigned = bool(assigned)  # none: not ready (see FaustStage._on_assigned)
        log_event(
            log,
            "partitions_assigned",
            stage="sink",
            partitions=sorted(tp.partition for tp in assigned),
        )
