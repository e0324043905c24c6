"""`WS /v1/stream`: text in (whole or token by token, as an LLM writes it), audio out.

A turn — the text from the first `text` until `end` or a `cancel` — is one streamed utterance
on Kafka (`<session>-<n>`, session id in metadata; docs/streamed-text.md): the segment stage
speaks its first clause as soon as it is whole (or after `max_buffer_delay_ms`, 1,000 ms by default,
up to the last whole word), later text in whole sentences; one request, one `completed`, word
times from the turn's start. `"aggregation": "sentence"` in start keeps the earlier behaviour:
each complete sentence a request of its own, submitted when its end arrives. Audio is
forwarded strictly in order. Protocol (client → server, text frames):

    {"type": "start", "voice": "en_joe", "language": "en", "format": "pcm", "speed": 1.0, "store": false,
     "max_buffer_delay_ms": 1000, "aggregation": "utterance"}
    {"type": "text", "text": "Hello there. How are"}     (or a plain, non-JSON text frame)
    {"type": "flush"}      speak what is held now, even without a boundary
    {"type": "end"}        end the turn, deliver the remaining audio, then close
    {"type": "cancel", "played_ms": 1200}   barge-in: drop every frame not yet written and
                           every sentence queued, finished or not; `played_ms` is the client's
                           playback position on the session clock (see `cancelled`)

Contexts (several replies on one socket, `ws_contexts`): `text`, `flush`, `end` and `cancel`
may carry `"context_id": "reply-2"`; each context is a turn of its own, rendered as its text
arrives and heard in the order the contexts opened. `end` with a context_id ends that reply
only; `cancel` with one cuts only that reply (the others play on). Events of a named context
carry its `context_id`. At most `ws_max_contexts` (8) are open at once.

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

import orjson
from starlette.routing import WebSocketRoute
from starlette.websockets import WebSocket

from streamtts.gateway.audit_trail import audit_context
from streamtts.gateway.errors import ApiError
from streamtts.gateway.http import authenticate, gateway
from streamtts.gateway.ws_session import Session


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
        gw.audit.record(ctx.event("ws_close", status=None, outcome=outcome, sent=session.out.sent_bytes))


async def _refuse(ws: WebSocket, code: str, message: str, close_code: int, reason: str) -> None:
    """An error event the client can read, then the close code a proxy or library acts on."""
    await ws.send_text(orjson.dumps({"type": "error", "code": code, "message": message}).decode())
    await ws.close(close_code, reason)


routes = [WebSocketRoute("/v1/stream", stream)]
