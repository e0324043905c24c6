"""A request's files in the object store, as the gateway serves them: the stored audio, its
captions, and the retention that expires them (410 once the promise has run out)."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime

from minio.error import S3Error

from streamtts.audio import formats
from streamtts.features.retention.policy import expiry_marker_key
from streamtts.gateway.errors import ApiError, request_failed
from streamtts.gateway.request_state import RequestState
from streamtts.schemas.captions import render as render_captions
from streamtts.schemas.captions import retimed
from streamtts.schemas.request import ID_PATTERN
from streamtts.sinks.object_store import ObjectStore

ID_RE = re.compile(ID_PATTERN)


async def captions(store: ObjectStore, state: RequestState, fmt: str) -> bytes:
    """The request's captions in `fmt` (vtt, srt, json): the stored file when the sink
    stored one, else rendered from the words its chunks carried.

    Raises:
        ApiError: 404 without timestamps, 409 while the audio is still being made.
    """
    if state.status == "failed":
        raise request_failed(state)
    check_retained(state)
    result = state.result
    if result is not None and result.captions is not None:
        ref = {"vtt": result.captions.vtt, "srt": result.captions.srt, "json": result.captions.words}[fmt]
        if not _under_tenant(ref.key, state.tenant):
            raise ApiError(404, "not_found", "no such captions for this tenant")
        return await _fetch(store, state, ref.bucket, ref.key)
    chunks = sorted(state.chunks, key=lambda c: (c.seq, c.part))
    if state.streamed and any(c.words is not None for c in chunks):
        words = retimed([(c.duration_ms, c.offset_ms, c.words or []) for c in chunks])
        return render_captions(words, fmt)
    if not state.terminal:
        raise ApiError(
            409,
            "not_ready",
            "the audio is still being made; retry when it completes",
            {"Retry-After": "1"},
        )
    raise ApiError(404, "no_captions", 'the request was made without "timestamps": true')


async def stored_audio(store: ObjectStore, state: RequestState) -> bytes:
    result = state.result
    if result is None or result.storage is None:
        raise ApiError(404, "no_audio", "the request has no stored audio")
    key = result.storage.key
    if not _under_tenant(key, state.tenant):
        raise ApiError(404, "not_found", "no such audio for this tenant")
    if not key.endswith(formats.get(result.format).extension):
        raise ApiError(500, "bad_result", "stored object does not match the request's format")
    return await _fetch(store, state, result.storage.bucket, key)


def check_retained(state: RequestState) -> None:
    """410 once the tenant's retention has expired the request's stored files (the
    store's lifecycle scanner deletes them some time later: the promise is what counts)."""
    result = state.result
    if result is not None and result.expires_at is not None and datetime.now(UTC) >= result.expires_at:
        raise ApiError(
            410,
            "expired",
            f"the audio of request {state.request_id} expired at {result.expires_at.isoformat()} "
            "(the tenant's retention)",
        )


async def check_expiry_marker(store: ObjectStore, tenant: str, request_id: str) -> None:
    """410 for a request whose result is past what can be searched but whose files the
    sink marked as expired (`features.retention.policy`); only this tenant's markers are read."""
    if not ID_RE.match(request_id):
        return
    try:
        meta = await asyncio.to_thread(store.marker, expiry_marker_key(tenant, request_id))
    except Exception:  # storage trouble: the plain 404 stands
        return
    if meta is None:
        return
    try:
        expires = datetime.fromisoformat(meta["expires-at"])
    except (KeyError, ValueError):
        return
    if datetime.now(UTC) >= expires:
        raise ApiError(
            410,
            "expired",
            f"the audio of request {request_id} expired at {expires.isoformat()} (retention)",
        )


def _under_tenant(key: str, tenant: str) -> bool:
    # Defence in depth: a result's object must sit under its tenant's prefix.
    return key.startswith(f"{tenant}/") or f"/{tenant}/" in key


async def _fetch(store: ObjectStore, state: RequestState, bucket: str, key: str) -> bytes:
    try:
        return await asyncio.to_thread(store.get, bucket, key)
    except S3Error as err:
        if err.code == "NoSuchKey":  # stored once, deleted since (expired or removed)
            raise ApiError(
                410, "gone", f"the stored audio of request {state.request_id} no longer exists"
            ) from None
        raise ApiError(502, "storage_unavailable", f"object storage: {err.code}") from None
    except Exception as err:
        raise ApiError(502, "storage_unavailable", f"object storage: {type(err).__name__}") from None
