"""Gateway fixtures: the app served by uvicorn in-process on an ephemeral port, on the test's
own topics, over the real Kafka/MinIO (and, where a test asks for it, the real pipeline)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from streamtts.gateway.app import create_app
from streamtts.gateway.server import GatewayServer
from streamtts.gateway.settings import GatewaySettings, RateLimit
from streamtts.runtime.settings import KafkaSettings, Settings
from tests.services import Services

if TYPE_CHECKING:
    from tests.gateway.served import Served

RESULTS = Path(__file__).resolve().parents[2] / "results" / "gateway"
KEYS = {"key-acme": "acme", "key-globex": "globex", "key-tiny": "tiny"}
ACME = {"Authorization": "Bearer key-acme"}
GLOBEX = {"X-API-Key": "key-globex"}
TINY = {"Authorization": "Bearer key-tiny"}


@pytest.fixture
def gateway_settings() -> GatewaySettings:
    return GatewaySettings(
        api_keys=KEYS,
        default_rate=RateLimit(per_s=50.0, burst=100.0),
        # "tiny" gets two requests, then one per 100 s: the third is refused.
        tenant_rates={"tiny": RateLimit(per_s=0.01, burst=2.0)},
        max_text_chars=400,
        max_body_bytes=8 * 1024,
        request_timeout_s=60.0,
        ws_idle_timeout_s=30.0,
    )


async def _serve(settings: GatewaySettings, kafka: KafkaSettings, services: Services) -> AsyncIterator[str]:
    server = GatewayServer(create_app(settings, Settings(kafka=kafka, s3=services.s3)))
    await server.start()
    try:
        yield server.url
    finally:
        await server.stop()


@pytest.fixture
async def gateway_url(
    gateway_settings: GatewaySettings, kafka_settings: KafkaSettings, services: Services
) -> AsyncIterator[str]:
    """The gateway over this test's topics, with no pipeline behind it."""
    async for url in _serve(gateway_settings, kafka_settings, services):
        yield url


@pytest.fixture
async def live_gateway_url(
    running_pipeline, gateway_settings: GatewaySettings, kafka_settings: KafkaSettings, services: Services
) -> AsyncIterator[str]:
    """The gateway in front of the real pipeline (whose /metrics it summarises)."""
    settings = replace(
        gateway_settings, worker_metrics_urls=(f"http://127.0.0.1:{running_pipeline.ops_port}/metrics",)
    )
    async for url in _serve(settings, kafka_settings, services):
        yield url


@pytest.fixture(scope="session")
def results_dir() -> Path:
    RESULTS.mkdir(parents=True, exist_ok=True)
    return RESULTS


@pytest.fixture
async def served(
    gateway_settings: GatewaySettings, kafka_settings: KafkaSettings, services: Services
) -> AsyncIterator[Served]:
    """The gateway in-process, with its `Gateway` at hand (audit trail, keys)."""
    from tests.gateway.served import serve  # it imports this module's keys

    async for s in serve(gateway_settings, kafka_settings, services):
        yield s
