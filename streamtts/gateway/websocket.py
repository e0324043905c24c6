"""`WS /v1/stream`: text in (whole or sentence by sentence, as an LLM writes it), audio out.

Each complete sentence becomes its own request (`<session>-<n>`, session id in metadata),
submitted as soon as it is complete, so synthesis of sentence n+1 overlaps playback of n;
audio is forwarded strictly in sentence order. Protocol (client → server, text frames):

    {"type": "start", "voice": "en_joe", "language": "en", "format": "pcm", "speed": 1.0, "store": false}
    {"type": "text", "text": "Hello there. How are"}     (or a plain, non-JSON text frame)
    {"type": "flush"}      submit what is buffered even without a sentence end
    {"type": "end"}        flush, deliver the remaining audio, then close
    {"type": "cancel", "played_ms": 1200}   barge-in: drop every frame not yet written and
                           every sentence queued, finished or not; `played_ms` is the client's
                           playback position on the session clock (see `cancelled`)

Telephony framing: `"frame_ms": 20` in start (pcm, mulaw, alaw) sends the audio as frames of
exactly 20 ms instead of one per chunk (no `chunk` events; each sentence's last frame padded
with silence), `"pace": "realtime"` one frame per 20 ms, `"frames": "media"` as base64 JSON
`{"event": "media", "media": {"payload": …}}` in the shape telephony media streams use.

Server → client: JSON events `session`, `started`, `chunk` (followed by one binary frame with
the chunk's audio: raw s16le for pcm, a complete file per chunk for wav/mp3/opus/flac),
`cancelled` (after a cancel: `position_ms`, the session audio written when it stopped, and
what was heard: `spoken_ms`, `words_spoken` on the session clock, per request in `requests`;
in media mode a `{"event": "clear"}` comes first, as media streams expect before new audio;
the session then takes the next reply at once),
`words` (with `"timestamps": true` in start, before each `chunk`: its words, times from the
sentence start; `session_offset_ms` places the sentence in the session), `marks` (SSML
`<mark>`s the chunk reaches, timed the same way; `"text_type": "ssml"` in start makes each
`text` message one document), `degraded`,
`completed`, `error`, `done`. Back-pressure: outbound frames go through a bounded
queue; when the client reads slowly the queue fills and the session stops pulling audio (the
chunks wait in the shared cache); a client that reads nothing for `ws_send_timeout_s` while
the queue is full is disconnected (close code 1008).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Literal, Self

import orjson
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamtts.gateway.audit_trail import audit_context
from streamtts.gateway.delivery import Delivery, words_heard
from streamtts.gateway.errors import ApiError
from streamtts.gateway.fanout import RequestState, StreamFailed, StreamIncomplete
from streamtts.gateway.framing import (
    FRAME_MS_CHOICES,
    Framer,
    Pacer,
    frameable,
    frameable_choices,
    media_event,
)
from streamtts.gateway.http import authenticate, gateway
from streamtts.gateway.service import Gateway, SpeechOptions
from streamtts.schemas.languages import CLOSED_STOPS, SPACED_STOPS
from streamtts.schemas.request import AudioFormat, Language

# A sentence ends at a spaced stop (. ! ? …) followed by whitespace (so "3.5" and a
# half-written "Mr." at the end of a fragment wait for more text), or at a stop that needs no
# space: the CJK full stops and every language's own (। ؟ ։ ።, from the language table), and
# the CJK semicolon (a streamed reply is spoken sooner). Linear: a boundary is tried only where
# a run of stops begins (any later start in the run ends the same way) and nothing
# backtracks, so "."*5000 is one pass, not one per position.
_STOPS = SPACED_STOPS
_CLOSERS = "\"'”’)]"
_SPACED = re.escape(SPACED_STOPS)
_CLOSED = re.escape(CLOSED_STOPS + "；")
_BOUNDARY = re.compile(rf"(?<![{_SPACED}])[{_SPACED}]++[\"'”’)\]]*+\s+|[{_CLOSED}]++[”’」』）]*+")
# A new boundary ends in new text with one of these (see `split_new_sentences`).
_BOUNDARY_END = re.compile(rf"[\s{_CLOSED}]")
_CLOSE = object()
log = logging.getLogger("streamtts.gateway.websocket")


class StartMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    voice: str = Field(default="auto", min_length=1, max_length=200)
    language: Language = "auto"
    format: AudioFormat = "pcm"
    speed: float = Field(default=1.0, ge=0.5, le=2.0)
    store: bool = False
    timestamps: bool = False
    """A `words` event before each chunk's audio frame."""
    text_type: Literal["text", "ssml"] | None = None
    """"ssml": each `text` message is one whole SSML document (not split into sentences);
    its marks arrive as `marks` events."""
    deadline_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    """Each sentence's first audio wanted within this many ms: a sentence the synthesize
    workers cannot serve in time gets an `error` event `overloaded` instead of late audio."""
    frame_ms: int | None = None
    """Telephony framing (pcm, mulaw, alaw): audio as frames of exactly this length instead
    of one frame per chunk (no `chunk` events then)."""
    pace: Literal["fast", "realtime"] = "fast"
    """With frame_ms: send frames as fast as made, or one per frame_ms (real time)."""
    frames: Literal["binary", "media"] = "binary"
    """With frame_ms: binary frames, or base64 JSON in the media-stream shape
    (`{"event": "media", "media": {"payload": …}}`)."""

    @model_validator(mode="after")
    def _framing(self) -> Self:
        if self.frame_ms is not None:
            if self.format not in frameable():
                raise ValueError(f"frame_ms needs format {frameable_choices()}, not {self.format}")
            if self.frame_ms not in FRAME_MS_CHOICES:
                raise ValueError(f"frame_ms must be one of {', '.join(map(str, FRAME_MS_CHOICES))}")
        return self


