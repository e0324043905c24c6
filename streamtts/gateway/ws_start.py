"""The WebSocket session's `start` message: voice, format, framing and the session's options
(the protocol itself is in routes_stream.py's docstring)."""

from __future__ import annotations

from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from streamtts.gateway.framing import FRAME_MS_CHOICES, frameable, frameable_choices
from streamtts.schemas.request import AudioFormat, Language
from streamtts.schemas.utterance import DEFAULT_MAX_BUFFER_DELAY_MS


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
    aggregation: Literal["utterance", "sentence"] = "utterance"
    """"utterance": a turn (its text until `end` or a cancel) is one streamed utterance,
    spoken from its first whole clause on (docs/streamed-text.md); "sentence": each complete
    sentence is a request of its own, submitted when its end arrives (the earlier behaviour)."""
    max_buffer_delay_ms: int = Field(default=DEFAULT_MAX_BUFFER_DELAY_MS, ge=0, le=10_000)
    """Utterance mode: the longest a turn's first text waits for a clause boundary before
    what is held is spoken up to its last whole word."""
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
