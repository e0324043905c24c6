"""`POST /v1/audio/speech` in the shape of OpenAI's speech API, so its SDKs work unchanged."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from streamtts.audio import formats
from streamtts.gateway.audio import audio_response, sse_response
from streamtts.gateway.audit_trail import audit_context
from streamtts.gateway.errors import ApiError
from streamtts.gateway.http import authenticate, gateway, read_body
from streamtts.gateway.speech_options import SpeechOptions
from streamtts.schemas.trace import from_http

SPEED_MIN, SPEED_MAX = 0.5, 2.0  # OpenAI allows 0.25–4.0; ours is narrower: clamped


class OpenAISpeechBody(BaseModel):
    # Unknown fields are ignored, as OpenAI's SDKs add new ones over time.
    model_config = ConfigDict(extra="ignore", use_attribute_docstrings=True)
    model: str = "tts-1"
    input: str
    voice: str = Field(min_length=1, max_length=200)
    response_format: str = "mp3"
    """An OpenAI name of a registered format (`AudioCodec.openai_name`)."""
    speed: float = Field(default=1.0, ge=0.25, le=4.0)
    instructions: str | None = Field(default=None, max_length=0)
    """Refused when set (400 naming the field; the schema says so: at most 0 characters):
    neither engine here follows free-text style instructions, and a request is never spoken
    otherwise than it asked without saying so."""
    stream_format: Literal["audio", "sse"] = "audio"
    """"audio": the audio bytes as they are made; "sse": server-sent events
    (`speech.audio.delta` with base64 audio, then `speech.audio.done` with usage)."""
    deadline_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    """Not OpenAI's: first audio wanted within this many ms, else 429 `overloaded`
    (an SDK passes it with `extra_body`)."""

    @field_validator("instructions", mode="before")
    @classmethod
    def _no_instructions(cls, value: object) -> object:
        if isinstance(value, str) and value:
            raise ValueError(
                "the voices here cannot follow style instructions; leave the field out "
                "(choose a voice and speed instead)"
            )
        return value


async def speech(request: Request) -> Response:
    tenant = authenticate(request)
    body = await read_body(request, OpenAISpeechBody)
    offered = formats.openai_formats()
    if body.response_format not in offered:
        raise ApiError(400, "unsupported_format", f"response_format must be one of {', '.join(offered)}")
    gw = gateway(request)
    opts = SpeechOptions(
        text=body.input,
        voice=gw.voices.openai(body.voice),
        format=offered[body.response_format],
        speed=min(SPEED_MAX, max(SPEED_MIN, body.speed)),
        presign=False,
        metadata={"openai_model": body.model[:64]},
        text_type="text",  # OpenAI's `input` is plain text, whatever it looks like
        deadline_ms=body.deadline_ms,
    )
    state = await gw.submit(tenant, opts, endpoint="openai", trace=from_http(request.headers))
    audit_context(request).request_id = state.request_id
    if body.stream_format == "sse":
        return await sse_response(gw, state, endpoint="openai", input_chars=len(body.input))
    return await audio_response(gw, state, endpoint="openai")


routes = [Route("/v1/audio/speech", speech, methods=["POST"])]
