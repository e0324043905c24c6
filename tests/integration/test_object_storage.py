"""What the sinks rely on from object storage, proven against the real S3 server."""

from __future__ import annotations

import hashlib
import io
import os
import urllib.error
import urllib.request
import uuid
from datetime import timedelta

import pytest
from minio import Minio

from streamtts.runtime.settings import S3Settings

pytestmark = pytest.mark.integration


@pytest.fixture
def s3(s3_settings: S3Settings) -> Minio:
    return Minio(
        s3_settings.endpoint,
        access_key=s3_settings.access_key,
        secret_key=s3_settings.secret_key,
        secure=s3_settings.secure,
    )


@pytest.fixture
def bucket(s3: Minio) -> str:
    name = f"test-{uuid.uuid4().hex[:12]}"
    s3.make_bucket(name)
    return name


def test_put_get_byte_identical(s3: Minio, bucket: str) -> None:
    data = os.urandom(300_000)
    s3.put_object(
        bucket,
        "a/b.bin",
        io.BytesIO(data),
        len(data),
        content_type="audio/mpeg",
        metadata={"request-id": "r1"},
    )
    resp = s3.get_object(bucket, "a/b.bin")
    try:
        assert resp.read() == data
    finally:
        resp.close()
        resp.release_conn()
    stat = s3.stat_object(bucket, "a/b.bin")
    assert stat.content_type == "audio/mpeg"
    assert stat.metadata.get("x-amz-meta-request-id") == "r1"
    assert stat.etag == hashlib.md5(data).hexdigest()


def test_multipart_upload_over_5mb(s3: Minio, bucket: str) -> None:
    data = os.urandom(12 * 1024 * 1024)
    result = s3.put_object(bucket, "big.bin", io.BytesIO(data), len(data), part_size=5 * 1024 * 1024)
    assert result.etag.endswith("-3"), "12 MiB in 5 MiB parts is a 3-part upload"
    resp = s3.get_object(bucket, "big.bin")
    try:
        assert hashlib.sha256(resp.read()).digest() == hashlib.sha256(data).digest()
    finally:
        resp.close()
        resp.release_conn()


def test_presigned_get_works_without_credentials(s3: Minio, bucket: str) -> None:
    data = b"presigned audio bytes"
    s3.put_object(bucket, "p.mp3", io.BytesIO(data), len(data))
    url = s3.presigned_get_object(bucket, "p.mp3", expires=timedelta(minutes=5))
    with urllib.request.urlopen(url, timeout=10) as resp:
        assert resp.read() == data
    # Tampering with the signature must be refused: the server really checks it.
    bad = url.replace("X-Amz-Signature=", "X-Amz-Signature=0")
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(bad, timeout=10)
    assert info.value.code == 403
