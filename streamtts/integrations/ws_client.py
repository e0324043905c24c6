"""A client of the gateway's `WS /v1/stream` for one reply: the protocol the framework plugins
speak (routes_stream.py documents it). Text goes in as it is written; audio, word timings and
the end come out as `Received` items. Depends on `websockets` only: the plugins import it,
the gateway never does."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import orjson
import websockets

from streamtts.schemas.utterance import DEFAULT_MAX_BUFFER_DELAY_MS

SAMPLE_RATE = 24_000
"""What the plugins ask for: pcm, 24 kHz s16le mono (the gateway's default for pcm)."""
DEFAULT_BASE_URL = "http://127.0.0.1:8080"
"""The gateway the plugins speak to when none is given (its default port, on this host)."""


@dataclass(frozen=True)
class Word:
    text: str
    start_s: float
    """From the reply's start (the turn is one utterance: times run over the whole reply)."""
    end_s: float
    trailing: str = ""


@dataclass(frozen=True)
class Received:
    """One thing the gateway sent: audio (pcm), words, or the reply's end (`done`, with the
    final event: `completed`, `cancelled` or an `error`)."""

    audio: bytes = b""
    words: tuple[Word, ...] = ()
    done: dict[str, Any] | None = None
    event: dict[str, Any] = field(default_factory=dict)


class ReplyError(RuntimeError):
    """The gateway refused the reply or failed it (its error event's code and message)."""

    def __init__(self, event: dict[str, Any]) -> None:
        self.code = str(event.get("code", "error"))
        super().__init__(f"{self.code}: {event.get('message', '')}")


@dataclass(frozen=True)
class ReplyTarget:
    """Where and how a plugin's replies are spoken: the gateway, its key and the voice."""

    base_url: str
    api_key: str
    voice: str = "auto"
    language: str = "auto"
    max_buffer_delay_ms: int = DEFAULT_MAX_BUFFER_DELAY_MS
    speed: float = 1.0

    def reply(self) -> StreamedReply:
        """A new reply (one WebSocket turn) to this gateway, with these options."""
        return StreamedReply(
            self.base_url,
            self.api_key,
            voice=self.voice,
            language=self.language,
            max_buffer_delay_ms=self.max_buffer_delay_ms,
            speed=self.speed,
        )


class StreamedReply:
    """`async with StreamedReply(url, key, voice=…) as reply:` then `await reply.text(t)` per
    token, `await reply.end()`, and `async for item in reply.received():`."""

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        voice: str = "auto",
        language: str = "auto",
        max_buffer_delay_ms: int = DEFAULT_MAX_BUFFER_DELAY_MS,
        timestamps: bool = True,
        speed: float = 1.0,
    ) -> None:
        scheme, rest = base_url.rstrip("/").split("://", 1)
        ws_scheme = "wss" if scheme == "https" else "ws"
        self.url = f"{ws_scheme}://{rest}/v1/stream?{urlencode({'api_key': api_key})}"
        self.start = {
            "type": "start",
            "voice": voice,
            "language": language,
            "format": "pcm",
            "speed": speed,
            "timestamps": timestamps,
            "max_buffer_delay_ms": max_buffer_delay_ms,
        }
        self.request_id: str | None = None
        self._ws: Any = None
        self._ended = False

    async def __aenter__(self) -> StreamedReply:
        self._ws = await websockets.connect(self.url, max_size=None)
        await self._send(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self._ws.close()

    async def _send(self, message: dict[str, Any]) -> None:
        await self._ws.send(orjson.dumps(message).decode())

    async def text(self, text: str) -> None:
        if text:
            await self._send({"type": "text", "text": text})

    async def flush(self) -> None:
        await self._send({"type": "flush"})

    async def end(self) -> None:
        """No more text: the rest is spoken, then the reply ends."""
        if not self._ended:
            self._ended = True
            await self._send({"type": "end"})

    async def cancel(self, played_ms: float | None = None) -> None:
        """Barge-in: the gateway stops the audio at once and cancels the request upstream."""
        message: dict[str, Any] = {"type": "cancel"}
        if played_ms is not None:
            message["played_ms"] = played_ms
        with contextlib.suppress(Exception):
            await self._send(message)

    async def received(self) -> AsyncIterator[Received]:
        """Audio, words and the end, in the order the gateway sent them."""
        final: dict[str, Any] | None = None
        async for frame in self._ws:
            if isinstance(frame, bytes):
                yield Received(audio=frame)
                continue
            event = orjson.loads(frame)
            kind = event.get("type")
            if kind == "started":
                self.request_id = event.get("request_id")
            elif kind == "words":
                words = tuple(
                    Word(w["text"], w["start_ms"] / 1000, w["end_ms"] / 1000, w.get("trailing", ""))
                    for w in event.get("words", [])
                )
                yield Received(words=words, event=event)
            elif kind == "completed":
                final = event
            elif kind == "cancelled":  # a barge-in ended the turn: the session goes on
                yield Received(done=event, event=event)
                return
            elif kind == "error":
                raise ReplyError(event)
            elif kind == "done":
                yield Received(done=final or event, event=event)
                return
