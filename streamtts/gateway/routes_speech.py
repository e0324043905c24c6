"""Native REST API: submit a request, poll its status, fetch or stream its audio."""

from __future__ import annotations

import contextlib
import math
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from streamtts.gateway import stored_files
from streamtts.gateway.audio import Framing, audio_response
from streamtts.gateway.audit_trail import audit_context
from streamtts.gateway.delivery import words_heard
from streamtts.gateway.errors import ApiError
from streamtts.gateway.framing import FRAME_MS_CHOICES
from streamtts.gateway.http import authenticate, gateway, read_body
from streamtts.gateway.request_state import RequestState
from streamtts.gateway.speech_options import SpeechOptions
from streamtts.schemas.captions import CAPTION_CONTENT_TYPES, CAPTION_FORMATS
from streamtts.schemas.names import WavCodec
from streamtts.schemas.request import AudioFormat, Language
from streamtts.schemas.trace import from_http

MAX_WAIT_S = 30.0


class DeliveryBody(BaseModel):
    # Field docstrings become the OpenAPI document's descriptions.
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    storage: bool = True
    presign: bool = True
    reply_topic: str | None = None


class SpeechBody(BaseModel):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)
    text: str
    text_type: Literal["text", "ssml"] | None = None
    """"ssml": `text` is an SSML document (`<speak>…</speak>`); "text": plain, always;
    unset: the pipeline's markup policy decides."""
    voice: str = Field(default="auto", min_length=1, max_length=200)
    language: Language = "auto"
    format: AudioFormat = "mp3"
    wav_codec: WavCodec = "pcm_s16le"
    """What a wav file holds: 16-bit PCM or G.711 mulaw / alaw (other formats carry their
    own codec, so it only applies to format wav)."""
    sample_rate: int | None = Field(default=None, ge=8000, le=48000)
    """Default 24000; 8000 for G.711 (mulaw, alaw, or wav with a G.711 codec)."""
    speed: float = Field(default=1.0, ge=0.5, le=2.0)
    delivery: DeliveryBody = DeliveryBody()
    metadata: dict[str, str] = Field(default_factory=dict, max_length=16)
    cache: bool = True
    """Serve repeated spans from the render cache (false: synthesize afresh)."""
    timestamps: bool = False
    """Word timestamps: chunks carry words; captions at /v1/speech/{id}/captions."""
    deadline_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    """First audio wanted within this many ms: a request the synthesize workers' queue
    cannot serve in time is refused at once with 429 `overloaded` (and `Retry-After`)."""
    tenant: str | None = None
    """Optional; must be the API key's own tenant."""


async def submit(request: Request) -> Response:
    tenant = authenticate(request)
    body = await read_body(request, SpeechBody)
    if body.tenant is not None and body.tenant != tenant:
        raise ApiError(403, "forbidden", "this API key cannot submit for another tenant")
    if body.delivery.reply_topic is not None:
        # A free choice of topic would let a caller write into another tenant's stream.
        raise ApiError(403, "forbidden", "reply topics are not available through the gateway")
    opts = SpeechOptions(
        text=body.text,
        voice=body.voice,
        language=body.language,
        format=body.format,
        codec=body.wav_codec if body.format == "wav" else "pcm_s16le",
        sample_rate=body.sample_rate,
        speed=body.speed,
        storage=body.delivery.storage,
        presign=body.delivery.presign,
        metadata=body.metadata,
        cache=body.cache,
        timestamps=body.timestamps,
        text_type=body.text_type,
        deadline_ms=body.deadline_ms,
    )
    state = await gateway(request).submit(tenant, opts, endpoint="speech", trace=from_http(request.headers))
    audit_context(request).request_id = state.request_id
    url = f"/v1/speech/{state.request_id}"
    links = {"status_url": url, "audio_url": f"{url}/audio"}
    if body.timestamps:
        links["captions_url"] = f"{url}/captions"
    return JSONResponse(
        {"id": state.request_id, "status": state.status, **links},
        status_code=202,
        headers={"Location": url, **({"traceparent": state.traceparent} if state.traceparent else {})},
    )


async def status(request: Request) -> Response:
    tenant = authenticate(request)
    state = await gateway(request).lookup(tenant, request.path_params["request_id"])
    await _long_poll(request, state)
    return JSONResponse(status_body(state))


async def _long_poll(request: Request, state: RequestState) -> bool:
    """`?wait=S`: answer as soon as the request finishes, or after S seconds with what is
    known then. Returns whether the caller asked to wait."""
    wait = _wait_s(request)
    if wait and not state.terminal:
        with contextlib.suppress(TimeoutError):
            await state.wait_terminal(wait)
    return bool(wait)


def _wait_s(request: Request) -> float:
    raw = request.query_params.get("wait", "0")
    try:
        wait = float(raw)
    except ValueError:
        raise ApiError(400, "invalid_request", "wait must be a number of seconds") from None
    if not 0 <= wait <= MAX_WAIT_S:
        raise ApiError(400, "invalid_request", f"wait must be 0–{MAX_WAIT_S:g} seconds")
    return wait


async def audio(request: Request) -> Response:
    tenant = authenticate(request)
    gw = gateway(request)
    state = await gw.lookup(tenant, request.path_params["request_id"])
    return await audio_response(gw, state, endpoint="speech_audio", framing=_framing(request))


