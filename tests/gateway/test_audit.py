"""Audit trail: every gateway action (and refusal) is an event on `tts.audit` and a JSON log
line, with tenant, key id (never the key), client address, outcome and bytes; `streamtts
audit` reads them back. Real Kafka and MinIO; the completed requests' results are published
on `tts.results` by the test (no synthesis needed to read stored audio)."""

from __future__ import annotations

import asyncio
import logging
import sys
import time

import httpx
import orjson
import pytest
import websockets

from streamtts.features.audit.log import key_id
from streamtts.runtime.settings import KafkaSettings
from tests.gateway.conftest import ACME, TINY
from tests.gateway.served import Served, complete, submit
from tests.helpers import cli_env
from tests.services import Services

pytestmark = pytest.mark.integration

ACME_ID = key_id("key-acme")


async def test_submit_is_audited_on_kafka_and_in_the_json_log(
    served: Served, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="streamtts.audit")
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        rid = await submit(client)
    event = await served.one(action="submit")
    assert (event.source, event.outcome, event.status) == ("gateway", "ok", 202)
    assert (event.tenant, event.key_id, event.client, event.request_id) == ("acme", ACME_ID, "127.0.0.1", rid)
    assert event.bytes > 0 and event.duration_ms is not None
    logged = [r for r in caplog.records if r.name == "streamtts.audit" and r.getMessage() == "audit"]
    assert [(r.action, r.request_id, r.key_id) for r in logged] == [("submit", rid, ACME_ID)]  # type: ignore[attr-defined]
    everything = orjson.dumps([e.to_dict() for e in await served.events()]) + caplog.text.encode()
    assert b"key-acme" not in everything, "the key itself is never recorded"


