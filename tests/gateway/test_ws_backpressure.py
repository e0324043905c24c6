"""WebSocket back-pressure: a client that stops reading is disconnected, not buffered forever.

No pipeline: the test plays the encode stage and publishes the audio chunks itself, large
enough to fill the socket, so the gateway's bounded outbound queue fills and stays full. The
client is a raw socket driven by websockets' sans-I/O protocol: a client library would keep
reading into its own buffers, and this one must really stop.
"""

from __future__ import annotations

import asyncio
import socket
from collections import deque
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from urllib.parse import urlsplit

import httpx
import orjson
import pytest
from websockets.client import ClientProtocol
from websockets.frames import Frame, Opcode
from websockets.http11 import Response
from websockets.uri import parse_uri

from streamtts.gateway.settings import GatewaySettings
from streamtts.runtime.kafka import make_producer
from streamtts.runtime.settings import KafkaSettings
from streamtts.runtime.topics import TopicNames
from streamtts.schemas import AudioChunk
from tests.helpers import metric

pytestmark = pytest.mark.integration

CHUNKS = 24
CHUNK_BYTES = 512 * 1024  # 12 MB in all: far more than the sockets between us and the gateway hold


@pytest.fixture
def gateway_settings(gateway_settings: GatewaySettings) -> GatewaySettings:
    return replace(gateway_settings, ws_queue_frames=2, ws_send_timeout_s=1.0)


class RawClient:
    """A WebSocket client that reads only when told to."""

    def __init__(self, url: str) -> None:
        split = urlsplit(url)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # Set before connecting, so the kernel does not autotune it: the client side stays small.
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * 1024)
        self.sock.setblocking(False)
        self.address = (split.hostname, split.port)
        self.proto = ClientProtocol(parse_uri(url), max_size=None)
        self.events: deque[object] = deque()  # parsed, not yet consumed
        self.loop = asyncio.get_running_loop()

    async def connect(self) -> None:
        await self.loop.sock_connect(self.sock, self.address)
        self.proto.send_request(self.proto.connect())
        await self._flush()
        async for event in self._events():
            assert isinstance(event, Response) and event.status_code == 101, event
            return

    async def send_text(self, text: str) -> None:
        self.proto.send_text(text.encode())
        await self._flush()

    async def json_event(self, kind: str) -> dict:
        async for frame in self._events():
            if isinstance(frame, Frame) and frame.opcode is Opcode.TEXT:
                event = orjson.loads(frame.data)
                if event["type"] == kind:
                    return event
        raise AssertionError(f"connection ended before a {kind!r} event")

    async def drain(self) -> tuple[int, int | None]:
        """Read to the end: (binary frames received, close code or None if none came)."""
        frames, code = 0, None
        async for frame in self._events():
            if isinstance(frame, Frame) and frame.opcode is Opcode.BINARY:
                frames += 1
            elif isinstance(frame, Frame) and frame.opcode is Opcode.CLOSE:
                code = int.from_bytes(frame.data[:2], "big")
        return frames, code

    async def _events(self) -> AsyncIterator[object]:
        while True:
            self.events.extend(self.proto.events_received())
            while self.events:
                yield self.events.popleft()
            data = await self.loop.sock_recv(self.sock, 65536)
            if not data:
                return
            self.proto.receive_data(data)
            await self._flush()  # pongs and the close handshake

    async def _flush(self) -> None:
        for data in self.proto.data_to_send():
            if data:
                await self.loop.sock_sendall(self.sock, data)

    def close(self) -> None:
        self.sock.close()


async def _metric(http: httpx.AsyncClient, sample: str, **labels: str) -> float:
    return metric((await http.get("/metrics")).text, sample, **labels)


def _chunks(request_id: str) -> Iterator[AudioChunk]:
    for part in range(CHUNKS):
        end = part == CHUNKS - 1
        yield AudioChunk(
            request_id=request_id,
            tenant="acme",
            seq=0,
            total=1,
            part=part,
            last_part=end,
            last=end,
            format="pcm",
            sample_rate=24000,
            audio=bytes(CHUNK_BYTES),
            duration_ms=CHUNK_BYTES / 2 / 24000 * 1000,
            created_at=datetime.now(UTC),
            encoded_at=datetime.now(UTC),
        )


async def test_a_client_that_stops_reading_is_disconnected_and_its_slot_freed(
    gateway_url: str, kafka_settings: KafkaSettings, topics: TopicNames
) -> None:
    url = gateway_url.replace("http://", "ws://") + "/v1/stream?api_key=key-acme"
    async with asyncio.timeout(90), httpx.AsyncClient(base_url=gateway_url) as http:
        client = RawClient(url)
        try:
            await client.connect()
            await client.send_text(
                orjson.dumps({"type": "start", "voice": "en_joe", "format": "pcm"}).decode()
            )
            await client.send_text("Hello there. ")
            request_id = (await client.json_event("started"))["request_id"]

            producer = make_producer(kafka_settings)
            await producer.start()
            try:
                for chunk in _chunks(request_id):
                    await producer.send_and_wait(
                        topics.audio, key=request_id.encode(), value=chunk.to_bytes()
                    )
            finally:
                await producer.stop()

            # The client reads nothing now. The only outside sign of the gateway giving up is
            # its counter, so poll it (bounded by the timeout above).
            while await _metric(http, "streamtts_gateway_ws_closed_total", reason="slow_reader") < 1:  # noqa: ASYNC110
                await asyncio.sleep(0.1)

            received, code = await client.drain()
        finally:
            client.close()
        assert received < CHUNKS, "the stalled client was still sent everything"
        assert code == 1008
        assert await _metric(http, "streamtts_gateway_ws_sessions") == 0

        # A client that keeps reading gets a session (its slot was freed).
        again = RawClient(url)
        try:
            await again.connect()
            assert (await again.json_event("session"))["session_id"]
        finally:
            again.close()
