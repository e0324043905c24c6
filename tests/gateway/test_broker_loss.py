"""A gateway whose brokers vanish while sessions speak: every open WebSocket session ends with an
`kafka_unavailable` error event and close 1013 within its bound, and an HTTP request waiting for
its first audio gets 503 `kafka_unavailable` with Retry-After within it; new requests get 503 with
Retry-After (a new session the same event); after the brokers return, the same gateway process
serves again — a new session's speech comes back whole. The worker behind it says not ready
for the outage too. On a private broker, lost two ways: SIGKILLed (its connections refused at
once), or on a host of its own with the network between it and the gateway cut (connections
hang: nothing answers, nothing refuses) and then healed."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import replace

import httpx
import orjson
import pytest
import websockets

from streamtts.gateway.app import create_app
from streamtts.gateway.server import GatewayServer
from streamtts.gateway.settings import GatewaySettings
from streamtts.infra.local import net_faults
from streamtts.infra.local.net_faults import LinkRule
from streamtts.infra.local.net_hosts import Host, HostNet
from streamtts.infra.local.paths import LocalPaths
from streamtts.infra.local.stack import LocalStack
from streamtts.infra.topics import apply_topics
from streamtts.runtime.pipeline_settings import PipelineSettings
from streamtts.runtime.settings import KafkaSettings, S3Settings, Settings
from streamtts.worker import Worker
from tests.gateway.conftest import ACME
from tests.services import Services

pytestmark = [pytest.mark.integration, pytest.mark.model]

LOSS_S = 3.0
SESSIONS = 5
NET = HostNet(subnet="10.80.0", bridge="stsgbr0", ns_prefix="stsg-", veth_prefix="stsgv")
"""The partition variant's own net: its broker on a host, the gateway on this machine's."""


@pytest.fixture(params=["sigkill", "partition"])
def broker_fault(request: pytest.FixtureRequest, own_stack: LocalStack, tmp_path) -> tuple[str, LocalStack]:  # type: ignore[no-untyped-def]
    """The private broker and how it is lost: SIGKILLed, or cut off by the network."""
    if request.param == "sigkill":
        return "sigkill", own_stack
    if os.geteuid() != 0:
        pytest.skip("network namespaces need root (CI runs as root)")
    paths = LocalPaths(cache_dir=LocalPaths.from_env().cache_dir, state_dir=tmp_path / "hosts-stack")
    return "partition", LocalStack.on_hosts(
        Settings(kafka=KafkaSettings(), s3=S3Settings()), paths, brokers=1, net=NET
    )


CUT = "gateway_cut"


def _lose(fault: str, stack: LocalStack) -> None:
    if fault == "sigkill":
        os.kill(stack.kafka.pid() or 0, signal.SIGKILL)
    else:  # the broker's host stops hearing and answering this machine (gateway, worker)
        net_faults.apply(CUT, [LinkRule(Host("kafka-1", NET), (NET.gateway,))])


def _restore(fault: str, stack: LocalStack) -> None:
    if fault == "sigkill":
        stack.up(lambda _m: None, with_minio=False)
    else:
        net_faults.heal(CUT, [Host("kafka-1", NET)])


async def _until_ready(client: httpx.AsyncClient, ready: bool, timeout_s: float) -> dict:
    async with asyncio.timeout(timeout_s):
        while True:
            body = (await client.get("/readyz")).json()
            if body["ready"] is ready:
                return body
            await asyncio.sleep(0.2)  # a probe's period: readiness has no event outside


async def _until_submitted(client: httpx.AsyncClient, endpoint: str) -> None:
    """Until the gateway counts a request of `endpoint` as queued on Kafka."""
    needle = f'streamtts_gateway_submitted_total{{endpoint="{endpoint}"'
    async with asyncio.timeout(30):
        while needle not in (await client.get("/metrics")).text:  # noqa: ASYNC110 - a foreign count
            await asyncio.sleep(0.1)  # the gateway's own count: no event outside it


async def _open_session(ws_url: str) -> websockets.ClientConnection:
    ws = await websockets.connect(ws_url, max_size=None)
    assert orjson.loads(await ws.recv())["type"] == "session"
    await ws.send(
        orjson.dumps({"type": "start", "voice": "en_joe", "language": "en", "format": "pcm"}).decode()
    )
    await ws.send(orjson.dumps({"type": "text", "text": "An answer that is still being writ"}).decode())
    return ws


async def _ends_unavailable(ws: websockets.ClientConnection) -> tuple[float, int | None]:
    """Read until the session's last event: it must be the kafka_unavailable error, then a 1013 close."""
    last = None
    with pytest.raises(websockets.ConnectionClosed) as closed:
        while True:
            frame = await ws.recv()
            if isinstance(frame, str):
                last = orjson.loads(frame)
    assert last is not None and last["type"] == "error" and last["code"] == "kafka_unavailable", last
    ended = time.monotonic()
    return ended, closed.value.rcvd.code if closed.value.rcvd else None


