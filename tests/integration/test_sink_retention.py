"""The sink applies the tenant's retention to what it stores: object tags the lifecycle rules
select by, and `expires_at` in the result — the next midnight UTC after stored + days, as S3
counts lifecycle expiry."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest
from aiokafka import AIOKafkaProducer

from streamtts.runtime.kafka import client_kwargs, make_consumer
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.s3 import make_minio
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import CompletionResult
from streamtts.worker import Worker
from tests.factories import file_part, request
from tests.services import Services

pytestmark = pytest.mark.integration


async def test_stored_files_carry_retention_tags_and_results_their_expiry(
    kafka_settings: KafkaSettings, topics: TopicNames, services: Services, pipeline_settings: PipelineSettings
) -> None:
    pipeline = pipeline_settings.replace(retention_days=90, tenant_retention_days=("acme=30", "keeper=0"))
    reqs = {t: request("Hello.", tenant=t) for t in ("acme", "beta", "keeper")}
    worker = Worker(["sink"], Settings(kafka=kafka_settings, s3=services.s3), pipeline, ops=False)
    await worker.start()
    producer = AIOKafkaProducer(**client_kwargs(kafka_settings), enable_idempotence=True)
    await producer.start()
    results = make_consumer(kafka_settings, topics.results, group_id=None)
    await results.start()
    seen: dict[str, CompletionResult] = {}
    try:
        for r in reqs.values():
            chunk = file_part(r, 0, 1, samples=2400)
            await producer.send_and_wait(topics.file_parts, chunk.to_bytes(), key=r.request_id.encode())
        async with asyncio.timeout(60):
            while len(seen) < len(reqs):
                for records in (await results.getmany(timeout_ms=500)).values():
                    for rec in records:
                        res = CompletionResult.from_bytes(rec.value)
                        seen[res.tenant] = res
    finally:
        await results.stop()
        await producer.stop()
        await worker.stop()
    s3 = make_minio(services.s3, connect_s=3, read_s=10, retries=1, pool=2)
    for tenant, days, tags in (
        ("acme", 30, {"streamtts-tenant": "acme"}),
        ("beta", 90, {"streamtts-tenant": "beta", "streamtts-retention": "default"}),
        ("keeper", 0, {"streamtts-tenant": "keeper"}),
    ):
        res = seen[tenant]
        assert res.status == "completed" and res.storage is not None
        assert dict(s3.get_object_tags(res.storage.bucket, res.storage.key) or {}) == tags
        if days == 0:
            assert res.expires_at is None
            continue
        assert res.expires_at is not None
        # Against MinIO's own view: it counts from the object's creation (Last-Modified),
        # rounded up to midnight UTC; the promise may be early, never late.
        created = s3.stat_object(res.storage.bucket, res.storage.key).last_modified
        assert created is not None
        due = created.astimezone(UTC) + timedelta(days=days)
        deleted_from = datetime.combine(due.date(), datetime.min.time(), tzinfo=UTC) + timedelta(days=1)
        assert (
            res.expires_at.tzinfo is not None
            and res.expires_at.astimezone(UTC).time().isoformat() == "00:00:00"
        )
        assert deleted_from - timedelta(days=1) <= res.expires_at <= deleted_from, (
            tenant,
            created,
            res.expires_at,
        )
        # The marker the gateway answers 410 from, for when the result is out of its reach.
        marker = s3.stat_object(res.storage.bucket, f"_expiry/{tenant}/{res.request_id}")
        assert marker.size == 0 and marker.metadata is not None
        meta = {k.lower(): v for k, v in marker.metadata.items()}
        assert datetime.fromisoformat(meta["x-amz-meta-expires-at"]) == res.expires_at
        assert meta["x-amz-meta-key"] == res.storage.key
    assert datetime.now(UTC) < seen["acme"].expires_at  # type: ignore[operator]