def split_sentences(buffer: str, scan_from: int = 0) -> tuple[list[str], str]:
    """Complete sentences at the start of `buffer`, and the unfinished rest.

    `scan_from`: no boundary begins before it (what an earlier call already scanned)."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(buffer, scan_from):
        sentence = buffer[start : m.end()].strip()
        if sentence:
            out.append(sentence)
        start = m.end()
    return out, buffer[start:]


def split_new_sentences(buffer: str, new_from: int, pending: int) -> tuple[list[str], str, int]:
    """`split_sentences` of a buffer whose text before `new_from` was split already,
    looking only at the new text and the unfinished end of sentence before it.

    Args:
        buffer: the unfinished rest of the last call, then the new text.
        new_from: where the new text begins.
        pending: where the last call's unfinished end of sentence (stops and closers waiting
            for their space) begins, or `new_from` when there is none.
    Returns:
        The completed sentences, the unfinished rest, and where its pending end of sentence
        begins (the next call's `pending`).
    """
    sentences: list[str] = []
    rest, start = buffer, new_from
    if _BOUNDARY_END.search(buffer, new_from):  # otherwise nothing new can end a sentence
        sentences, rest = split_sentences(buffer, pending)
        if sentences:  # what is left lies in the new text
            start, pending = 0, 0
    return sentences, rest, _pending_stop(rest, start, pending)


def _pending_stop(text: str, new_from: int, pending: int) -> int:
    """Where the trailing stops-then-closers of `text` begin (len(text): none), reading only
    text[new_from:]; `pending` is that place in text[:new_from]."""
    end = i = len(text)
    while i > new_from and text[i - 1] in _CLOSERS:
        i -= 1
    j = i
    while j > new_from and text[j - 1] in _STOPS:
        j -= 1
    if j > new_from:  # the run starts in the new text (or there is none)
        return j if j < i else end
    if j < i:  # the new text opens with stops: they continue a run of stops before them
        return pending if new_from and text[new_from - 1] in _STOPS else new_from
    return pending if pending < new_from else end  # only closers (or nothing) were added


class SlowConsumer(Exception):
    pass


# Session-level events a cancel keeps in the outbound queue; a sentence's frames and events
# (audio, chunk, words, marks, degraded, completed) go as `_Queued` and a cancel drops them.
@dataclass(frozen=True)
class _Queued:
    """A frame of one sentence in the outbound queue, with the audio it carries."""

    payload: bytes | str
    delivery: Delivery
    audio_ms: float = 0.0
    ends: bool = False
    """The sentence's last frame: once written, all of it is on the wire."""


@dataclass
class Session:
    ws: WebSocket
    gw: Gateway
    tenant: str
    session_id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    config: StartMessage = field(default_factory=StartMessage)
    buffer: str = ""
    stop_at: int = 0
    """Where `buffer`'s unfinished end of sentence begins (see `split_new_sentences`)."""
    count: int = 0
    pending: int = 0
    """Sentences submitted whose audio is not fully forwarded yet."""
    out: asyncio.Queue[Any] = field(init=False)
    sentences: asyncio.Queue[RequestState | None] = field(default_factory=asyncio.Queue)
    submitted: list[RequestState] = field(default_factory=list)
    """Every sentence request of the session (a cancel stops those not finished)."""
    sent_bytes: int = 0
    """Bytes of every frame sent to the client (the audit event's `bytes`)."""
    close_reason: str = "error"
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    """Per sentence request: the audio written of it (registered at submission)."""
    starts_ms: dict[str, float] = field(default_factory=dict)
    """Per sentence request: where its first written frame sits on the session clock."""
    written_ms: float = 0.0
    """The session clock: audio written to the socket (what the client can have heard)."""
    written_frames: int = 0
    queued_ms: float = 0.0
    """Audio handed to the outbound queue (the clock of `session_offset_ms`)."""
    queued_frames: int = 0
    pacer: Pacer | None = None
    _current: asyncio.Task[None] | None = field(default=None, init=False)
    _cancelling: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _background: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        self.out = asyncio.Queue(maxsize=self.gw.settings.ws_queue_frames)

    async def run(self) -> None:
        await self._event(
            {"type": "session", "session_id": self.session_id, "queue_frames": self.out.maxsize}
        )
        sender = asyncio.create_task(self._send_loop())
        forwarder = asyncio.create_task(self._forward_loop())
        receiver = asyncio.create_task(self._receive_loop())
        # No broker for `broker_loss_s`: nothing this session waits for can come; say so.
        outage = asyncio.create_task(self.gw.broker.lost_for(self.gw.settings.broker_loss_s))
        self._background.add(outage)
        tasks: tuple[asyncio.Task[Any], ...] = (sender, forwarder, receiver)
        reason = "error"
        try:
            await asyncio.wait((*tasks, outage), return_when=asyncio.FIRST_COMPLETED)
            if outage.done() and not receiver.done():
                reason = "kafka_unavailable"
                await self._end_unavailable(forwarder, receiver, sender)
            elif receiver.done() and not receiver.cancelled() and receiver.exception() is None:
                outcome = reason = receiver.result()
                if outcome == "end":  # deliver the remaining audio, then say done
                    await forwarder
                    await self._event({"type": "done", "sentences": self.count})
                if outcome != "disconnect":
                    await self.out.put(_CLOSE)
                    async with asyncio.timeout(self.gw.settings.ws_send_timeout_s):
                        await sender
        except SlowConsumer:
            pass
        finally:
            for task in (*tasks, *self._background):
                task.cancel()
            await asyncio.gather(*self._background, return_exceptions=True)
            results = await asyncio.gather(*tasks, return_exceptions=True)
            slow = any(isinstance(r, SlowConsumer) for r in results)
            for task, r in zip(tasks, results, strict=True):
                if isinstance(r, Exception) and not isinstance(r, (SlowConsumer, WebSocketDisconnect)):
                    log.warning("session %s: %s failed: %r", self.session_id, task.get_name(), r)
            self.close_reason = "slow_reader" if slow else reason
            self.gw.metrics.ws_closed.labels(self.close_reason).inc()
            if self.ws.application_state == WebSocketState.CONNECTED:
                # Bounded: with a stalled reader the close frame waits behind a full socket.
                with contextlib.suppress(Exception):
                    async with asyncio.timeout(self.gw.settings.ws_send_timeout_s):
                        code, why = (1008, "client reads too slowly") if slow else (1000, None)
                        if reason == "kafka_unavailable" and not slow:
                            code, why = 1013, "Kafka unavailable"  # try again later
                        await self.ws.close(code, why)

    async def _end_unavailable(self, *tasks: asyncio.Task[Any]) -> None:
        """End the session for a broker outage: stop reading and forwarding, then the error
        event and the close after whatever is already queued (bounded like any send)."""
        forwarder, receiver, sender = tasks
        for task in (forwarder, receiver):
            task.cancel()
        await asyncio.gather(forwarder, receiver, return_exceptions=True)
        down = self.gw.broker.down_for
        # A reader too slow to take even this is closed anyway (by `run`, bounded).
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.gw.settings.ws_send_timeout_s):
                await self._error(
                    "kafka_unavailable",
                    f"no Kafka broker has answered for {down:.0f} s: this session's speech cannot "
                    "be served; reconnect later",
                    pending=self.pending,
                )
                await self.out.put(_CLOSE)
                await sender

    async def _receive_loop(self) -> str:
        """Read client frames until "end", "disconnect" or "idle" (timeout).

        Only frames that carry text keep a session alive: an empty `flush` every few seconds
        would otherwise hold a slot forever."""
        idle = self.gw.settings.ws_idle_timeout_s
        loop = asyncio.get_running_loop()
        deadline = loop.time() + idle
        while True:
            try:
                async with asyncio.timeout_at(deadline):
                    msg = await self.ws.receive()
            except TimeoutError:
                if self.pending:
                    deadline = loop.time() + idle
                    continue  # audio still flowing: the session is not idle
                await self._error("idle_timeout", f"no input for {idle:g} s")
                return "idle"
            if msg["type"] == "websocket.disconnect":
                return "disconnect"
            text = msg.get("text")
            if text is None:
                await self._error("invalid_message", "send text frames (JSON commands or plain text)")
                continue
            before = (self.count, len(self.buffer.strip()))
            try:
                if await self._handle(text):
                    return "end"
            except ApiError as err:
                await self._error(err.code, err.message)
            if (self.count, len(self.buffer.strip())) != before:
                deadline = loop.time() + idle

    async def _handle(self, text: str) -> bool:
        if not text.lstrip().startswith("{"):
            await self._add_text(text, flush=False)
            return False
        try:
            cmd = orjson.loads(text)
        except orjson.JSONDecodeError:
            raise ApiError(400, "invalid_json", "a frame starting with '{' must be a JSON command") from None
        kind = cmd.get("type") if isinstance(cmd, dict) else None
        if kind == "start":
            if self.count:
                raise ApiError(400, "invalid_message", "start must come before any text")
            try:
                self.config = StartMessage.model_validate(cmd)
            except ValidationError as err:
                first = err.errors(include_url=False)[0]
                raise ApiError(400, "invalid_request", f"{first.get('loc')}: {first.get('msg')}") from None
            self.gw.voices.check(self.config.voice)
            await self._event({"type": "configured", **self.config.model_dump()})
        elif kind == "text":
            await self._add_text(str(cmd.get("text", "")), flush=bool(cmd.get("flush", False)))
        elif kind == "flush":
            await self._add_text("", flush=True)
        elif kind == "cancel":
            await self._cancel(cmd.get("played_ms"))
        elif kind == "end":
            await self._add_text("", flush=True)
            await self.sentences.put(None)
            return True
        else:
            raise ApiError(400, "invalid_message", f"unknown command type {kind!r}")
        return False

    async def _add_text(self, text: str, *, flush: bool) -> None:
        if self.config.text_type == "ssml":  # a document is spoken whole, never split
            if text.strip():
                await self._submit(text)
            return
        new_from = len(self.buffer)
        self.buffer += text
        if len(self.buffer) > self.gw.settings.max_text_chars:
            self.buffer, self.stop_at = "", 0
            raise ApiError(
                413, "text_too_long", f"unfinished sentence over {self.gw.settings.max_text_chars} characters"
            )
        # Only the new text is split (re-splitting the whole buffer per frame was quadratic).
        sentences, self.buffer, self.stop_at = split_new_sentences(self.buffer, new_from, self.stop_at)
        if flush and self.buffer.strip():
            sentences.append(self.buffer.strip())
            self.buffer, self.stop_at = "", 0
        for sentence in sentences:
            await self._submit(sentence)

    async def _cancel(self, played_ms: object) -> None:
        """Barge-in: the line goes silent at once, and the session takes the next reply."""
        if played_ms is not None and (
            isinstance(played_ms, bool)
            or not isinstance(played_ms, int | float)
            or not math.isfinite(played_ms)
            or played_ms < 0
        ):
            raise ApiError(400, "invalid_message", "played_ms must be a finite number of milliseconds ≥ 0")
        self.buffer, self.stop_at = "", 0
        await self._barge_in(None if played_ms is None else float(played_ms))

    def _cancelled_elsewhere(self) -> None:
        """A cancel of one of this session's sentences from outside (DELETE, `tts.control`):
        the session stops as for its own `cancel`."""
        task = asyncio.create_task(self._barge_in(None), name=f"ws-cancel-{self.session_id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _barge_in(self, played_ms: float | None) -> None:
        async with self._cancelling:
            # 0. The sentences it cuts: those not wholly written yet (taken before any await,
            #    so a reply sent meanwhile is not among them).
            cut = [s for s in self.submitted if self.deliveries[s.request_id].live]
            # 1. Stop making audio: every sentence queued (first, so the forwarder cannot
            #    take the next one when the current one stops), then the one being forwarded.
            while not self.sentences.empty():
                if self.sentences.get_nowait() is None:  # paranoid: `end` comes after cancel
                    self.sentences.put_nowait(None)
                    break
            while (current := self._current) is not None and not current.done():
                current.cancel()
                await asyncio.wait({current})
            self.pending = 0
            # 2. Drop every sentence frame not yet written; session events stay, in order.
            kept = []
            while not self.out.empty():
                item = self.out.get_nowait()
                if not isinstance(item, _Queued):
                    kept.append(item)
            for item in kept:
                self.out.put_nowait(item)
            # 3. Where it stopped: what the socket got (a frame being written counts), or the
            #    client's playback position if less.
            position = self.written_ms
            heard_at = position if played_ms is None else min(played_ms, position)
            # 4. Each unfinished sentence: what of it was heard; the pipeline and the result
            #    are told that (`Gateway.cancel`), whether the pipeline had finished it or not.
            requests: list[dict[str, Any]] = []
            words_spoken: list[dict[str, Any]] = []
            heard: list[float] = []
            for state in cut:
                delivery = self.deliveries[state.request_id]
                delivery.on_stop = None  # this session stops it now; no second barge-in
                start = self.starts_ms.get(state.request_id)
                heard.append(0.0 if start is None else max(0.0, min(delivery.sent_ms, heard_at - start)))
            told = await asyncio.gather(*(self.gw.cancel(s, ms) for s, ms in zip(cut, heard, strict=True)))
            stopped = [s.request_id for s, yes in zip(cut, told, strict=True) if yes]
            for state, spoken in zip(cut, heard, strict=True):
                start = self.starts_ms.get(state.request_id)
                words = words_heard(state.chunks, spoken) if spoken > 0 else None
                if words is None and self.config.timestamps:
                    words = []
                entry: dict[str, Any] = {
                    "request_id": state.request_id,
                    "index": int(state.request_id.rsplit("-", 1)[1]),
                    "spoken_ms": round(spoken, 1),
                }
                if words is not None:
                    entry["words_spoken"] = [w.model_dump() for w in words]
                    words_spoken += [
                        {
                            **w.model_dump(),
                            "start_ms": round(w.start_ms + (start or 0.0), 1),
                            "end_ms": round(w.end_ms + (start or 0.0), 1),
                        }
                        for w in words
                    ]
                requests.append(entry)
            # 5. The session clock goes on from what was written: the next reply starts at once.
            self.queued_ms, self.queued_frames, self.pacer = position, self.written_frames, None
            if self.config.frames == "media":
                await self._event({"event": "clear", "streamSid": self.session_id})
            event: dict[str, Any] = {
                "type": "cancelled",
                "request_ids": stopped,
                "position_ms": round(position, 1),
                "spoken_ms": round(sum(r["spoken_ms"] for r in requests), 1),
                "requests": requests,
            }
            if self.config.timestamps:
                event["words_spoken"] = words_spoken
            await self._event(event)

    async def _submit(self, sentence: str) -> None:
        index = self.count
        rid = f"{self.session_id}-{index}"
        opts = SpeechOptions(
            text=sentence,
            voice=self.config.voice,
            language=self.config.language,
            format=self.config.format,
            speed=self.config.speed,
            storage=self.config.store,
            presign=False,
            metadata={"session_id": self.session_id, "sentence": str(index)},
            timestamps=self.config.timestamps,
            text_type=self.config.text_type,
            deadline_ms=self.config.deadline_ms,
        )
        try:
            state = await self.gw.submit(self.tenant, opts, endpoint="ws", request_id=rid)
            self.deliveries[rid] = state.deliver(Delivery(rid, on_stop=self._cancelled_elsewhere))
        except ApiError as err:
            self._audit_submit(rid, err.code)
            await self._error(err.code, err.message, request_id=rid, index=index)
            return
        self._audit_submit(rid, "ok")
        self.count += 1
        self.pending += 1
        live = [s for s in self.submitted if self.deliveries[s.request_id].live]
        for gone in {s.request_id for s in self.submitted} - {s.request_id for s in live}:
            self.deliveries.pop(gone, None)
            self.starts_ms.pop(gone, None)
        self.submitted = [*live, state]
        await self._event({"type": "started", "request_id": rid, "index": index, "text": sentence})
        await self.sentences.put(state)

    def _audit_submit(self, rid: str, outcome: str) -> None:
        """Each sentence is a request of its own: audited as a submit, like one over HTTP."""
        ctx = audit_context(self.ws)
        event = ctx.event("submit", status=None, outcome=outcome, sent=0)
        self.gw.audit.record(
            event.model_copy(
                update={"request_id": rid, "details": {"via": "ws", "session_id": self.session_id}}
            )
        )

    async def _forward_loop(self) -> None:
        """Forward the sentences in order, each in a task of its own that a cancel can stop."""
        try:
            while (state := await self.sentences.get()) is not None:
                self._current = asyncio.create_task(self._forward(state), name=f"ws-{state.request_id}")
                await asyncio.wait({self._current})
                if not self._current.cancelled() and (err := self._current.exception()) is not None:
                    raise err
                self._current = None
        finally:
            if self._current is not None:
                self._current.cancel()

    async def _forward(self, state: RequestState) -> None:
        timeout = self.gw.settings.request_timeout_s
        # `start` comes before any text, so the configuration is final by now.
        framing = self.config.frame_ms is not None
        if self.pacer is None:  # new after a cancel: the next reply is not held back
            self.pacer = Pacer(self.config.frame_ms or 20, self.config.pace == "realtime")
        pacer = self.pacer
        delivery = self.deliveries[state.request_id]
        index = int(state.request_id.rsplit("-", 1)[1])
        base = {"request_id": state.request_id, "index": index}
        session_ms, frames_before = self.queued_ms, self.queued_frames
        sentence_ms = 0.0
        framer: Framer | None = None
        put = functools.partial(self._put_frame, delivery)
        try:
            async for chunk in state.chunks_in_order(timeout, delivery):
                if chunk.cancelled:  # a marker: no audio to send (see `completed`)
                    continue
                if chunk.seq == 0 and chunk.part == 0 and state.first_chunk_at is not None:
                    self.gw.metrics.ttfa.labels("ws").observe(state.first_chunk_at - state.submitted_at)
                if chunk.degradation is not None:
                    await put(
                        {
                            "type": "degraded",
                            **base,
                            "degradation": chunk.degradation.model_dump(mode="json"),
                        }
                    )
                if chunk.words is not None:
                    # Times from the sentence's start: the chunk's place in what this
                    # session received (`session_offset_ms` + `offset_ms`) is exact.
                    shift = sentence_ms - (chunk.offset_ms or 0.0)
                    await put(
                        {
                            "type": "words",
                            **base,
                            "seq": chunk.seq,
                            "part": chunk.part,
                            "offset_ms": round(sentence_ms, 1),
                            "session_offset_ms": round(session_ms, 1),
                            "words": [
                                {
                                    **w.model_dump(),
                                    "start_ms": round(w.start_ms + shift, 1),
                                    "end_ms": round(w.end_ms + shift, 1),
                                }
                                for w in chunk.words
                            ],
                        }
                    )
                if chunk.marks:
                    shift = sentence_ms - (chunk.offset_ms or 0.0)
                    await put(
                        {
                            "type": "marks",
                            **base,
                            "seq": chunk.seq,
                            "part": chunk.part,
                            "session_offset_ms": round(session_ms, 1),
                            "marks": [
                                {"name": m.name, "time_ms": round(m.time_ms + shift, 1)} for m in chunk.marks
                            ],
                        }
                    )
                sentence_ms += chunk.duration_ms
                if framing:  # fixed frames instead of one frame per chunk
                    if framer is None:
                        framer = Framer(chunk.format, chunk.sample_rate, self.config.frame_ms or 20)
                    await self._send_frames(delivery, framer.push(chunk.audio), pacer)
                    continue
                await put(
                    {
                        "type": "chunk",
                        **base,
                        "seq": chunk.seq,
                        "part": chunk.part,
                        "last": chunk.last,
                        "format": chunk.format,
                        "sample_rate": chunk.sample_rate,
                        "duration_ms": round(chunk.duration_ms, 1),
                        "bytes": len(chunk.audio),
                    }
                )
                await put(chunk.audio, chunk.duration_ms)
                self.gw.metrics.ws_frames.inc()
                self.gw.metrics.audio_bytes.labels("ws").inc(len(chunk.audio))
            if delivery.stopped:
                return  # cancelled from elsewhere: the session's barge-in drops the rest
            if framer is not None:  # the sentence's last partial frame, padded
                await self._send_frames(delivery, framer.flush(), pacer)
            await put(
                {
                    "type": "completed",
                    **base,
                    "duration_ms": round(state.audio_ms, 1),
                    "chunks": len([c for c in state.chunks if not c.cancelled]),
                    "cancelled": any(c.cancelled for c in state.chunks),
                },
                ends=True,
            )
        except (StreamFailed, StreamIncomplete) as err:
            await put({"type": "error", **base, "code": "request_failed", "message": str(err)}, ends=True)
        except TimeoutError:
            await put({"type": "error", **base, "code": "timeout", "message": "no audio in time"}, ends=True)
        finally:
            self.pending = max(0, self.pending - 1)
            # Framed, the client gets whole frames (the last one padded): that is its clock.
            framed_ms = (self.queued_frames - frames_before) * (self.config.frame_ms or 20)
            self.queued_ms = session_ms + (framed_ms if framing else sentence_ms)

    async def _send_frames(self, delivery: Delivery, frames: list[bytes], pacer: Pacer) -> None:
        """Telephony frames, binary or as media events, paced as configured."""
        frame_ms = self.config.frame_ms or 20
        for frame in frames:
            await pacer.wait_turn()
            sent = self.queued_frames
            if self.config.frames == "media":
                await self._put_frame(
                    delivery, media_event(frame, sent + 1, sent * frame_ms, self.session_id), frame_ms
                )
            else:
                await self._put_frame(delivery, frame, frame_ms)
            self.gw.metrics.ws_frames.inc()
            self.gw.metrics.audio_bytes.labels("ws").inc(len(frame))
            self.queued_frames += 1

    async def _put_frame(
        self, delivery: Delivery, frame: bytes | dict[str, Any], audio_ms: float = 0.0, *, ends: bool = False
    ) -> None:
        """Queue one frame of a sentence (a cancel drops it until the socket has it)."""
        item = orjson.dumps(frame).decode() if isinstance(frame, dict) else frame
        try:
            async with asyncio.timeout(self.gw.settings.ws_send_timeout_s):
                await self.out.put(_Queued(item, delivery, audio_ms, ends))
        except TimeoutError:
            raise SlowConsumer() from None

    async def _send_loop(self) -> None:
        while (item := await self.out.get()) is not _CLOSE:
            if isinstance(item, _Queued):
                delivery = item.delivery
                if delivery.stopped:
                    continue  # cancelled (from elsewhere) after it was queued: never sent
                if item.audio_ms:
                    # Counted before the write: once it starts, the frame is on the wire.
                    self.starts_ms.setdefault(delivery.request_id, self.written_ms)
                    delivery.wrote(item.audio_ms)
                    self.written_ms += item.audio_ms
                    self.written_frames += 1
                if item.ends:
                    delivery.ended = True
                frame = item.payload
            else:
                frame = item
            if isinstance(frame, bytes):
                await self.ws.send_bytes(frame)
                self.sent_bytes += len(frame)
            else:
                await self.ws.send_text(frame)
                self.sent_bytes += len(frame.encode())

    async def _event(self, event: dict[str, Any]) -> None:
        await self.out.put(orjson.dumps(event).decode())

    async def _error(self, code: str, message: str, **extra: Any) -> None:
        await self._event({"type": "error", "code": code, "message": message, **extra})


async def stream(ws: WebSocket) -> None:
    gw = gateway(ws)
    ctx = audit_context(ws)
    await ws.accept()
    try:
        tenant = authenticate(ws, allow_query=True)
    except ApiError as err:
        gw.audit.record(ctx.event("ws_open", status=None, outcome=err.code, sent=0))
        close_code, why = (4403, "forbidden") if err.status == 403 else (4401, "unauthorized")
        await _refuse(ws, err.code, err.message, close_code, why)
        return
    limits = gw.settings
    refusal = None
    if gw.ws_sessions >= limits.ws_max_sessions:
        gw.metrics.rejected.labels("too_many_sessions").inc()
        refusal = f"the gateway is at its limit of {limits.ws_max_sessions} sessions"
    elif gw.ws_tenant_sessions.get(tenant, 0) >= limits.ws_max_sessions_per_tenant:
        gw.metrics.rejected.labels("too_many_tenant_sessions").inc()
        refusal = f"tenant {tenant!r} is at its limit of {limits.ws_max_sessions_per_tenant} sessions"
    if refusal is not None:
        gw.audit.record(ctx.event("ws_open", status=None, outcome="too_many_sessions", sent=0))
        await _refuse(ws, "too_many_sessions", refusal, 1013, "try again later")
        return
    if not gw.broker.reachable:  # nothing said in this session could be queued
        gw.audit.record(ctx.event("ws_open", status=None, outcome="kafka_unavailable", sent=0))
        down = f"no Kafka broker has answered for {gw.broker.down_for:.0f} s; reconnect later"
        await _refuse(ws, "kafka_unavailable", down, 1013, "Kafka unavailable")
        return
    session = Session(ws, gw, tenant)
    ctx.request_id = session.session_id
    gw.audit.record(ctx.event("ws_open", status=None, outcome="ok", sent=0))
    gw.ws_tenant_sessions[tenant] = gw.ws_tenant_sessions.get(tenant, 0) + 1
    gw.metrics.ws_sessions.set(gw.ws_sessions)
    try:
        await session.run()
    finally:
        left = gw.ws_tenant_sessions.get(tenant, 1) - 1
        if left:
            gw.ws_tenant_sessions[tenant] = left
        else:
            gw.ws_tenant_sessions.pop(tenant, None)
        gw.metrics.ws_sessions.set(gw.ws_sessions)
        ctx.details = {"reason": session.close_reason, "sentences": session.count}
        reason = session.close_reason
        outcome = "ok" if reason in ("end", "disconnect", "idle") else reason
        gw.audit.record(ctx.event("ws_close", status=None, outcome=outcome, sent=session.sent_bytes))


async def _refuse(ws: WebSocket, code: str, message: str, close_code: int, reason: str) -> None:
    """An error event the client can read, then the close code a proxy or library acts on."""
    await ws.send_text(orjson.dumps({"type": "error", "code": code, "message": message}).decode())
    await ws.close(close_code, reason)


routes = [WebSocketRoute("/v1/stream", stream)]
