"""Completion sink (aiokafka + minio): tts.file.parts → assembled file in object storage →
tts.results.

The sink is a handler on the one stage loop (`runtime.stage_loop`), fed by an aiokafka consumer
(`sink_source`): the loop reads, filters and acks; this module decides *when* a request is
finished, holding each chunk's ack until then (`HELD`); the parts that know *how* are
`RequestAssembler` (chunks → a complete request), `RequestFinisher` (store the files, publish
the result), `build_result` (the one result shape) and `SinkCheckpoint` (outputs and offsets
made durable together).

Per request, once every (seq, part) has arrived:
1. assemble the parts in order and make the file (`stored_audio`): the streamed frames where
   they join into one (the request is encoded once), else encoded from the PCM;
2. upload it under a deterministic key (transient faults retried with capped backoff; a
   permanent refusal dead-letters the request at once, without holding up the others);
3. publish the completion result (claim check) and remember the request as finished;
4. only then let the request's offsets be committed (`SinkCheckpoint`: in one transaction
   with the outputs in exactly-once mode).
A crash before 4 re-reads the request's chunks and redoes 1–3: the object is overwritten.
A crash after 3 may re-read chunks of finished requests; the memory of finished requests
(seeded from `tts.results` at start, read again before a gained partition's first record)
skips them, so no second result is published.
"""

from __future__ import annotations

import asyncio
import logging
import time
from datetime import UTC, datetime, timedelta
from typing import Any

from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener, TopicPartition
from aiokafka.errors import IllegalStateError

from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord
from streamtts.runtime.faust_app import group_id
from streamtts.runtime.kafka import make_consumer
from streamtts.runtime.loop_record import LoopEvent
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings
from streamtts.runtime.snapshot import snapshot
from streamtts.runtime.stage_loop import HELD, StageLoop
from streamtts.runtime.stage_outputs import DELIVERED, Delivered, StageOutputs
from streamtts.runtime.stage_parts import StageParts
from streamtts.runtime.taken import Taken
from streamtts.runtime.telemetry import Telemetry
from streamtts.runtime.topics import TopicNames
from streamtts.runtime.topology import GroupSpec, StageSpec, stage_spec
from streamtts.schemas import CompletionResult, ContractError, FilePart, wire
from streamtts.schemas.headers import REPLAY_OF, header
from streamtts.sinks.assembler import RequestAssembler, TopicPart
from streamtts.sinks.checkpoint import SinkCheckpoint
from streamtts.sinks.exceptions import PartitionRevoked
from streamtts.sinks.finished import Finished, FinishedRequests, RenderKey, RequestKey, rendering_of
from streamtts.sinks.finisher import RequestFinisher
from streamtts.sinks.object_store import ObjectStore
from streamtts.sinks.results_reread import ResultsReread
from streamtts.sinks.sink_source import SinkSource
from streamtts.sinks.storage_writer import StorageWriter
from streamtts.sinks.telemetry import SinkTelemetry

log = logging.getLogger("streamtts.sink")


def build_stage(parts: StageParts, spec: StageSpec, group: GroupSpec) -> CompletionSink:
    """The completion sink (`StageSpec.build`): it needs object storage (the in-memory topology
    gives it a store in memory, the piece "object_store")."""
    store = parts.piece("object_store")
    if parts.s3 is None and store is None:
        raise RuntimeError("the sink stores files: it needs object storage settings")
    return CompletionSink(
        parts.kafka,
        parts.s3,
        parts.pipeline,
        parts.topics,
        namespace=parts.namespace,
        telemetry=parts.telemetry,
        store=store,
    )


