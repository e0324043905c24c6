"""The one way this project builds an S3 client (minio SDK) and makes sure a bucket exists."""

from __future__ import annotations

import urllib3
from minio import Minio

from streamtts.runtime.settings import S3Settings


def make_minio(s3: S3Settings, *, connect_s: float, read_s: float, retries: int, pool: int) -> Minio:
    """A client for `s3` with explicit timeouts and retries: the SDK's defaults would hide
    seconds of retrying under each call, and every caller has its own budget."""
    if retries:
        retry = urllib3.Retry(total=retries, backoff_factor=0.1, status_forcelist=(500, 502, 503, 504))
    else:
        retry = urllib3.Retry(total=0)
    http = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=connect_s, read=read_s), retries=retry, maxsize=pool
    )
    return Minio(
        s3.endpoint,
        access_key=s3.access_key,
        secret_key=s3.secret_key,
        secure=s3.secure,
        region=s3.region,
        http_client=http,
    )


def ensure_bucket(client: Minio, bucket: str) -> None:
    """Create `bucket` unless it exists; losing a creation race to another process is fine."""
    if client.bucket_exists(bucket):
        return
    try:
        client.make_bucket(bucket)
    except Exception:
        if not client.bucket_exists(bucket):
            raise
