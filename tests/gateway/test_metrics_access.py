"""The gateway's /metrics behind the deployment's metrics token, tenants hashed in labels, and
/v1/pipeline still reading the workers' guarded /metrics (real Kafka, a real worker ops server)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import httpx
import pytest

from streamtts.gateway.app import create_app
from streamtts.gateway.metrics import hashed_tenant
from streamtts.gateway.server import GatewayServer
from streamtts.gateway.settings import GatewaySettings
from streamtts.runtime.ops_server import OpsServer
from streamtts.runtime.readiness import Readiness
from streamtts.runtime.settings import KafkaSettings, Settings
from streamtts.runtime.telemetry import Telemetry
from tests.gateway.conftest import ACME
from tests.helpers import metric
from tests.services import Services

pytestmark = pytest.mark.integration

TOKEN = "metrics-secret-1"


@pytest.fixture
async def worker_ops() -> AsyncIterator[str]:
    telemetry = Telemetry()
    telemetry.requests_completed.labels("completed").inc(3)
    ops = OpsServer(Readiness(stages_started=True), telemetry, host="127.0.0.1", metrics_token=TOKEN)
    port = await ops.start()
    try:
        yield f"http://127.0.0.1:{port}/metrics"
    finally:
        await ops.stop()


@pytest.fixture
async def guarded_gateway(
    gateway_settings: GatewaySettings, kafka_settings: KafkaSettings, services: Services, worker_ops: str
) -> AsyncIterator[str]:
    settings = replace(gateway_settings, hash_tenant_labels=True, worker_metrics_urls=(worker_ops,))
    server = GatewayServer(
        create_app(settings, Settings(kafka=kafka_settings, s3=services.s3, metrics_token=TOKEN))
    )
    await server.start()
    try:
        yield server.url
    finally:
        await server.stop()


async def test_metrics_need_the_token_and_show_no_tenant_names(guarded_gateway: str) -> None:
    async with httpx.AsyncClient(base_url=guarded_gateway, timeout=30) as client:
        assert (
            await client.post("/v1/speech", json={"text": "Hello.", "voice": "en_joe"}, headers=ACME)
        ).status_code == 202
        for headers in ({}, {"Authorization": "Bearer nope"}, ACME):  # an API key is not the metrics token
            refused = await client.get("/metrics", headers=headers)
            assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized", headers
            assert "www-authenticate" in refused.headers
        text = (await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})).text
        assert (
            metric(text, "streamtts_gateway_submitted_total", endpoint="speech", tenant=hashed_tenant("acme"))
            == 1
        )
        assert "acme" not in text
        # The page's summary reads the worker's guarded /metrics with the same token.
        pipeline = (await client.get("/v1/pipeline")).json()
        [worker] = pipeline["workers"]
        assert worker["up"] is True, worker
        assert worker["metrics"]["streamtts_requests_completed_total"] == {"completed": 3.0}
        assert (await client.get("/healthz")).status_code == 200


def test_hashed_labels_are_stable_and_off_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hashed_tenant("acme") == hashed_tenant("acme") != hashed_tenant("globex")
    assert hashed_tenant("acme").startswith("t-") and len(hashed_tenant("acme")) == 14
    assert GatewaySettings.from_env().hash_tenant_labels is False
    monkeypatch.setenv("STREAMTTS_GATEWAY_HASH_TENANT_LABELS", "true")
    assert GatewaySettings.from_env().hash_tenant_labels is True
