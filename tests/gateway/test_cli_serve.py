"""`streamtts gateway` as an operator starts it: serves, answers with JSON logs, stops on SIGTERM."""

from __future__ import annotations

import asyncio
import signal
import socket
import sys

import httpx
import orjson
import websockets

from streamtts.runtime.settings import KafkaSettings
from tests.helpers import cli_env
from tests.services import Services


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def test_gateway_command_serves_and_stops(kafka_settings: KafkaSettings, services: Services) -> None:
    port = _free_port()
    env = cli_env(kafka_settings, services.s3, gateway_api_keys="k1:acme")
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "streamtts.cli.main",
        "gateway",
        "--port",
        str(port),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            async with asyncio.timeout(60):
                while True:  # probing the listener, as a load balancer does
                    try:
                        if (await client.get("/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        await asyncio.sleep(0.2)
            assert (
                await client.post("/v1/speech", json={"text": "hi"}, headers={"Authorization": "Bearer nope"})
            ).status_code == 401
            voices = (await client.get("/v1/voices")).json()["voices"]
            assert {"en_joe", "jm_kumo"} <= {v["voice_id"] for v in voices}
        # A plain `streamtts gateway` must accept WebSocket upgrades (uvicorn needs a WS library
        # from the base dependencies, see test_packaging): a whole, if empty, /v1/stream session.
        async with websockets.connect(
            f"ws://127.0.0.1:{port}/v1/stream", additional_headers={"Authorization": "Bearer k1"}
        ) as ws:
            session = orjson.loads(await asyncio.wait_for(ws.recv(), 10))
            assert session["type"] == "session" and session["session_id"]
            await ws.send(orjson.dumps({"type": "start", "voice": "en_joe", "format": "pcm"}).decode())
            await ws.send(orjson.dumps({"type": "end"}).decode())
            events = []
            async with asyncio.timeout(20):
                while not events or events[-1]["type"] != "done":
                    events.append(orjson.loads(await ws.recv()))
            assert events[0]["type"] == "configured" and events[-1] == {"type": "done", "sentences": 0}
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 30)
    # uvicorn shuts down gracefully, then re-raises the signal (exit by SIGTERM, as convention).
    assert proc.returncode in (0, -signal.SIGTERM)
    lines = [orjson.loads(line) for line in err.splitlines() if line.startswith(b"{")]
    assert any(e["event"] == "Application shutdown complete." for e in lines), "graceful shutdown"
    assert any(e["logger"] == "uvicorn.access" and "/v1/voices" in e["event"] for e in lines), (
        "JSON access log"
    )