def _framing(request: Request) -> Framing | None:
    """`?frame_ms=20[&pace=realtime]`: telephony frames (see `gateway.framing`)."""
    raw = request.query_params.get("frame_ms")
    pace = request.query_params.get("pace", "fast")
    if pace not in ("fast", "realtime"):
        raise ApiError(400, "invalid_request", "pace must be fast or realtime")
    if raw is None:
        if "pace" in request.query_params:
            raise ApiError(400, "invalid_request", "pace needs frame_ms")
        return None
    try:
        frame_ms = int(raw)
    except ValueError:
        raise ApiError(400, "invalid_request", "frame_ms must be a whole number of milliseconds") from None
    if frame_ms not in FRAME_MS_CHOICES:
        raise ApiError(
            400, "invalid_request", f"frame_ms must be one of {', '.join(map(str, FRAME_MS_CHOICES))}"
        )
    return Framing(frame_ms, pace == "realtime")


async def cancel(request: Request) -> Response:
    """Barge-in: stop a request in flight. 202 while it stops (or the final status with
    `wait`), 200 with `cancelled: false` when it had already finished."""
    tenant = authenticate(request)
    played = _played_ms(request)
    gw = gateway(request)
    state = await gw.lookup(tenant, request.path_params["request_id"])
    if not await gw.cancel(state, played):
        return JSONResponse({**status_body(state), "cancelled": False, "message": f"already {state.status}"})
    if await _long_poll(request, state) and state.terminal:
        return JSONResponse({**status_body(state), "cancelled": state.status == "cancelled"})
    return JSONResponse({**status_body(state), "status": "cancelling", "cancelled": True}, status_code=202)


def _played_ms(request: Request) -> float | None:
    """The client's playback position: a finite number of milliseconds ≥ 0, or absent.
    `float()` also reads "nan" and "inf"; neither is a position (and NaN fails every
    comparison, so it would slip past a `< 0` check into the control message)."""
    raw = request.query_params.get("played_ms")
    if raw is None:
        return None
    try:
        played = float(raw)
    except ValueError:
        raise ApiError(400, "invalid_request", "played_ms must be a number of milliseconds") from None
    if not math.isfinite(played) or played < 0:
        raise ApiError(400, "invalid_request", "played_ms must be a finite number of milliseconds ≥ 0")
    return played


async def captions(request: Request) -> Response:
    """WebVTT (default), SRT or the JSON word list of a request made with timestamps."""
    tenant = authenticate(request)
    fmt = request.query_params.get("format", "vtt")
    if fmt not in CAPTION_FORMATS:
        raise ApiError(400, "invalid_request", f"format must be one of {', '.join(CAPTION_FORMATS)}")
    gw = gateway(request)
    state = await gw.lookup(tenant, request.path_params["request_id"])
    await _long_poll(request, state)
    body = await stored_files.captions(gw.store, state, fmt)
    return Response(body, media_type=CAPTION_CONTENT_TYPES[fmt], headers={"X-Request-Id": state.request_id})


def status_body(state: RequestState) -> dict[str, Any]:
    result = state.result
    ttfa = None
    if state.first_chunk_at is not None:
        ttfa = round((state.first_chunk_at - state.submitted_at) * 1000, 1)
    storage = None
    if result is not None and result.storage is not None:
        s = result.storage
        storage = {
            "bucket": s.bucket,
            "key": s.key,
            "size": s.size,
            "content_type": s.content_type,
            "url": s.url,
        }
    status: Literal["queued", "streaming", "completed", "failed", "cancelled"] = state.status
    if state.heard_ms is not None and status != "failed":
        status = "cancelled"  # a cancel cut its audio here, even if the pipeline had finished it
    return {
        "id": state.request_id,
        "tenant": state.tenant,
        "status": status,
        "format": state.format,
        "chunks": result.chunks if result else len(state.chunks),
        "duration_ms": round(result.duration_ms if result else state.audio_ms, 1),
        "time_to_first_audio_ms": ttfa,
        "degradations": [d.model_dump(mode="json", exclude_none=True) for d in state.degradations],
        "error": state.error,
        "audio_url": f"/v1/speech/{state.request_id}/audio",
        "captions_url": f"/v1/speech/{state.request_id}/captions" if _timed(state) else None,
        "storage": storage,
        "expires_at": result.expires_at.isoformat() if result is not None and result.expires_at else None,
        **_spoken(state),
    }


def _spoken(state: RequestState) -> dict[str, Any]:
    """A cancelled request: what the listener got."""
    result = state.result
    if state.heard_ms is not None and state.status != "failed":
        # What this gateway wrote to the listener before the cancel (or the client's played_ms).
        spoken = state.heard_ms
        if result is not None and result.status == "cancelled" and result.spoken_ms is not None:
            spoken = min(spoken, result.spoken_ms)
        words = words_heard(state.chunks, spoken)
        return {
            "spoken_ms": round(spoken, 1),
            "words_spoken": [w.model_dump() for w in words] if words is not None else None,
        }
    if state.status != "cancelled":
        return {}
    if result is None:  # streamed only: the chunks before the markers
        return {"spoken_ms": round(sum(c.duration_ms for c in state.chunks if not c.cancelled), 1)}
    return {
        "spoken_ms": result.spoken_ms,
        "words_spoken": [w.model_dump() for w in result.words_spoken]
        if result.words_spoken is not None
        else None,
    }


def _timed(state: RequestState) -> bool:
    """Whether the request was made with timestamps (as far as the gateway has seen)."""
    if state.result is not None and state.result.captions is not None:
        return True
    return any(c.words is not None for c in state.chunks)


routes = [
    Route("/v1/speech", submit, methods=["POST"]),
    Route("/v1/speech/{request_id}", status, methods=["GET"]),
    Route("/v1/speech/{request_id}", cancel, methods=["DELETE"]),
    Route("/v1/speech/{request_id}/audio", audio, methods=["GET"]),
    Route("/v1/speech/{request_id}/captions", captions, methods=["GET"]),
]
