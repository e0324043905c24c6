"""SSML through the gateway on the real pipeline: REST passes the document through (captions
point into it, marks come back), a malformed document is a 400 naming where, the WebSocket
speaks one document per text message with `marks` events; the OpenAI endpoint stays plain."""

from __future__ import annotations

import asyncio

import httpx
import orjson
import pytest
import websockets

from tests.gateway.conftest import ACME

pytestmark = [pytest.mark.integration, pytest.mark.model]

SSML = (
    '<speak>Your code is <say-as interpret-as="digits">73</say-as>.'
    '<mark name="code-read"/><break time="400ms"/>Goodbye.</speak>'
)


async def test_ssml_over_rest_and_websocket(live_gateway_url: str) -> None:
    async with httpx.AsyncClient(base_url=live_gateway_url, headers=ACME, timeout=60) as client:
        resp = await client.post(
            "/v1/speech", json={"text": SSML, "text_type": "ssml", "voice": "jm_kumo", "timestamps": True}
        )
        assert resp.status_code == 202, resp.text
        accepted = resp.json()
        got = await client.get(accepted["captions_url"], params={"format": "json", "wait": 30})
        assert got.status_code == 200, got.text
        words = got.json()
        assert [w["text"] for w in words] == ["Your", "code", "is", "73", "Goodbye"]
        assert all(SSML[w["char_start"] : w["char_end"]] == w["text"] for w in words)
        vtt = (await client.get(accepted["captions_url"])).text
        assert "<say-as" not in vtt and "Your code is 73." in vtt
        status = (await client.get(accepted["status_url"], params={"wait": 30})).json()
        assert status["status"] == "completed", status

        broken = await client.post(
            "/v1/speech", json={"text": "<speak>Hi <s>there</speak>", "text_type": "ssml"}
        )
        assert broken.status_code == 400
        error = broken.json()["error"]
        assert error["code"] == "invalid_ssml" and "line 1, column" in error["message"]
        laughs = '<!DOCTYPE s [<!ENTITY a "aaaa">]><speak>&a;</speak>'
        refused = await client.post("/v1/speech", json={"text": laughs, "text_type": "ssml"})
        assert refused.status_code == 400 and "DOCTYPE" in refused.json()["error"]["message"]

    url = live_gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    events: list[dict] = []
    async with asyncio.timeout(120), websockets.connect(url, max_size=None) as ws:
        start = {"type": "start", "voice": "jm_kumo", "format": "pcm", "text_type": "ssml"}
        await ws.send(orjson.dumps(start).decode())
        await ws.send(orjson.dumps({"type": "text", "text": SSML}).decode())
        await ws.send(orjson.dumps({"type": "end"}).decode())
        while True:
            frame = await ws.recv()
            if isinstance(frame, bytes):
                continue
            events.append(orjson.loads(frame))
            if events[-1]["type"] == "done":
                break
    started = [e for e in events if e["type"] == "started"]
    assert len(started) == 1 and started[0]["text"] == SSML  # one document, not split
    marks = [m for e in events if e["type"] == "marks" for m in e["marks"]]
    assert [m["name"] for m in marks] == ["code-read"] and marks[0]["time_ms"] > 500
    assert any(e["type"] == "completed" for e in events)
