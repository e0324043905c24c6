"""The gateway under hostile clients: bounded metric labels, one tenant cannot take every
WebSocket slot, oversized frames are refused before parsing."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from urllib.parse import urlparse

import httpx
import orjson
import pytest
import websockets

from streamtts.gateway.settings import GatewaySettings, RateLimit
from tests.helpers import metric

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings) -> GatewaySettings:
    return replace(
        gateway_settings,
        ws_max_sessions=8,
        ws_max_sessions_per_tenant=1,
        lookup_rate=RateLimit(per_s=0.01, burst=3.0),
    )


async def _raw_request(url: str, request_line: bytes) -> bytes:
    host = urlparse(url)
    reader, writer = await asyncio.open_connection(host.hostname, host.port)
    writer.write(request_line + b"\r\nHost: x\r\nConnection: close\r\n\r\n")
    await writer.drain()
    try:
        return await asyncio.wait_for(reader.read(4096), 10)
    finally:
        writer.close()


async def test_made_up_http_methods_share_one_metric_label(gateway_url: str) -> None:
    for i in range(5):
        await _raw_request(gateway_url, f"FROB{i}X{'Y' * 200} /healthz HTTP/1.1".encode())
    async with httpx.AsyncClient(base_url=gateway_url) as client:
        text = (await client.get("/metrics")).text
    assert "FROB" not in text, "a client-chosen method must never become a label value"
    assert metric(text, "streamtts_gateway_http_requests_total", method="other") == 5


async def _event(ws: websockets.ClientConnection) -> dict:
    frame = await asyncio.wait_for(ws.recv(), 10)
    assert isinstance(frame, str)
    return orjson.loads(frame)


async def test_one_tenant_cannot_hold_every_websocket_slot(gateway_url: str) -> None:
    base = gateway_url.replace("http://", "ws://") + "/v1/stream?api_key="
    async with websockets.connect(base + "key-acme") as first:
        assert (await _event(first))["type"] == "session"
        async with websockets.connect(base + "key-acme") as second:
            refused = await _event(second)
            assert refused["code"] == "too_many_sessions" and "tenant 'acme'" in refused["message"]
            with pytest.raises(websockets.ConnectionClosed) as closed:
                await second.recv()
            assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
        async with websockets.connect(base + "key-globex") as other:
            assert (await _event(other))["type"] == "session", "another tenant still gets a slot"


async def test_a_frame_over_the_limit_closes_the_socket_unparsed(
    gateway_url: str, gateway_settings: GatewaySettings
) -> None:
    url = gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    async with websockets.connect(url, max_size=None) as ws:
        assert (await _event(ws))["type"] == "session"
        await ws.send("x" * (gateway_settings.ws_max_frame_bytes + 1))
        with pytest.raises(websockets.ConnectionClosed) as closed:
            while True:
                await asyncio.wait_for(ws.recv(), 10)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == 1009


async def test_polling_unknown_ids_is_bounded_per_tenant(gateway_url: str) -> None:
    acme = {"Authorization": "Bearer key-acme"}
    async with httpx.AsyncClient(base_url=gateway_url, timeout=30) as client:
        for i in range(3):  # each one searches tts.results: the tenant's budget is 3
            assert (await client.get(f"/v1/speech/nope-{i}", headers=acme)).status_code == 404
        again = await client.get("/v1/speech/nope-0", headers=acme)
        assert again.status_code == 404, "a recent miss is answered from memory, at no cost"
        over = await client.get("/v1/speech/nope-9", headers=acme)
        assert over.status_code == 429 and int(over.headers["Retry-After"]) >= 1
        assert over.json()["error"]["code"] == "rate_limited"
        other = await client.get("/v1/speech/nope-9", headers={"X-API-Key": "key-globex"})
        assert other.status_code == 404, "another tenant's budget is its own"
