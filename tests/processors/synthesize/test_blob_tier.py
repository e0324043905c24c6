"""The render cache's shared tier on a first start, before its bucket exists (the first
`make demo`): an empty cache, said at debug; the tier stays on and creates the bucket on the
first write (real MinIO)."""

from __future__ import annotations

import logging
import uuid
from dataclasses import replace

import pytest

from streamtts.processors.synthesize.blob_tier import BlobTier
from streamtts.runtime.settings import S3Settings

pytestmark = pytest.mark.integration


async def test_a_missing_bucket_is_an_empty_cache_not_an_outage(
    s3_settings: S3Settings, caplog: pytest.LogCaptureFixture
) -> None:
    tier = BlobTier(replace(s3_settings, bucket=f"fresh-{uuid.uuid4().hex[:12]}"))
    with caplog.at_level(logging.DEBUG, logger="streamtts.cache"):
        assert tier.keys(100) == []  # the preload at start
        assert tier.get("ab" * 32) is None
        assert tier.put("ab" * 32, b"pcm")  # not backed off: the write creates the bucket
    assert tier.get("ab" * 32) == b"pcm" and tier.keys(100) == ["ab" * 32]
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert warnings == [], warnings
    assert any("cache_tier_empty" in r.getMessage() for r in caplog.records if r.levelno == logging.DEBUG)