async def test_the_gateway_rides_out_losing_every_broker(
    broker_fault: tuple[str, LocalStack],
    services: Services,
    speech_renderer,
    pipeline_settings: PipelineSettings,
    gateway_settings: GatewaySettings,
) -> None:
    fault, own_stack = broker_fault
    await asyncio.to_thread(own_stack.up, lambda _m: None, with_minio=False)
    kafka = KafkaSettings(bootstrap_servers=own_stack.kafka.bootstrap, topic_prefix="g.")
    try:
        await apply_topics(kafka)
        settings = Settings(kafka=kafka, s3=services.s3)
        # Only the sink at first: a request waits for audio that cannot come before the kill.
        worker = Worker(["sink"], settings, pipeline_settings)
        await worker.start()
        speech: Worker | None = None
        server = GatewayServer(create_app(replace(gateway_settings, broker_loss_s=LOSS_S), settings))
        await server.start()
        try:
            ws_url = server.url.replace("http", "ws", 1) + "/v1/stream?api_key=key-acme"
            async with httpx.AsyncClient(base_url=server.url, timeout=30) as client:
                await _until_ready(client, True, 30)
                sessions = [await _open_session(ws_url) for _ in range(SESSIONS)]
                # An HTTP request queued, its response waiting for a first chunk.
                waiting = asyncio.create_task(
                    client.post(
                        "/v1/audio/speech",
                        json={"model": "tts-1", "input": "Are you still there?", "voice": "alloy"},
                        headers=ACME,
                    )
                )
                await _until_submitted(client, "openai")

                await asyncio.to_thread(_lose, fault, own_stack)
                killed = time.monotonic()
                ends = await asyncio.wait_for(asyncio.gather(*(_ends_unavailable(ws) for ws in sessions)), 60)
                answer = await asyncio.wait_for(waiting, 60)
                answered = time.monotonic()
                assert answer.status_code == 503 and answer.json()["error"]["code"] == "kafka_unavailable"
                assert int(answer.headers["retry-after"]) >= 1
                assert answered - killed <= LOSS_S + 3.0 + 4.0, answered - killed
                # Bound: the loss bound, plus one probe's timeout and period, plus slack for a busy machine.
                assert all(at - killed <= LOSS_S + 3.0 + 4.0 for at, _ in ends), [
                    at - killed for at, _ in ends
                ]
                assert all(code == 1013 for _, code in ends), ends

                refused = await client.post(
                    "/v1/speech",
                    json={"text": "Hello there.", "voice": "en_joe", "format": "mp3"},
                    headers=ACME,
                )
                assert refused.status_code == 503 and refused.json()["error"]["code"] == "kafka_unavailable"
                assert int(refused.headers["retry-after"]) >= 1
                async with websockets.connect(ws_url) as late:
                    assert orjson.loads(await late.recv())["code"] == "kafka_unavailable"
                    with pytest.raises(websockets.ConnectionClosed) as closed:
                        await late.recv()
                    assert closed.value.rcvd is not None and closed.value.rcvd.code == 1013
                problems = (await _until_ready(client, False, 5))["problems"]
                assert any(p.startswith("no Kafka broker reachable") for p in problems), problems
                async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{worker.ops_port}") as ops:
                    worker_problems = (await _until_ready(ops, False, 10))["problems"]
                assert any(p.startswith("no Kafka broker reachable") for p in worker_problems), (
                    worker_problems
                )

                await asyncio.to_thread(_restore, fault, own_stack)
                await _until_ready(client, True, 60)
                speech = Worker(
                    ["segment", "synthesize", "encode"], settings, pipeline_settings, renderer=speech_renderer
                )
                await speech.start()
                audio = bytearray()
                async with asyncio.timeout(120), websockets.connect(ws_url, max_size=None) as ws:
                    start = {"type": "start", "voice": "en_joe", "language": "en", "format": "pcm"}
                    await ws.send(orjson.dumps(start).decode())
                    await ws.send(
                        orjson.dumps({"type": "text", "text": "The line is back. Thanks."}).decode()
                    )
                    await ws.send(orjson.dumps({"type": "end"}).decode())
                    while True:
                        frame = await ws.recv()
                        if isinstance(frame, bytes):
                            audio += frame
                            continue
                        event = orjson.loads(frame)
                        assert event["type"] != "error", event
                        if event["type"] == "done":
                            break
                assert len(audio) > 24_000 * 2 * 0.5, "at least half a second of 24 kHz s16 speech"
        finally:
            await server.stop()
            if speech is not None:
                await speech.stop()
            await worker.stop()
    finally:
        await asyncio.to_thread(own_stack.down, lambda _m: None)
