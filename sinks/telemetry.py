"""Every metric and log event of the sink, in one place: the loop, the finisher and the
storage writer say what happened; this module says how it is counted and logged."""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.telemetry import Telemetry
from streamtts.schemas import CompletionResult, RequestContext
from streamtts.schemas.release import BASE_RELEASE
from streamtts.sinks.assembler import AssembledRequest

log = logging.getLogger("streamtts.sink")


def _error_text(err: BaseException) -> str:
    return f"{type(err).__name__}: {str(err)[:200]}"


class SinkTelemetry:
    """The sink's view of the process-wide `Telemetry` (metric names stay those of the stage)."""

    def __init__(self, telemetry: Telemetry, stage: str) -> None:
        self.telemetry = telemetry
        self.stage = stage
        self.log = log
        """Where its events go (the in-memory topology may quiet them: `CompletionSink.log_to`)."""

    def _request_event(
        self, ctx: RequestContext, event: str, level: int = logging.INFO, **fields: object
    ) -> None:
        """A log event about one request: its id and tenant first, then `fields`."""
        log_event(self.log, event, level, request_id=ctx.request_id, tenant=ctx.tenant, **fields)

    # -- the loop --------------------------------------------------------------------------
    def pending(self, requests: int) -> None:
        self.telemetry.pending_requests.set(requests)

    def finished_loaded(self, requests: int) -> None:
        log_event(self.log, "finished_requests_loaded", stage=self.stage, requests=requests)

    def reread_failed(self) -> None:
        """A read again of tts.results before a gained partition's records did not finish:
        the records wait (`streamtts_retries_total{stage="sink",reason="results_reread"}`)."""
        self.telemetry.retries.labels(self.stage, "results_reread").inc()

    def tentative_forgotten(self, partition: str, requests: int) -> None:
        """Requests finished under a transaction that aborted or was fenced: forgotten, to be
        finished again when their chunks are read again."""
        log_event(
            self.log,
            "finished_forgotten",
            logging.WARNING,
            stage=self.stage,
            partition=partition,
            requests=requests,
        )

    def partitions_assigned(self, partitions: list[int]) -> None:
        log_event(self.log, "partitions_assigned", stage=self.stage, partitions=partitions)

    # -- storage ---------------------------------------------------------------------------
    def storage_retry(self, request_id: str, attempt: int, error: str) -> None:
        log_event(
            self.log, "storage_retry", logging.WARNING, request_id=request_id, attempt=attempt, error=error
        )
        self.telemetry.retries.labels(self.stage, "storage").inc()

    def file_made(self, ctx: RequestContext, made_from: str) -> None:
        """How a stored file was made (`stored_audio.MadeFrom`): counted per format; a file
        decoded and encoded again (a stream reopened after a failover) is also logged."""
        self.telemetry.stored_files.labels(ctx.format, made_from).inc()
        if made_from == "decoded":
            self._request_event(ctx, "stored_file_decoded", logging.WARNING, format=ctx.format)

    def expiry_marker_failed(self, ctx: RequestContext, err: BaseException) -> None:
        self._request_event(ctx, "expiry_marker_failed", logging.WARNING, error=_error_text(err))

    def captions_not_stored(self, ctx: RequestContext, err: BaseException) -> None:
        log_event(
            self.log, "captions_not_stored", logging.WARNING, request_id=ctx.request_id, error=str(err)[:200]
        )

    # -- results ---------------------------------------------------------------------------
    def result_published(self, result: CompletionResult) -> None:
        """The result of an assembled request is acknowledged (completed, cancelled or failed)."""
        self.telemetry.requests_completed.labels(result.status).inc()
        release = result.release or BASE_RELEASE
        outcome = "degraded" if result.status == "completed" and result.degraded else result.status
        self.telemetry.release_requests.labels(release, outcome).inc()
        if result.first_audio_ms is not None and result.status == "completed":
            self.telemetry.release_first_audio.labels(release).observe(result.first_audio_ms / 1000)

    def request_delivered(self, req: AssembledRequest, key: str | None, started: float) -> None:
        """A request's audio is delivered (stored, if asked) and its result is out."""
        ctx = req.ctx
        self.telemetry.e2e_latency.labels(ctx.format).observe(
            max(0.0, (datetime.now(UTC) - ctx.created_at).total_seconds())
        )
        self._request_event(
            ctx,
            "completed",
            stage=self.stage,
            voice=ctx.voice,
            release=ctx.release,
            format=ctx.format,
            audio_s=round(req.duration_ms / 1000, 3),
            chunks=req.chunks,
            degraded=len(req.degraded),
            key=key,
            e2e_ms=round((datetime.now(UTC) - ctx.created_at).total_seconds() * 1000, 1),
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )

    def request_incomplete(self, ctx: RequestContext, missing: list[int]) -> None:
        """A stale request's `failed` result is acknowledged."""
        self.telemetry.release_requests.labels(ctx.release or BASE_RELEASE, "failed").inc()
        self._request_event(ctx, "request_incomplete", logging.ERROR, missing=missing[:20])
