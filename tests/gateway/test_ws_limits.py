"""WebSocket session limits from config: concurrent sessions and the idle timeout (no pipeline needed)."""

from __future__ import annotations

import asyncio
from dataclasses import replace

import orjson
import pytest
import websockets

from streamtts.gateway.settings import GatewaySettings

pytestmark = pytest.mark.integration


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings) -> GatewaySettings:
    return replace(gateway_settings, ws_max_sessions=1, ws_idle_timeout_s=2.0)


async def _next_event(ws: websockets.ClientConnection) -> dict:
    frame = await ws.recv()
    assert isinstance(frame, str), frame
    return orjson.loads(frame)


async def test_sessions_over_the_limit_are_refused_and_idle_ones_closed(gateway_url: str) -> None:
    url = gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    async with asyncio.timeout(30):
        async with websockets.connect(url) as first:
            assert (await _next_event(first))["type"] == "session"

            async with websockets.connect(url) as second:
                refused = await _next_event(second)
                assert refused["code"] == "too_many_sessions" and "limit of 1" in refused["message"]
                with pytest.raises(websockets.ConnectionClosed) as closed:
                    await second.recv()
                assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013

            # The first session sends nothing, so the gateway ends it after the idle timeout (2 s: long
            # enough that the second connection is refused while the first is surely still open).
            idle = await _next_event(first)
            assert idle == {"type": "error", "code": "idle_timeout", "message": "no input for 2 s"}
            with pytest.raises(websockets.ConnectionClosedOK):
                await first.recv()

        # Its slot is free again.
        async with websockets.connect(url) as third:
            assert (await _next_event(third))["type"] == "session"
            await third.send(orjson.dumps({"type": "start", "voice": "no_such_voice"}).decode())
            error = await _next_event(third)
            assert error["type"] == "error" and "no_such_voice" in error["message"]


async def test_empty_flushes_do_not_keep_a_session_alive(gateway_url: str) -> None:
    url = gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    async with asyncio.timeout(30), websockets.connect(url) as ws:
        assert (await _next_event(ws))["type"] == "session"
        started = asyncio.get_running_loop().time()

        async def keep_flushing() -> None:
            while True:
                await ws.send(orjson.dumps({"type": "flush"}).decode())
                await asyncio.sleep(0.3)  # the client's own pace

        flusher = asyncio.create_task(keep_flushing())
        try:
            event = await _next_event(ws)
        finally:
            flusher.cancel()
        assert event["code"] == "idle_timeout", "flushes without text are not input"
        assert asyncio.get_running_loop().time() - started < 2.0 + 1.5
