"""Object storage in memory, for the in-memory topology (`processors.in_memory`): the sink stores
a request's files here, under the keys and with the claim checks it gives in object storage, so
the same handler runs with no S3 server. Never a worker's: a worker without object storage
settings refuses to build the sink."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from streamtts.schemas import RequestContext, StorageRef
from streamtts.sinks.object_store import content_type, object_key, sibling_key


@dataclass(frozen=True)
class StoredObject:
    data: bytes
    content_type: str
    metadata: dict[str, str]


class MemoryObjectStore:
    """`ObjectStore`'s writing side (a `FileStore`), as a dict of key → object."""

    bucket = "memory"

    def __init__(self) -> None:
        self.objects: dict[str, StoredObject] = {}

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
        key = object_key(ctx, namespace)
        return self._put(key, data, content_type(ctx, sample_rate), {"duration-ms": f"{duration_ms:.1f}"})

    def put_beside(
        self,
        audio: StorageRef,
        extension: str,
        data: bytes,
        content_type: str,
        tags: dict[str, str] | None = None,
    ) -> StorageRef:
        return self._put(sibling_key(audio.key, extension), data, content_type, {})

    def put_marker(self, key: str, metadata: dict[str, str]) -> None:
        self._put(key, b"", "application/octet-stream", dict(metadata))

    def get(self, bucket: str, key: str) -> bytes:
        return self.objects[key].data

    def clear(self) -> None:
        self.objects.clear()

    def _put(self, key: str, data: bytes, ctype: str, metadata: dict[str, str]) -> StorageRef:
        self.objects[key] = StoredObject(data, ctype, metadata)
        etag = hashlib.md5(data, usedforsecurity=False).hexdigest()  # as S3's for a single part
        return StorageRef(bucket=self.bucket, key=key, size=len(data), etag=etag, content_type=ctype)
