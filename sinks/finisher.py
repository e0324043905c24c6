"""Finishes one request: its files go to object storage, its result to tts.results.

The finisher knows *how* a request is finished; the sink's loop decides *when* (a request
became complete, or went stale) and, once the result is acknowledged, marks it finished so
its offsets become committable (`SinkCheckpoint`). Every output goes through `send`, i.e.
inside the transaction of the partition whose record is being handled.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import KW_ONLY, dataclass
from datetime import UTC, datetime
from typing import Protocol

from streamtts.audio.exceptions import EncodingError
from streamtts.runtime.dead_letters import DeadLetterPublisher, SourceRecord
from streamtts.runtime.tracing import Tracing
from streamtts.schemas import CompletionResult, RequestContext, wire
from streamtts.schemas.headers import trace_headers
from streamtts.sinks.assembler import AssembledRequest
from streamtts.sinks.exceptions import StorageRejected, StorageUnavailable
from streamtts.sinks.result_builder import build_result, incomplete_error
from streamtts.sinks.storage_writer import StorageWriter, StoredFiles
from streamtts.sinks.telemetry import SinkTelemetry


class SendOutput(Protocol):
    """Sends one output of the record being handled and returns once the broker acked it."""

    async def __call__(
        self, topic: str, key: bytes | None, value: bytes, headers: list[tuple[str, bytes]] | None = None
    ) -> None: ...


@dataclass(eq=False)
class RequestFinisher:
    writer: StorageWriter
    send: SendOutput
    dead_letters: DeadLetterPublisher
    telemetry: SinkTelemetry
    _: KW_ONLY
    results_topic: str
    stale_after_s: float
    wire_format: wire.WireFormat = wire.DEFAULT_WIRE_FORMAT

    @property
    def tracing(self) -> Tracing:
        return self.telemetry.telemetry.tracing

    async def finish(self, req: AssembledRequest) -> CompletionResult:
        """Store and publish an assembled request; returns its acknowledged result. One span,
        `sink finish`, in the request's trace, with its upload and its result inside.

        Raises:
            PartitionRevoked: its partition was revoked meanwhile (the next owner redoes it).
        """
        attributes = {"streamtts.request_id": req.ctx.request_id, "streamtts.chunks": len(req.records)}
        with self.tracing.span("sink finish", parent_headers=req.first_headers, attributes=attributes):
            return await self._finish(req)

    async def _finish(self, req: AssembledRequest) -> CompletionResult:
        ctx = req.ctx
        started = time.perf_counter()
        stored: StoredFiles | None = None
        # A cancelled request keeps its audio only when asked to and when some was spoken.
        keep = not req.cancelled or (ctx.delivery.keep_on_cancel and req.n_samples > 0)
        if ctx.delivery.storage and keep:
            try:
                # 1. Write the files (audio, expiry marker, captions) before the result names them.
                with self.tracing.span("sink upload", attributes={"streamtts.format": ctx.format}):
                    stored = await self.writer.write(req)
            except (StorageUnavailable, StorageRejected, EncodingError) as err:
                # 2. Dead-letter the request's records for replay (`streamtts replay dlq`), then
                #    tell waiting clients it failed; the stage goes on with the next request.
                #    (An EncodingError: its parts' audio cannot make a file — e.g. frames that
                #    are not the format's, written by a producer other than the encode stage.)
                await self._dead_letter(req, err)
                failed = build_result(ctx, req, completed_at=datetime.now(UTC), error=str(err))
                await self._publish(failed, req.first_headers)
                return failed
        # 3. Publish the claim check: the stored audio is now reachable by its key.
        result = build_result(ctx, req, completed_at=datetime.now(UTC), stored=stored)
        await self._publish(result, req.first_headers)
        self.telemetry.request_delivered(req, stored.audio.key if stored else None, started)
        return result

    async def fail_incomplete(
        self, ctx: RequestContext, missing: list[int], headers: Iterable[tuple[str, bytes]] = ()
    ) -> CompletionResult:
        """A request whose chunks stopped coming (a segment lost upstream) fails visibly;
        returns its acknowledged `failed` result. `headers`: its first record's (its trace).

        Raises:
            PartitionRevoked: its partition was revoked meanwhile (its next owner decides).
        """
        error = incomplete_error(missing, self.stale_after_s)
        result = build_result(ctx, None, completed_at=datetime.now(UTC), error=error)
        headers = list(headers)
        with self.tracing.span(
            "sink incomplete", parent_headers=headers, attributes={"streamtts.missing": len(missing)}
        ):
            await self._publish_record(result, headers)
        # Counted as `request_incomplete` (per release), not among `requests_completed`, as before.
        self.telemetry.request_incomplete(ctx, missing)
        return result

    async def _publish(self, result: CompletionResult, headers: Iterable[tuple[str, bytes]]) -> None:
        await self._publish_record(result, headers)
        self.telemetry.result_published(result)

    async def _publish_record(self, result: CompletionResult, headers: Iterable[tuple[str, bytes]]) -> None:
        """The result, with the request's trace (`headers`: a record of the request's)."""
        record = wire.encode(result, self.wire_format, source=wire.SOURCE_PREFIX + "/sink")
        out = [*trace_headers(headers), *record.headers]
        attributes = {"streamtts.status": result.status}
        with self.tracing.span("sink result", attributes=attributes):  # inside finish's span
            await self.send(self.results_topic, result.request_id.encode(), record.value, out or None)

    async def _dead_letter(self, req: AssembledRequest, err: BaseException) -> None:
        ctx = req.ctx
        for tp, offset, raw, headers in req.records:
            await self.dead_letters.publish(
                SourceRecord(tp[0], tp[1], offset, ctx.request_id.encode(), raw, headers),
                err,
                request_id=ctx.request_id,
                tenant=ctx.tenant,
            )
