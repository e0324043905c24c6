"""Object storage in memory, for the in-memory topology (`processors.in_memory`): the sink's own
`ObjectStore` (keys, metadata, tags, claim checks) over a bucket that is a dict, so the same
handler runs with no S3 server. Never a worker's: a worker without object storage settings
refuses to build the sink."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, BinaryIO

from streamtts.runtime.settings import S3Settings
from streamtts.sinks.object_store import ObjectStore


@dataclass(frozen=True)
class StoredObject:
    data: bytes
    content_type: str
    metadata: dict[str, Any]


@dataclass(frozen=True)
class _Written:
    etag: str


@dataclass(frozen=True)
class _Stat:
    metadata: dict[str, str]


class _Body:
    def __init__(self, data: bytes) -> None:
        self._data = data

    def read(self) -> bytes:
        return self._data

    def close(self) -> None:
        pass

    def release_conn(self) -> None:
        pass


@dataclass
class MemoryBucket:
    """The part of the minio client `ObjectStore` calls, on one bucket held in a dict."""

    objects: dict[str, StoredObject] = field(default_factory=dict)

    def bucket_exists(self, bucket: str) -> bool:
        return True

    def put_object(
        self,
        bucket: str,
        key: str,
        data: BinaryIO,
        length: int,
        content_type: str = "application/octet-stream",
        metadata: dict[str, Any] | None = None,
        **_: Any,  # part size, tags: nothing to do in memory
    ) -> _Written:
        body = data.read(length)
        self.objects[key] = StoredObject(body, content_type, dict(metadata or {}))
        return _Written(hashlib.md5(body, usedforsecurity=False).hexdigest())  # S3's single-part etag

    def presigned_get_object(self, bucket: str, key: str, expires: timedelta) -> str:
        return f"memory://{bucket}/{key}"

    def stat_object(self, bucket: str, key: str) -> _Stat:
        meta = self.objects[key].metadata
        return _Stat({f"x-amz-meta-{k}": str(v) for k, v in meta.items()})

    def get_object(self, bucket: str, key: str) -> _Body:
        return _Body(self.objects[key].data)


class MemoryObjectStore(ObjectStore):
    """The sink's `ObjectStore` on a `MemoryBucket`."""

    def __init__(self) -> None:
        self.settings = S3Settings(endpoint="memory", bucket="memory")
        self.bucket = self.settings.bucket
        self.memory = MemoryBucket()
        self.client = self.memory  # type: ignore[assignment]  # the calls ObjectStore makes, in memory
        self._bucket_ready = True

    @property
    def objects(self) -> dict[str, StoredObject]:
        return self.memory.objects

    def clear(self) -> None:
        self.memory.objects.clear()
