"""One WebSocket session of `WS /v1/stream` (the protocol: routes_stream.py): text in, each
turn one streamed utterance (`<session>-<n>`, see `ws_turn`) — or, aggregation "sentence",
each complete sentence a request of its own — audio forwarded in order, barge-in that
silences the line at once."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import uuid
from dataclasses import dataclass, field
from typing import Any

import orjson
from pydantic import ValidationError
from starlette.websockets import WebSocket, WebSocketDisconnect, WebSocketState

from streamtts.gateway.audit_trail import audit_ws_submit
from streamtts.gateway.delivery import Delivery
from streamtts.gateway.errors import ApiError
from streamtts.gateway.framing import Pacer
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.service import Gateway
from streamtts.gateway.speech_options import SpeechOptions
from streamtts.gateway.ws_contexts import DEFAULT, Contexts, parse_context, played_ms_of, unknown_context
from streamtts.gateway.ws_events import (
    heard_report,
    sentence_base,
)
from streamtts.gateway.ws_forward import AudioForward
from streamtts.gateway.ws_outbound import Outbound, SlowConsumer
from streamtts.gateway.ws_sentences import split_new_sentences
from streamtts.gateway.ws_start import StartMessage
from streamtts.schemas.trace import from_http

log = logging.getLogger("streamtts.gateway.ws_session")


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
    out: Outbound = field(init=False)
    sentences: asyncio.Queue[RequestState | None] = field(default_factory=asyncio.Queue)
    submitted: list[RequestState] = field(default_factory=list)
    """Every sentence request of the session (a cancel stops those not finished)."""
    close_reason: str = "error"
    deliveries: dict[str, Delivery] = field(default_factory=dict)
    """Per sentence request: the audio written of it (registered at submission)."""
    pacer: Pacer | None = None
    contexts: Contexts = field(init=False)
    """The replies being written, each one streamed utterance (aggregation "utterance")."""
    _current: asyncio.Task[None] | None = field(default=None, init=False)
    _current_state: RequestState | None = field(default=None, init=False)
    """The request `_current` forwards."""
    _cancelling: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    _background: set[asyncio.Task[None]] = field(default_factory=set, init=False)

    def __post_init__(self) -> None:
        settings = self.gw.settings
        self.out = Outbound(self.ws, settings.ws_queue_frames, settings.ws_send_timeout_s)
        self.contexts = Contexts(self.gw, settings.ws_max_contexts)

    async def run(self) -> None:
        await self._event(
            {"type": "session", "session_id": self.session_id, "queue_frames": self.out.queue_frames}
        )
        sender = asyncio.create_task(self.out.write())
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
                    await self.out.close()
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
                await self.out.close()
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
            before = (self.count, len(self.buffer.strip()), self.contexts.chars)
            try:
                if await self._handle(text):
                    return "end"
            except ApiError as err:
                await self._error(err.code, err.message)
            if (self.count, len(self.buffer.strip()), self.contexts.chars) != before:
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
        context = parse_context(cmd.get("context_id")) if isinstance(cmd, dict) else None
        if context is not None and not self._streamed:
            raise ApiError(400, "invalid_message", 'context_id needs aggregation "utterance" and plain text')
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
            flush = bool(cmd.get("flush", False))
            await self._add_text(str(cmd.get("text", "")), flush=flush, context=context)
        elif kind == "flush":
            await self._add_text("", flush=True, context=context)
        elif kind == "cancel":
            await self._cancel(cmd.get("played_ms"), context)
        elif kind == "end" and context is not None:
            # That reply is written; the session goes on.
            if not await self.contexts.close(context):
                await self._event(unknown_context(context))
        elif kind == "end":
            if self._streamed:
                await self.contexts.close_all()
            else:
                await self._add_text("", flush=True)
            await self.sentences.put(None)
            return True
        else:
            raise ApiError(400, "invalid_message", f"unknown command type {kind!r}")
        return False

    @property
    def _streamed(self) -> bool:
        """Turns are streamed utterances (plain text, aggregation "utterance")."""
        return self.config.aggregation == "utterance" and self.config.text_type != "ssml"

    async def _add_text(self, text: str, *, flush: bool, context: str | None = None) -> None:
        if self.config.text_type == "ssml":  # a document is spoken whole, never split
            if text.strip():
                await self._submit(text)
            return
        if self._streamed:
            await self.contexts.add(context or DEFAULT, text, flush=flush, open_turn=self._open_turn)
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

    async def _cancel(self, played_ms: object, context: str | None = None) -> None:
        """Barge-in: the line goes silent at once, and the session takes the next reply; with
        `context`, only that context's reply is cut and the others go on."""
        played = played_ms_of(played_ms)
        if context is None:
            self.buffer, self.stop_at = "", 0
        elif not self.contexts.known(context):
            # As for `end`: a typo would otherwise get an empty `cancelled` while its reply plays.
            await self._event(unknown_context(context))
            return
        await self._barge_in(played, context)

    def _cancelled_elsewhere(self, request_id: str | None) -> None:
        """A cancel of one of this session's requests from outside (DELETE, `tts.control`): a
        turn's request is cut alone (its context may hold a newer reply by now); a sentence
        (aggregation "sentence", `request_id` None) stops the session as its own `cancel` does."""
        cut = self._barge_in(None, request=request_id)
        task = asyncio.create_task(cut, name=f"ws-cancel-{self.session_id}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _barge_in(
        self, played_ms: float | None, context: str | None = None, *, request: str | None = None
    ) -> None:
        """Cut every reply, or only `context`'s, or only `request`: what was heard of it is
        reported (`cancelled`) and told to the pipeline; the other contexts go on."""
        everything = context is None and request is None
        if request is not None:
            context = self.contexts.context_of(request)
        async with self._cancelling:
            # The turn takes no more text; its request is cancelled below, like a sentence's.
            if everything:
                await self.contexts.close_all("cancelled")
            elif request is None or self.contexts.open_request(context) == request:
                with contextlib.suppress(ApiError):
                    await self.contexts.close(context or DEFAULT, "cancelled")

            def mine(state: RequestState) -> bool:
                if request is not None:
                    return state.request_id == request
                return context is None or self.contexts.context_of(state.request_id) == context

            # 0. The sentences it cuts: those not wholly written yet (taken before any await,
            #    so a reply sent meanwhile is not among them), and those written but still
            #    playing at `played_ms` (fast pacing leaves them in the client's buffer).
            cut = [s for s in self.submitted if self.deliveries[s.request_id].live and mine(s)]
            unplayed = [
                s
                for s in self.submitted
                if mine(s)
                and s.heard_ms is None
                and self.out.plays_past(self.deliveries[s.request_id], played_ms)
            ]
            # 1. Stop making audio: the cut sentences queued (first, so the forwarder cannot
            #    take the next one when the current one stops), then the one being forwarded.
            queued = [self.sentences.get_nowait() for _ in range(self.sentences.qsize())]
            kept = [item for item in queued if item is None or not mine(item)]
            for item in kept:
                self.sentences.put_nowait(item)
            self.pending = max(0, self.pending - (len(queued) - len(kept)))
            current_state = self._current_state
            stops_current = everything or (current_state is not None and mine(current_state))
            while stops_current and (current := self._current) is not None and not current.done():
                current.cancel()
                await asyncio.wait({current})
            if everything:
                self.pending = 0
            # 2. Drop the cut sentences' frames not yet written; session events stay, in order.
            self.out.drop_sentence_frames(None if everything else {s.request_id for s in cut})
            # 3. Where it stopped: what the socket got (a frame being written counts), or the
            #    client's playback position if less.
            position = self.out.written_ms
            heard_at = position if played_ms is None else min(played_ms, position)
            # 4. Each unfinished sentence: what of it was heard; the pipeline and the result
            #    are told that (`Gateway.cancel`), whether the pipeline had finished it or not.
            for state in cut:
                self.deliveries[state.request_id].on_stop = None  # stopped here: no second barge-in
            heard = [self.out.heard_of(self.deliveries[s.request_id], heard_at) for s in (*cut, *unplayed)]
            told = await asyncio.gather(*map(self.gw.cancel, cut, heard[: len(cut)]))
            told += map(self.gw.cut_unplayed, unplayed, heard[len(cut) :])
            cut += unplayed
            stopped = [s.request_id for s, yes in zip(cut, told, strict=True) if yes]
            requests, words_spoken = heard_report(
                cut, heard, self.out.starts_ms, self.contexts.context_of, timestamps=self.config.timestamps
            )
            # 5. The session clock goes on from what was written and what is still queued: the
            #    next reply starts at once (a cut of a context not playing left it as it was).
            if stops_current:
                self.out.restart_clock()
                self.pacer = None
            # A media client (a telephony bridge) plays from its own buffer, where fast pacing
            # puts a whole reply at once: `clear` empties it, or the caller hears the reply out.
            if self.config.frames == "media" and (stops_current or everything or unplayed):
                await self._event({"event": "clear", "streamSid": self.session_id})
            event: dict[str, Any] = {
                "type": "cancelled",
                **({"context_id": context} if context else {}),
                "request_ids": stopped,
                "position_ms": round(position, 1),
                "spoken_ms": round(sum(r["spoken_ms"] for r in requests), 1),
                "requests": requests,
            }
            if self.config.timestamps:
                event["words_spoken"] = words_spoken
            await self._event(event)

    async def _open_turn(self, context: str, text: str) -> RequestState | None:
        stream = {"max_buffer_delay_ms": self.config.max_buffer_delay_ms}
        return await self._submit(text, stream=stream, context=context)

    async def _submit(
        self, sentence: str, stream: dict[str, Any] | None = None, context: str | None = None
    ) -> RequestState | None:
        """Submit a sentence (or open `context`'s turn, `stream`): its request's state, None if
        refused."""
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
            metadata={
                "session_id": self.session_id,
                "sentence": str(index),
                **({"context_id": context} if context else {}),
            },
            timestamps=self.config.timestamps,
            text_type=self.config.text_type,
            deadline_ms=self.config.deadline_ms,
            stream=stream,
        )
        try:
            # The upgrade's traceparent (if any): the session's requests join the caller's trace.
            trace = from_http(self.ws.headers)
            state = await self.gw.submit(self.tenant, opts, endpoint="ws", request_id=rid, trace=trace)
            on_stop = functools.partial(self._cancelled_elsewhere, rid if stream is not None else None)
            self.deliveries[rid] = state.deliver(Delivery(rid, on_stop=on_stop))
        except ApiError as err:
            audit_ws_submit(self.ws, rid, err.code, self.session_id)
            await self._error(err.code, err.message, request_id=rid, index=index)
            return None
        audit_ws_submit(self.ws, rid, "ok", self.session_id)
        if context is not None:
            self.contexts.opened(rid, context)
        self.count += 1
        self.pending += 1
        live = [s for s in self.submitted if self.deliveries[s.request_id].live]
        for gone in {s.request_id for s in self.submitted} - {s.request_id for s in live}:
            self.deliveries.pop(gone, None)
            self.out.starts_ms.pop(gone, None)
            self.contexts.forget(gone)
        self.submitted = [*live, state]
        await self._event({"type": "started", **sentence_base(rid, context or DEFAULT), "text": sentence})
        await self.sentences.put(state)
        return state

    async def _forward_loop(self) -> None:
        """Forward the sentences in order, each in a task of its own that a cancel can stop."""
        try:
            while (state := await self.sentences.get()) is not None:
                async with self._cancelling:
                    pass  # a barge-in in progress says `cancelled` before the next reply's audio
                delivery = self.deliveries.get(state.request_id)
                if delivery is None or delivery.stopped:  # cut while it waited here
                    self.pending = max(0, self.pending - 1)
                    continue
                self._current_state = state
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
        if self._streamed:  # a turn's audio waits on its writer too (an LLM thinking)
            timeout += self.gw.settings.ws_idle_timeout_s
        # `start` comes before any text, so the configuration is final by now.
        if self.pacer is None:  # new after a cancel: the next reply is not held back
            self.pacer = Pacer(self.config.frame_ms or 20, self.config.pace == "realtime")
        base = sentence_base(state.request_id, self.contexts.context_of(state.request_id))
        forward = AudioForward(self.out, self.gw, self.config, self.session_id)
        try:
            await forward.run(state, self.deliveries[state.request_id], base, self.pacer, timeout)
        finally:
            self.pending = max(0, self.pending - 1)

    async def _event(self, event: dict[str, Any]) -> None:
        await self.out.event(event)

    async def _error(self, code: str, message: str, **extra: Any) -> None:
        await self._event({"type": "error", "code": code, "message": message, **extra})