async def test_status_and_cancel_are_audited(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        rid = await submit(client)
        assert (await client.get(f"/v1/speech/{rid}", headers=ACME)).status_code == 200
        assert (await client.delete(f"/v1/speech/{rid}", headers=ACME)).status_code == 202
        assert (await client.get("/v1/speech/unknown-id", headers=ACME)).status_code == 404
    status = await served.events(action="status")
    assert [(e.request_id, e.outcome, e.status) for e in status] == [
        (rid, "ok", 200),
        ("unknown-id", "not_found", 404),
    ]
    cancel = await served.one(action="cancel")
    assert (cancel.request_id, cancel.outcome, cancel.status, cancel.tenant) == (rid, "ok", 202, "acme")


async def test_audio_and_captions_reads_are_audited_with_their_bytes(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        rid = await submit(client)
        data = await complete(served, rid, "acme", captions=True)
        status = await client.get(f"/v1/speech/{rid}?wait=20", headers=ACME)
        assert status.json()["status"] == "completed"
        audio = await client.get(f"/v1/speech/{rid}/audio", headers=ACME)
        assert audio.status_code == 200 and audio.content == data
        vtt = await client.get(f"/v1/speech/{rid}/captions", headers=ACME)
        assert vtt.status_code == 200 and vtt.text.startswith("WEBVTT")
    read = await served.one(action="audio_read")
    assert (read.request_id, read.outcome, read.status, read.bytes) == (rid, "ok", 200, len(data))
    caps = await served.one(action="captions_read")
    assert (caps.outcome, caps.bytes) == ("ok", len(vtt.content))


async def test_websocket_sessions_open_and_close_are_audited(served: Served) -> None:
    url = served.url.replace("http://", "ws://") + "/v1/stream"
    async with websockets.connect(url, additional_headers=ACME) as ws:
        session = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
        await ws.send(orjson.dumps({"type": "start", "voice": "en_joe", "format": "pcm"}).decode())
        await ws.send(orjson.dumps({"type": "end"}).decode())
        async with asyncio.timeout(20):
            while orjson.loads(await ws.recv())["type"] != "done":
                pass
        with pytest.raises(websockets.ConnectionClosed):
            await asyncio.wait_for(ws.recv(), 10)
    async with websockets.connect(url + "?api_key=nope") as ws:
        assert orjson.loads(await ws.recv())["code"] == "unauthorized"
    # Each sentence is a submit of its own; a client that just goes away ends the session too.
    async with websockets.connect(url, additional_headers=ACME) as ws:
        second = orjson.loads(await asyncio.wait_for(ws.recv(), 10))["session_id"]
        await ws.send(orjson.dumps({"type": "start", "voice": "en_joe", "format": "pcm"}).decode())
        await ws.send(orjson.dumps({"type": "text", "text": "Hello there. "}).decode())
        async with asyncio.timeout(20):
            while orjson.loads(await ws.recv())["type"] != "started":
                pass
    deadline = time.monotonic() + 10
    while len(await served.events(action="ws_close")) < 2:  # recorded once the server sees the close
        assert time.monotonic() < deadline, "no ws_close events"
    opened = await served.events(action="ws_open")
    assert [(e.outcome, e.tenant, e.request_id) for e in opened] == [
        ("ok", "acme", session["session_id"]),
        ("unauthorized", None, None),
        ("ok", "acme", second),
    ]
    closed = {e.request_id: e for e in await served.events(action="ws_close")}
    assert closed[session["session_id"]].details["reason"] == "end"
    assert closed[session["session_id"]].bytes > 0 and closed[session["session_id"]].key_id == ACME_ID
    assert closed[second].details == {"reason": "disconnect", "sentences": 1}
    sentence = await served.one(action="submit")
    assert (sentence.request_id, sentence.outcome, sentence.details) == (
        f"{second}-0",
        "ok",
        {"via": "ws", "session_id": second},
    )


async def test_auth_failures_and_rate_limit_refusals_are_audited(served: Served) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        bad = await client.post("/v1/speech", json={"text": "Hi."}, headers={"Authorization": "Bearer nope"})
        assert bad.status_code == 401
        assert (await client.get("/v1/speech/x/audio")).status_code == 401
        codes = [
            (await client.post("/v1/speech", json={"text": "Hi."}, headers=TINY)).status_code
            for _ in range(3)
        ]
        assert codes == [202, 202, 429]
    refused = await served.events(outcome="unauthorized")
    assert sorted((e.action, e.status, e.tenant, e.key_id) for e in refused) == [
        ("audio_read", 401, None, None),
        ("submit", 401, None, None),
    ]
    limited = await served.one(outcome="rate_limited")
    assert (limited.action, limited.status, limited.tenant, limited.key_id) == (
        "submit",
        429,
        "tiny",
        key_id("key-tiny"),
    )


async def test_a_replay_run_is_audited_and_streamtts_audit_reads_the_trail(
    served: Served, kafka_settings: KafkaSettings, services: Services
) -> None:
    async with httpx.AsyncClient(base_url=served.url, timeout=30) as client:
        await submit(client)
    await served.gw.audit.flush()
    env = cli_env(kafka_settings, services.s3)

    async def cli(*args: str) -> tuple[int, str, str]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "streamtts.cli.main", *args, env=env, stdout=-1, stderr=-1
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode or 0, out.decode(), err.decode()

    code, out, _ = await cli("replay", "dlq", "--stage", "sink", "--tenant", "acme", "--dry-run")
    assert code == 0, out
    run = await served.one(action="replay_dlq")
    assert (run.source, run.outcome, run.tenant, run.details["dry_run"]) == ("replay", "ok", "acme", 1)
    assert run.details["stage"] == "sink" and "@" in (run.client or "")

    code, out, _ = await cli("audit", "--tenant", "acme", "--since", "10m", "--json")
    assert code == 0
    lines = [orjson.loads(line) for line in out.splitlines()]
    assert [e["action"] for e in lines] == ["submit", "replay_dlq"]
    code, out, _ = await cli("audit", "--since", "10m", "--action", "replay_dlq")
    assert code == 0 and out.splitlines()[-1] == "1 events since " + out.splitlines()[-1].split("since ")[1]
    assert " replay_dlq ok tenant=acme " in out.splitlines()[0]
    code, _, err = await cli("audit", "--since", "yesterday-ish")
    assert code == 2 and err.count("\n") == 1 and "not a time" in err
