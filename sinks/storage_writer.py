"""Writes one assembled request's files to object storage: the audio (the streamed frames where
they make the file, see `stored_audio`), its expiry marker and its captions, each upload
retried through transient faults.

The minio SDK and the encoders are synchronous: they run on this writer's small thread pool,
so the sink's loop keeps heartbeating and the rebalance listener keeps answering.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from streamtts.features.retention.policy import RetentionPolicy, expiry_marker_key
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.schemas import Captions, RequestContext, StorageRef
from streamtts.schemas import captions as caption_files
from streamtts.sinks.assembler import AssembledRequest
from streamtts.sinks.exceptions import StorageRejected, StorageUnavailable
from streamtts.sinks.object_store import ObjectStore, is_transient_storage_error
from streamtts.sinks.stored_audio import stored_audio
from streamtts.sinks.telemetry import SinkTelemetry

CAPTION_FILES = (("vtt", ".vtt"), ("srt", ".srt"), ("json", ".words.json"))
"""(caption format, extension beside the audio's key)."""


@dataclass(frozen=True)
class StoredFiles:
    """Where a request's files went: what its result tells the client."""

    audio: StorageRef
    captions: Captions | None
    """None without timestamps, or when they could not be stored (best effort)."""
    expires_at: datetime | None
    """When retention lets the store delete them (None: kept)."""


class StorageWriter:
    def __init__(
        self,
        store: ObjectStore,
        pipeline: PipelineSettings,
        telemetry: SinkTelemetry,
        stopping: asyncio.Event,
        *,
        namespace: str = "",
    ) -> None:
        """
        Args:
            store: object storage (`ObjectStore`), or the in-memory topology's.
            stopping: set on shutdown; a retry backoff wakes at once and gives up.
            namespace: the key prefix of requests that name none themselves.
        """
        self.store = store
        self.retention = RetentionPolicy.of(pipeline)
        self.attempts = max(1, pipeline.storage.storage_retries)
        self.presign_s = pipeline.storage.presign_expiry_s
        self.namespace = namespace
        self.telemetry = telemetry
        self._stopping = stopping
        self.pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="sink")

    async def write(self, req: AssembledRequest) -> StoredFiles:
        """Store the request's audio, then its expiry marker and captions.

        Raises:
            StorageRejected: the audio was refused for good.
            StorageUnavailable: the audio could not be stored through every retry.
        """
        ctx = req.ctx
        # 1. Take the time before the upload: object storage counts expiry from the object's
        #    creation, so `expires_at` never promises more than the store keeps.
        stored_at = datetime.now(UTC)
        expires_at = self.retention.expires_at(ctx.tenant, stored_at)
        # 2. The audio, the one file whose failure fails the request.
        audio = await self._put_audio(req)
        # 3. Best-effort extras: their failure must not fail a request whose audio is stored.
        if expires_at is not None:
            await self._mark_expiry(ctx, audio, expires_at)
        captions = await self._captions_or_none(req, audio) if req.words is not None else None
        return StoredFiles(audio, captions, expires_at)

    def close(self) -> None:
        self.pool.shutdown(wait=True)

    async def _put_audio(self, req: AssembledRequest) -> StorageRef:
        loop = asyncio.get_running_loop()
        data, made_from = await loop.run_in_executor(self.pool, stored_audio, req)
        self.telemetry.file_made(req.ctx, made_from)
        ref = await self._retrying(
            req.ctx,
            lambda: self.store.put_audio(
                req.ctx,
                data,
                sample_rate=req.sample_rate,
                duration_ms=req.duration_ms,
                presign_s=self.presign_s if req.ctx.delivery.presign else None,
                namespace=self.namespace,
                tags=self.retention.tags_for(req.ctx.tenant),
            ),
        )
        return ref.model_copy(update={"made_from": made_from})

    async def _mark_expiry(self, ctx: RequestContext, audio: StorageRef, expires_at: datetime) -> None:
        """A zero-byte marker of when the file expires (see `features.retention.policy`): without it an
        expired request is 404 instead of 410 once its result is out of the gateway's reach."""
        meta = {"expires-at": expires_at.isoformat(), "key": audio.key, "request-id": ctx.request_id}
        try:
            marker = expiry_marker_key(ctx.tenant, ctx.request_id)
            await asyncio.to_thread(self.store.put_marker, marker, meta)
        except Exception as err:  # storage trouble: the result still carries expires_at
            self.telemetry.expiry_marker_failed(ctx, err)

    async def _captions_or_none(self, req: AssembledRequest, audio: StorageRef) -> Captions | None:
        """WebVTT, SRT and the word list next to the audio (same key, other extensions). The
        words stay in the result when these cannot be stored."""
        words = req.words or []
        refs: dict[str, StorageRef] = {}
        try:
            for fmt, extension in CAPTION_FILES:
                refs[fmt] = await self._retrying(
                    req.ctx,
                    functools.partial(
                        self.store.put_beside,
                        audio,
                        extension,
                        caption_files.render(words, fmt),
                        caption_files.CAPTION_CONTENT_TYPES[fmt],
                        self.retention.tags_for(req.ctx.tenant),
                    ),
                )
        except (StorageUnavailable, StorageRejected) as err:
            self.telemetry.captions_not_stored(req.ctx, err)
            return None
        return Captions(vtt=refs["vtt"], srt=refs["srt"], words=refs["json"])

    async def _retrying(self, ctx: RequestContext, put: Callable[[], StorageRef]) -> StorageRef:
        """One upload, transient faults retried with capped backoff.

        Raises:
            StorageRejected: a permanent refusal (at once).
            StorageUnavailable: every attempt failed transiently, or shutdown began.
        """
        loop = asyncio.get_running_loop()
        delay = 0.25
        for attempt in range(1, self.attempts + 1):
            try:
                return await loop.run_in_executor(self.pool, put)
            except Exception as err:  # urllib3/minio raise many kinds; classified once, below
                error = f"{type(err).__name__}: {str(err)[:200]}"
                if not is_transient_storage_error(err):
                    raise StorageRejected(f"object storage refused the upload: {error}") from err
                self.telemetry.storage_retry(ctx.request_id, attempt, error)
                if attempt == self.attempts:
                    raise StorageUnavailable(
                        f"object storage failed {self.attempts} times: {type(err).__name__}"
                    ) from err
                try:  # back off, but wake at once on shutdown
                    await asyncio.wait_for(self._stopping.wait(), timeout=delay)
                    raise StorageUnavailable("shutting down during storage retries") from err
                except TimeoutError:
                    pass
                delay = min(delay * 2, 8.0)
        raise AssertionError("unreachable: the last attempt returns or raises")
