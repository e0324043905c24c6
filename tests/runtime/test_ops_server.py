"""A worker's /metrics behind a token (STREAMTTS_METRICS_TOKEN); the probes stay open."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from streamtts.runtime.ops_server import OpsServer
from streamtts.runtime.readiness import Readiness
from streamtts.runtime.settings import Settings
from streamtts.runtime.telemetry import Telemetry


async def _served(token: str | None) -> AsyncIterator[str]:
    ops = OpsServer(Readiness(stages_started=True), Telemetry(), host="127.0.0.1", metrics_token=token)
    port = await ops.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await ops.stop()


@pytest.fixture
async def guarded() -> AsyncIterator[str]:
    async for url in _served("s3cr3t-token"):
        yield url


@pytest.fixture
async def open_ops() -> AsyncIterator[str]:
    async for url in _served(None):
        yield url


async def test_metrics_need_the_token_when_one_is_set(guarded: str) -> None:
    async with httpx.AsyncClient(base_url=guarded) as client:
        for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": "s3cr3t-token"}):
            refused = await client.get("/metrics", headers=headers)
            assert refused.status_code == 401, headers
            assert refused.headers["www-authenticate"].startswith("Bearer")
            assert b"streamtts_" not in refused.content
        ok = await client.get("/metrics", headers={"Authorization": "Bearer s3cr3t-token"})
        assert ok.status_code == 200 and b"streamtts_" in ok.content
        # Probes are for the orchestrator, which has no token: they stay open.
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200


async def test_metrics_are_open_by_default(open_ops: str) -> None:
    async with httpx.AsyncClient(base_url=open_ops) as client:
        assert (await client.get("/metrics")).status_code == 200


def test_the_token_comes_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert Settings.from_env().metrics_token is None
    monkeypatch.setenv("STREAMTTS_METRICS_TOKEN", "abc")
    settings = Settings.from_env()
    assert settings.metrics_token == "abc" and "abc" not in repr(settings)


async def test_metrics_are_openmetrics_with_exemplars_for_a_scraper_that_asks(open_ops: str) -> None:
    async with httpx.AsyncClient(base_url=open_ops) as client:
        plain = await client.get("/metrics")
        assert plain.headers["content-type"].startswith("text/plain; version=0.0.4")
        assert b"# EOF" not in plain.content
        # Prometheus' own Accept header (exemplar storage on): OpenMetrics first.
        accept = (
            "application/openmetrics-text;version=1.0.0;q=0.5,application/openmetrics-text;"
            "version=0.0.1;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.1"
        )
        om = await client.get("/metrics", headers={"Accept": accept})
        assert om.status_code == 200
        assert om.headers["content-type"].startswith("application/openmetrics-text; version=1.0.0")
        assert om.content.rstrip().endswith(b"# EOF") and b"streamtts_stage_seconds" in om.content
        assert om.headers["x-content-type-options"] == "nosniff"
