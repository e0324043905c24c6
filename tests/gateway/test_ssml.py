"""SSML through the gateway on the real pipeline: REST passes the document through (captions
point into it, marks come back), a malformed document fails with the reason and where, the WebSocket
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

        # Malformed or hostile: accepted like any text, then failed by the segment stage with
        # the reason and where (one definition of valid SSML: the stage's).
        for text, says in [
            ("<speak>Hi <s>there</speak>", "mismatched tag"),
            ('<!DOCTYPE s [<!ENTITY a "aaaa">]><speak>&a;</speak>', "DOCTYPE"),
        ]:
            sent = await client.post("/v1/speech", json={"text": text, "text_type": "ssml"})
            assert sent.status_code == 202, sent.text
            failed = (await client.get(sent.json()["status_url"], params={"wait": 30})).json()
            assert failed["status"] == "failed", failed
            assert failed["error"].startswith("segment: invalid_ssml: invalid SSML at line 1, column"), failed
            assert says in failed["error"], failed

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