class CompletionSink(StageLoop):
    """The sink stage (a `Stage`): the one stage loop over an aiokafka consumer of
    tts.file.parts; a chunk's ack is held until its request is finished."""

    name = "sink"
    group = "sink"
    holds_acks = True

    def __init__(
        self,
        kafka: KafkaSettings,
        s3: S3Settings | None,
        pipeline: PipelineSettings,
        topics: TopicNames | None = None,
        *,
        namespace: str = "",
        telemetry: Telemetry | None = None,
        store: ObjectStore | None = None,
    ) -> None:
        """s3: where files are stored; store: another store instead (in memory)."""
        super().__init__()
        self.kafka = kafka
        self.topics = topics or TopicNames(kafka.topic_prefix)
        self.pipeline = pipeline
        self.log = log
        self.namespace = namespace
        self.stale_after_s = pipeline.storage.sink_stale_s
        self.spec = stage_spec(self.name)
        group = self.spec.group_for(None)  # one group, no pools
        self._group = group_id(kafka, self.spec.group_role(group))
        self.consumer: AIOKafkaConsumer | None = None
        """Made at start: a sink built in memory never has one (an unclosed consumer warns)."""
        self.eos = pipeline.delivery.processing_guarantee == "exactly_once"
        self.checkpoint = SinkCheckpoint(kafka, self._group, exactly_once=self.eos, on_settled=self._settled)
        self.outputs = StageOutputs(self.name, self.topics, self._in_transaction)
        """The sink's only way to write: results and dead letters, as its spec declares."""
        self._tentative: dict[TopicPart, list[tuple[RequestKey, Finished | None]]] = {}
        """exactly_once: requests remembered as finished whose result's transaction has not
        committed yet, per partition, with what was remembered of them before."""
        self.assembler = RequestAssembler()
        # Long enough to cover every finished request whose chunks can still be re-read: the
        # committed offset lags by at most the stale timeout (then the oldest request fails).
        self.finished = FinishedRequests(ttl_s=max(900.0, 3 * self.stale_after_s))
        self._stopping = asyncio.Event()
        self._results_read_to: dict[int, int] | None = None
        """tts.results partition → the end offset the last finished read reached."""
        self._task: asyncio.Task[None] | None = None
        self._done: dict[TopicPart, int] = {}
        """Per partition: the offset up to which every record is done (acked in order)."""
        self._tp: TopicPart = (self.topics.file_parts, 0)
        """The partition whose record is being handled: its outputs join its checkpoint."""
        self._epoch = 0
        """The assignment `_tp` had when its record was read (see SinkCheckpoint.send)."""
        self.telemetry = telemetry or Telemetry()
        self.signals = SinkTelemetry(self.telemetry, self.name)
        self.assigned = False
        self.sources = self.spec.group_sources(group, self.topics)
        self.dead_letters = DeadLetterPublisher(
            # Dead letters go out like every other output: inside the partition's transaction.
            self.name,
            self.spec.dlq(self.topics),
            self._send,
            self.telemetry,
        )
        self.reread = ResultsReread(
            lambda: self.remember_recent_results(), self.checkpoint, self.signals, self._stopping
        )
        if store is None:
            if s3 is None:
                raise ValueError("the sink needs object storage settings or a store")
            store = ObjectStore(s3)
        self.writer = StorageWriter(store, pipeline, self.signals, self._stopping, namespace=namespace)
        self.finisher = RequestFinisher(
            self.writer,
            self._send,
            self.dead_letters,
            self.signals,
            results_topic=self.topics.results,
            stale_after_s=self.stale_after_s,
            wire_format=pipeline.delivery.wire_format,
        )

    # -- lifecycle -------------------------------------------------------------------------
    async def start(self) -> None:
        delivery = self.pipeline.delivery
        self.consumer = self.checkpoint.consumer = make_consumer(
            self.kafka,
            group_id=self._group,
            max_poll_records=200,
            session_timeout_ms=int(delivery.session_timeout_s * 1000),
            heartbeat_interval_ms=1000,
            metadata_max_age_ms=int(delivery.metadata_refresh_s * 1000),
        )
        # 1. Producers first: the rebalance listener fences old owners as soon as we join.
        await self.checkpoint.start()
        # 2. The finished memory before the first record, so a re-read chunk of a finished
        #    request is skipped from the start, never finished twice.
        await self.remember_recent_results()
        # 3. Join the group, then consume.
        self.consumer.subscribe(self.sources, listener=_Rebalance(self))
        await self.consumer.start()
        self._task = asyncio.create_task(self._run(), name="completion-sink")

    async def remember_recent_results(self) -> None:
        """Seed the finished memory from the tail of tts.results (read_committed); after the
        first read, only what was written since the last one that finished (the memory holds
        the rest), so a read again costs what came since, not the whole window."""
        since = datetime.now(UTC) - timedelta(seconds=self.finished.ttl_s)
        seen: list[tuple[RenderKey, str, datetime]] = []
        reached: dict[int, int] = {}
        async for record in snapshot(
            self.kafka, self.topics.results, since=since, from_offsets=self._results_read_to, reached=reached
        ):
            try:
                result = CompletionResult.from_bytes(record.value or b"")
            except ContractError:
                continue
            seen.append(((result.tenant, result.request_id, ""), result.status, result.completed_at))
        self.finished.seed(seen)
        self._results_read_to = reached
        self.signals.finished_loaded(len(self.finished))

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
        # 1. End the loop after its record (a storage backoff wakes at once).
        self._stopping.set()
        if self._task and not self._task.done():
            await self._task
        try:
            # 2. Commit what is finished; a dead loop aborted its batch, so nothing to commit.
            if self.failure() is None:
                await self.checkpoint.commit(dict(self._done))
        finally:
            # 3. Leave the group (the revocation commits or aborts), then the producers, then
            #    the upload threads.
            if self.consumer is not None:
                await self.consumer.stop()
            await self.checkpoint.stop()
            self.writer.close()

    # -- loop ------------------------------------------------------------------------------
    async def _run(self) -> None:
        try:
            await self.run(SinkSource(self, self._acked))
        except BaseException:
            await self.checkpoint.abort()  # nothing of the batch becomes visible
            raise

    def stopping(self) -> bool:
        return self._stopping.is_set()

    def batch_started(self) -> None:
        self.signals.pending(len(self.assembler.pending_ids()))

    async def may_read(self, part: TopicPart, offset: int, epoch: int) -> bool:
        """A gained partition's records wait until the finished memory was read again."""
        if part not in self.reread.unread_gains:
            return True
        if not await self.reread.read_again():
            self._rewind(TopicPartition(*part), offset)  # fetched again after the read
            return False
        return not self._stopping.is_set() and self.checkpoint.epoch(part) == epoch  # revoked during it?

    async def end_batch(self) -> None:
        # 3. Fail the requests whose audio stopped coming, before their offsets hold the
        #    partition back any longer.
        await self._fail_stale()
        # 4. Commit what is done: with the outputs in one transaction (exactly-once), or after
        #    their acks (at-least-once).
        await self.checkpoint.commit(dict(self._done))

    def _acked(self, part: TopicPart, offset: int, epoch: int) -> None:
        """The loop released a record's ack (in offset order): committable, if the partition is
        still held under the assignment it was read in."""
        if part in self.checkpoint.owned and self.checkpoint.epoch(part) == epoch:
            self._done[part] = max(self._done.get(part, 0), offset + 1)

    def _rewind(self, tp: TopicPartition, offset: int) -> None:
        """Fetch `tp` again from `offset` (records handed over but not handled)."""
        try:
            if self.consumer is not None:
                self.consumer.seek(tp, offset)
        except IllegalStateError:
            pass  # no longer assigned: its next owner starts from the commit

    async def _send(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None:
        await self.outputs.send(topic, key, value, headers)

    async def _in_transaction(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None
    ) -> Delivered:
        """The sink's `Transport`: into the handled record's partition transaction, acked."""
        await self.checkpoint.send(self._tp, topic, key, value, headers, epoch=self._epoch)
        return DELIVERED

    async def take(self, event: LoopEvent) -> Taken[FilePart]:
        msg = event.message
        try:
            return Taken(event, wire.decode(FilePart, msg.value, msg.headers))
        except ContractError as err:
            return Taken(event, error=err, now=True)

    async def handle(self, taken: Taken[FilePart]) -> str | None:
        msg = taken.event.message
        part = msg.tp
        self._tp, self._epoch = part, msg.generation_id  # its outputs join its partition's transaction
        try:
            return await self._handle(taken, part, msg)
        except PartitionRevoked:  # mid-record: never acked, its next owner redoes it
            return HELD

    async def _handle(self, taken: Taken[FilePart], part: TopicPart, msg: Any) -> str:
        if taken.error is not None or taken.value is None:
            source = SourceRecord(msg.topic, msg.partition, msg.offset, msg.key, msg.value, msg.headers)
            return await self.dead_letter(source, taken.error or ValueError("no file part"))
        chunk, headers = taken.value, msg.headers
        if self.finished.has(rendering_of(chunk.request, headers)) and not _redriven(headers):
            # A finished rendering's chunk read again (after a restart or rebalance, or
            # synthesized twice after a synthesize worker died): its result is already out; a
            # second one would be a duplicate or, for a partial re-read, a `failed` flip after
            # the stale timeout. (A replay is another rendering; a re-driven dead letter of
            # the sink is meant to be redone.)
            return "already_finished"
        assembled = self.assembler.add(part, msg.offset, msg.value, chunk, headers, epoch=msg.generation_id)
        if assembled is None:
            return HELD  # acked once its request is finished
        result = await self.finisher.finish(assembled)
        await self._remember(rendering_of(assembled.ctx, assembled.first_headers), result)
        return "ok"

    async def _fail_stale(self) -> None:
        """A request whose chunks stopped coming (a segment lost upstream) fails visibly."""
        for key, tp, ctx, missing, headers in self.assembler.stale(self.stale_after_s):
            if self.finished.status(key) == "completed":  # never flip a delivered request
                await self._finished(key)
                continue
            if tp not in self.checkpoint.owned:
                continue  # dropped with its partition at the revocation
            self._tp, self._epoch = tp, self.checkpoint.epoch(tp)
            try:
                result = await self.finisher.fail_incomplete(ctx, missing, headers)
            except PartitionRevoked:
                continue  # revoked meanwhile: its next owner decides
            await self._remember(rendering_of(ctx, headers), result)

    async def _remember(self, rendering: RenderKey, result: CompletionResult) -> None:
        """The result is acknowledged: skip the rendering's re-read chunks from now on, and let
        its offsets be committed (its records' held acks are released). Under exactly-once the
        result is visible only once its partition's transaction commits: until then the memory
        is tentative (`_settled`).
        No await lies between the result's send and this call, so its transaction cannot be
        committed or aborted in between."""
        before = self.finished.add(rendering, result.status, result.completed_at)
        if self.eos:
            self._tentative.setdefault(self._tp, []).append((rendering[:2], before))
        await self._finished(rendering[:2])

    async def _finished(self, key: RequestKey) -> None:
        """The request is done: the acks of every record read for it go (in offset order)."""
        for part, offset, epoch in self.assembler.finish(key):
            await self.release_ack(part, offset, epoch)

    def _settled(self, tp: TopicPart, committed: bool) -> None:
        """A partition's transaction committed, or never will. An aborted or fenced one takes
        its results with it: the requests are forgotten as finished, so when their chunks are
        read again (by us, given the partition back, or by its next owner) they are finished
        again — remembered, they were skipped and lost (a sink fenced mid-transaction that
        kept its partitions lost 10 requests in a 10-minute network-fault run)."""
        entries = self._tentative.pop(tp, [])
        if committed or not entries:
            return
        for key, before in reversed(entries):
            self.finished.restore(key, before)
        self.signals.tentative_forgotten(f"{tp[0]}/{tp[1]}", len(entries))

    def log_to(self, log: logging.Logger) -> None:
        self.log = self.signals.log = log

    def release(self) -> None:
        self.writer.close()

    def forget(self, tps: set[TopicPart]) -> None:
        """Revoked: what came from `tps` is the next owner's to read again."""
        self.assembler.drop_partitions(tps)
        for tp in tps:
            self._done.pop(tp, None)
        if self._acks is not None:
            self._acks.forget(tps)


def _redriven(headers: tuple[tuple[str, bytes], ...]) -> bool:
    """A sink dead letter re-driven on purpose (`replay dlq --stage sink`)."""
    of = header(headers, REPLAY_OF)
    return of is not None and of.startswith(b"dlq:")


class _Rebalance(ConsumerRebalanceListener):
    def __init__(self, sink: CompletionSink) -> None:
        self.sink = sink
        self.held: set[TopicPart] = set()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        tps = {(tp.topic, tp.partition) for tp in revoked}
        await self.sink.checkpoint.revoke(tps, dict(self.sink._done))
        self.sink.forget(tps)
        self.held -= tps
        self.sink.reread.unread_gains -= tps

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        tps = {(tp.topic, tp.partition) for tp in assigned}
        gained, self.held = tps - self.held, tps
        # Before any await: aiokafka may hand the loop a gained partition's records before this
        # listener returns. They wait until the loop has read the results again (the first
        # assignment too: the start-time seed comes before the join).
        self.sink.reread.unread_gains |= gained
        await self.sink.checkpoint.assign(tps)  # fences a zombie owner of the new ones
        self.sink.redeliveries.assigned(tps, now_ms=time.time() * 1000)
        self.sink.assigned = bool(assigned)  # none: not ready (see FaustStage._on_assigned)
        self.sink.signals.partitions_assigned(sorted(tp.partition for tp in assigned))
