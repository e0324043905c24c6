"""The in-memory topology's store is the sink's own `ObjectStore` over a dict: the same keys,
claim checks, metadata and markers as in object storage."""

from __future__ import annotations

import hashlib

from streamtts.schemas import RequestContext
from streamtts.sinks.memory_store import MemoryObjectStore
from streamtts.sinks.object_store import object_key
from tests.factories import request


def test_a_file_is_stored_under_the_sinks_key_with_its_claim_check() -> None:
    store = MemoryObjectStore()
    ctx = RequestContext.of(request(tenant="acme", format="wav"))
    ref = store.put_audio(ctx, b"RIFF....", sample_rate=24000, duration_ms=12.5, presign_s=None)
    assert ref.key == object_key(ctx) and ref.size == 8 and ref.content_type.startswith("audio/")
    assert ref.etag == hashlib.md5(b"RIFF....", usedforsecurity=False).hexdigest()
    assert store.get(ref.bucket, ref.key) == b"RIFF...."
    assert store.objects[ref.key].metadata["duration-ms"] == "12.5"
    beside = store.put_beside(ref, ".vtt", b"WEBVTT\n", "text/vtt")
    assert beside.key == ref.key.removesuffix(".wav") + ".vtt"


def test_a_marker_reads_back_and_clear_forgets_everything() -> None:
    store = MemoryObjectStore()
    store.put_marker("expiry/acme/r1", {"expires-at": "2026-12-31T00:00:00+00:00"})
    assert store.marker("expiry/acme/r1") == {"expires-at": "2026-12-31T00:00:00+00:00"}
    store.clear()
    assert store.objects == {}
