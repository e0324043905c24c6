"""A gateway served in-process for a test, holding its `Gateway` (audit trail, keys), and
results published as the sink would (no synthesis needed to read stored audio)."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import httpx
from aiokafka import AIOKafkaProducer

from streamtts.features.audit.log import read_audit
from streamtts.gateway.app import create_app
from streamtts.gateway.server import GatewayServer
from streamtts.gateway.service import Gateway
from streamtts.gateway.settings import GatewaySettings
from streamtts.runtime.kafka import client_kwargs
from streamtts.runtime.s3 import ensure_bucket, make_minio
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import Captions, CompletionResult, StorageRef
from streamtts.schemas.audit import AuditEvent
from tests.gateway.conftest import ACME
from tests.services import Services


@dataclass
class Served:
    url: str
    gw: Gateway
    kafka: KafkaSettings
    s3: S3Settings
    since: datetime

    async def events(self, **match: object) -> list[AuditEvent]:
        """Every audit event so far (on Kafka) whose fields equal `match`."""
        await self.gw.audit.flush()
        found = [e async for e in read_audit(self.kafka, since=self.since)]
        return [e for e in found if all(getattr(e, k) == v for k, v in match.items())]

    async def one(self, **match: object) -> AuditEvent:
        found = await self.events(**match)
        assert len(found) == 1, f"expected one event {match}, got {found}"
        return found[0]


async def serve(settings: GatewaySettings, kafka: KafkaSettings, services: Services) -> AsyncIterator[Served]:
    app = create_app(settings, Settings(kafka=kafka, s3=services.s3))
    server = GatewayServer(app)
    since = datetime.now(UTC) - timedelta(seconds=1)
    await server.start()
    try:
        yield Served(server.url, app.state.gateway, kafka, services.s3, since)
    finally:
        await server.stop()


async def complete(
    served: Served, rid: str, tenant: str, *, captions: bool = False, expires_at: datetime | None = None
) -> bytes:
    """Store an mp3 (and captions) for `rid` and publish its completed result, as the sink does."""
    s3 = make_minio(served.s3, connect_s=3, read_s=10, retries=1, pool=2)
    ensure_bucket(s3, served.s3.bucket)
    data = b"\xff\xfb\x90\x00" * 500
    key = f"{tenant}/2026/12/01/{rid}.mp3"

    def put(k: str, body: bytes, ctype: str) -> StorageRef:
        r = s3.put_object(served.s3.bucket, k, io.BytesIO(body), len(body), content_type=ctype)
        return StorageRef(
            bucket=served.s3.bucket, key=k, size=len(body), etag=r.etag or "", content_type=ctype
        )

    audio = put(key, data, "audio/mpeg")
    caps = None
    if captions:
        vtt = b"WEBVTT\n\n00:00.000 --> 00:00.500\nHello\n"
        caps = Captions(
            vtt=put(key.replace(".mp3", ".vtt"), vtt, "text/vtt"),
            srt=put(key.replace(".mp3", ".srt"), b"1\n00:00:00,000 --> 00:00:00,500\nHello\n", "text/plain"),
            words=put(key.replace(".mp3", ".words.json"), b"[]", "application/json"),
        )
    now = datetime.now(UTC)
    result = CompletionResult(
        request_id=rid,
        tenant=tenant,
        status="completed",
        format="mp3",
        sample_rate=24000,
        duration_ms=500,
        chunks=1,
        storage=audio,
        captions=caps,
        created_at=now,
        completed_at=now,
        expires_at=expires_at,
    )
    producer = AIOKafkaProducer(**client_kwargs(served.kafka))
    await producer.start()
    try:
        await producer.send_and_wait(
            TopicNames(served.kafka.topic_prefix).results, result.to_bytes(), key=rid.encode()
        )
    finally:
        await producer.stop()
    return data


async def submit(client: httpx.AsyncClient, headers: dict[str, str] = ACME) -> str:
    r = await client.post("/v1/speech", json={"text": "Hello.", "voice": "en_joe"}, headers=headers)
    assert r.status_code == 202, r.text
    return str(r.json()["id"])
