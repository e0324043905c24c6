"""A shared byte store on object storage for caches (the render cache's shared tier).

A cache must never make the hot path slower than a miss: each call has tight timeouts and no
retries, an error counts as a miss, and after an error the tier stays off for `backoff_s`
(one slow S3 call per backoff, not one per span). A bucket that does not exist yet is an
empty cache (a first start), not an error: the first write creates it."""

from __future__ import annotations

import io
import logging
import threading
import time

from minio.error import S3Error

from streamtts.runtime.jsonlog import log_event
from streamtts.runtime.s3 import ensure_bucket, make_minio
from streamtts.runtime.settings import S3Settings

log = logging.getLogger("streamtts.cache")


class BlobTier:
    """get/put of small objects under `prefix` in the S3 bucket of `s3`."""

    def __init__(self, s3: S3Settings, prefix: str = "render-cache/", *, backoff_s: float = 10.0) -> None:
        self.bucket = s3.bucket
        self.prefix = prefix
        self.backoff_s = backoff_s
        self.client = make_minio(s3, connect_s=0.5, read_s=2.0, retries=0, pool=4)
        self._off_until = 0.0
        self._bucket_ready = False
        self._lock = threading.Lock()

    def _name(self, key: str) -> str:
        return f"{self.prefix}{key[:2]}/{key}"

    def _available(self) -> bool:
        return time.monotonic() >= self._off_until

    def _failed(self, op: str, err: BaseException) -> None:
        with self._lock:
            self._off_until = time.monotonic() + self.backoff_s
        log_event(
            log, "cache_tier_unavailable", logging.WARNING, op=op, error=str(err)[:200], off_s=self.backoff_s
        )

    def get(self, key: str) -> bytes | None:
        if not self._available():
            return None
        try:
            resp = self.client.get_object(self.bucket, self._name(key))
        except S3Error as err:
            if err.code in ("NoSuchKey", "NoSuchBucket"):
                return None
            self._failed("get", err)
            return None
        except Exception as err:  # connection refused, timeouts: a miss, and back off
            self._failed("get", err)
            return None
        try:
            return resp.read()
        except Exception as err:
            self._failed("get", err)
            return None
        finally:
            resp.close()
            resp.release_conn()

    def put(self, key: str, value: bytes) -> bool:
        if not self._available():
            return False
        try:
            if not self._bucket_ready:
                ensure_bucket(self.client, self.bucket)
                self._bucket_ready = True
            self.client.put_object(
                self.bucket,
                self._name(key),
                io.BytesIO(value),
                len(value),
                content_type="application/octet-stream",
            )
        except Exception as err:
            self._failed("put", err)
            return False
        return True

    def keys(self, limit: int) -> list[str]:
        """Up to `limit` keys, most recently written first (what a worker preloads)."""
        try:
            objects = list(self.client.list_objects(self.bucket, prefix=self.prefix, recursive=True))
        except S3Error as err:
            if err.code == "NoSuchBucket":
                # A first start (the first `make demo`): nothing cached yet, not an outage; the
                # first `put` creates the bucket.
                log_event(log, "cache_tier_empty", logging.DEBUG, bucket=self.bucket, reason="no bucket yet")
                return []
            self._failed("list", err)
            return []
        except Exception as err:
            self._failed("list", err)
            return []
        objects.sort(key=lambda o: o.last_modified.timestamp() if o.last_modified else 0.0, reverse=True)
        return [str(o.object_name).rsplit("/", 1)[-1] for o in objects[:limit]]
