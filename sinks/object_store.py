"""Assembled audio files in object storage (MinIO or any S3), under deterministic keys.

Deterministic keys (tenant/yyyy/mm/dd/request_id.ext from the request's own created_at) make
redelivery and replay overwrite rather than duplicate. The minio SDK is synchronous: callers
run these methods in an executor.
"""

from __future__ import annotations

import io
from datetime import timedelta
from urllib.parse import quote

import urllib3
from minio.commonconfig import Tags
from minio.error import S3Error, ServerError

from streamtts.audio import formats
from streamtts.runtime.s3 import ensure_bucket, make_minio
from streamtts.runtime.settings import S3Settings
from streamtts.schemas import RequestContext, StorageRef


def object_key(ctx: RequestContext, namespace: str = "") -> str:
    """tenant/yyyy/mm/dd/request_id.ext, under the request's (or the sink's) namespace."""
    day = ctx.created_at.strftime("%Y/%m/%d")
    namespace = ctx.delivery.namespace or namespace
    prefix = f"{namespace.strip('/')}/" if namespace else ""
    return f"{prefix}{ctx.tenant}/{day}/{ctx.request_id}{formats.get(ctx.format).extension}"


def sibling_key(audio_key: str, extension: str) -> str:
    """`tenant/…/id.mp3` → `tenant/…/id.vtt`: the audio's key with another extension."""
    stem, dot, _ = audio_key.rpartition(".")
    return f"{stem if dot else audio_key}{extension}"


def is_transient_storage_error(err: BaseException) -> bool:
    """Whether retrying the same upload may succeed: connection trouble, timeouts and 5xx or
    throttling answers are the store's condition; anything else (a value the client or the
    server refuses, access denied, a missing bucket) fails again for this request."""
    if isinstance(err, ServerError):  # 5xx
        return True
    if isinstance(err, S3Error):
        return err.code in {"InternalError", "ServiceUnavailable", "SlowDown", "RequestTimeout"}
    return isinstance(err, urllib3.exceptions.HTTPError | ConnectionError | TimeoutError | OSError)


def metadata_value(value: str) -> str:
    """A request value made safe for an HTTP header (x-amz-meta-*): percent-encoded UTF-8, so
    a newline or non-ASCII character can never make the client refuse the upload."""
    return quote(value, safe="")


def content_type(ctx: RequestContext, sample_rate: int) -> str:
    return formats.get(ctx.format).media_type(sample_rate)


def _tags(tags: dict[str, str] | None) -> Tags | None:
    if not tags:
        return None
    out = Tags(for_object=True)
    out.update(tags)
    return out


class ObjectStore:
    def __init__(self, s3: S3Settings) -> None:
        self.settings = s3
        self.bucket = s3.bucket
        # One retry layer only: the sink's own capped backoff (logged, counted). The SDK's
        # default urllib3 retries would stack seconds of hidden waiting under each attempt.
        self.client = make_minio(s3, connect_s=3.0, read_s=30.0, retries=1, pool=8)
        self._bucket_ready = False

    def ensure_bucket(self) -> None:
        if self._bucket_ready:
            return
        ensure_bucket(self.client, self.bucket)
        self._bucket_ready = True

    def put_audio(
        self,
        ctx: RequestContext,
        data: bytes,
        *,
        sample_rate: int,
        duration_ms: float,
        presign_s: int | None,
        namespace: str = "",
        tags: dict[str, str] | None = None,
    ) -> StorageRef:
        """Upload one file (multipart above 5 MiB) and return its claim check. `tags`:
        object tags (the retention rules select by them, see features.retention.policy)."""
        self.ensure_bucket()
        key = object_key(ctx, namespace)
        ctype = content_type(ctx, sample_rate)
        result = self.client.put_object(
            self.bucket,
            key,
            io.BytesIO(data),
            len(data),
            content_type=ctype,
            part_size=8 * 1024 * 1024,
            metadata={
                "request-id": ctx.request_id,
                "tenant": ctx.tenant,
                "voice": metadata_value(ctx.voice),
                "sample-rate": str(sample_rate),
                "duration-ms": f"{duration_ms:.1f}",
            },
            tags=_tags(tags),
        )
        url = None
        if presign_s:
            url = self.client.presigned_get_object(self.bucket, key, expires=timedelta(seconds=presign_s))
        return StorageRef(
            bucket=self.bucket,
            key=key,
            size=len(data),
            etag=result.etag or "",
            content_type=ctype,
            url=url,
        )

    def put_beside(
        self,
        audio: StorageRef,
        extension: str,
        data: bytes,
        content_type: str,
        tags: dict[str, str] | None = None,
    ) -> StorageRef:
        """Store `data` next to an audio object: the same key with `extension` instead of
        the audio's (captions: `.vtt`, `.srt`, `.words.json`)."""
        self.ensure_bucket()
        key = sibling_key(audio.key, extension)
        result = self.client.put_object(
            self.bucket, key, io.BytesIO(data), len(data), content_type=content_type, tags=_tags(tags)
        )
        return StorageRef(
            bucket=self.bucket, key=key, size=len(data), etag=result.etag or "", content_type=content_type
        )

    def put_marker(self, key: str, metadata: dict[str, str]) -> None:
        """A zero-byte object whose metadata is the point (see `features.retention.policy`)."""
        self.ensure_bucket()
        meta: dict[str, str | list[str] | tuple[str]] = dict(metadata)
        self.client.put_object(self.bucket, key, io.BytesIO(b""), 0, metadata=meta)

    def marker(self, key: str) -> dict[str, str] | None:
        """A marker's metadata (lower-case names without `x-amz-meta-`), None if absent."""
        try:
            stat = self.client.stat_object(self.bucket, key)
        except S3Error as err:
            if err.code in ("NoSuchKey", "NoSuchBucket"):
                return None
            raise
        prefix = "x-amz-meta-"
        return {
            k.lower().removeprefix(prefix): v
            for k, v in (stat.metadata or {}).items()
            if k.lower().startswith(prefix)
        }

    def get(self, bucket: str, key: str) -> bytes:
        resp = self.client.get_object(bucket, key)
        try:
            return resp.read()
        finally:
            resp.close()
            resp.release_conn()
