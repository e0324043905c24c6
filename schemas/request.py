"""The request contract: what a customer platform puts on `tts.requests`."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from streamtts.audio import formats
from streamtts.schemas.base import Contract
from streamtts.schemas.languages import REQUEST_LANGUAGES
from streamtts.schemas.names import AudioFormat, OneOf, Pool, WavCodec
from streamtts.schemas.utterance import StreamOptions

Language = Annotated[
    str, OneOf(REQUEST_LANGUAGES, "language", f"use auto or one of {', '.join(REQUEST_LANGUAGES[1:])}")
]
""""auto" or a tag of the language table (`schemas.languages`)."""
Priority = Literal["interactive", "normal", "batch"]
TextType = Literal["text", "ssml"]

LANGUAGES: tuple[str, ...] = REQUEST_LANGUAGES

# Ids become Kafka keys and object-storage path parts: keep them path- and header-safe.
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
TENANT_PATTERN = r"^[a-z0-9][a-z0-9-]{0,62}$"
TOPIC_PATTERN = r"^[A-Za-z0-9._-]{1,249}$"
# A voice id, or a blend of up to 8 weighted ids ("jm_kumo:0.7+jf_gongitsune:0.3"), matched
# whole: the value reaches logs, metrics labels and object metadata, so no whitespace, no
# control characters, nothing a header or a label could be broken with.
_VOICE_NAME = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}"
_VOICE_TERM = _VOICE_NAME + r"(:([0-9]{1,4}(\.[0-9]{1,6})?|\.[0-9]{1,6}))?"
VOICE_PATTERN = rf"^{_VOICE_TERM}(\+{_VOICE_TERM}){{0,7}}$"
MAX_SEGMENTS = 10_000
"""Upper bound of a request's segment count on the wire (far above what any text limit yields)."""
MAX_PARTS = 1_000
"""Upper bound of the parts of one segment's audio (≤ 5 s each)."""
# Hard ceiling of the contract; stages enforce a lower, configurable limit.
MAX_TEXT_CHARS = 200_000


class Delivery(BaseModel):
    """Where the audio goes: chunks to topics, the assembled file to object storage, or both."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    chunks: bool = True
    """Publish ordered audio chunks on the default audio topic."""
    reply_topic: str | None = Field(default=None, pattern=TOPIC_PATTERN)
    """Also publish the chunks on this topic (a per-request/per-client reply topic)."""
    storage: bool = True
    """Write the assembled file to object storage and publish a completion result."""
    presign: bool = False
    """Put a presigned GET URL in the completion result."""
    namespace: str | None = Field(default=None, pattern=r"^[a-z0-9][a-z0-9._-]{0,63}$")
    """Object-key prefix for the stored file (replays into a separate output namespace)."""
    keep_on_cancel: bool = True
    """A cancelled request's audio produced so far is stored (false: nothing is stored)."""

    @model_validator(mode="after")
    def _has_destination(self) -> Self:
        if not (self.chunks or self.reply_topic or self.storage):
            raise ValueError("at least one of chunks, reply_topic, storage must be set")
        return self


class TTSRequest(Contract):
    """A text-to-speech request. Keyed by `request_id` on every topic it travels."""

    contract_name: ClassVar[str] = "request"

    schema_version: Literal[1] = 1
    request_id: str = Field(pattern=ID_PATTERN)
    """Unique id chosen by the caller (or generated); the Kafka key everywhere downstream."""
    tenant: str = Field(default="default", pattern=TENANT_PATTERN)
    stream: StreamOptions | None = None
    """Set: a streamed utterance, whose text follows in `TextDelta` records keyed by the
    same id (`schemas.utterance`); plain text only (no SSML)."""
    text: str = Field(max_length=MAX_TEXT_CHARS)
    """The text to speak; with `stream`, the utterance's first words (may be empty)."""
    text_type: TextType | None = None
    """"ssml": `text` is an SSML document (the subset in `processors.segment.ssml`); "text":
    plain text, always; None: plain text unless the pipeline's markup policy is "ssml" and
    the text is a `<speak>` document."""
    language: Language = "auto"
    """The request's language ("auto": identified per sentence); when given it wins over text
    identification for its script, and breaks ties for Han characters (zh vs ja vs yue)."""
    voice: str = Field(default="auto", min_length=1, max_length=600, pattern=VOICE_PATTERN)
    """Voice id, a blend like "jm_kumo:0.7+jf_gongitsune:0.3", or "auto" (base voice per language)."""
    format: AudioFormat = "mp3"
    codec: WavCodec = "pcm_s16le"
    """For wav: 16-bit PCM, or G.711 μ-law / A-law inside the WAV (telephony files)."""
    sample_rate: int = Field(default=24000, ge=8000, le=48000)
    """Default 24000; 8000 for G.711 (mulaw, alaw, or wav with a G.711 codec)."""
    speed: float = Field(default=1.0, ge=0.5, le=2.0)
    priority: Priority = "normal"
    delivery: Delivery = Field(default_factory=Delivery)
    cache: bool = True
    """Serve and store renders in the render cache; false always synthesizes afresh."""
    deadline_ms: int | None = Field(default=None, ge=1, le=3_600_000)
    """First audio is wanted within this many ms of `created_at`. Admission (the gateway,
    `streamtts submit`) refuses the request as `overloaded` when the synthesize workers'
    reported queue predicts it later (None: always queued)."""
    timestamps: bool = False
    """Word timestamps: every audio chunk carries the words it holds, and the result points
    at WebVTT and SRT captions stored next to the audio."""
    lexicon_version: int | None = Field(default=None, ge=1)
    """Say the text with this version of the tenant's lexicon (a replay reproducing a
    result); None: the current version."""
    metadata: dict[str, str] = Field(default_factory=dict, max_length=32)
    """Caller correlation data, echoed on the completion result."""
    created_at: AwareDatetime
    """When the caller created the request: the origin of end-to-end latency."""

    @model_validator(mode="before")
    @classmethod
    def _telephony_rate(cls, data: Any) -> Any:
        """A format's default rate (G.711: 8 kHz speech, raw or in a wav) when none (or null)
        is asked for; otherwise the field's default."""
        if isinstance(data, dict) and data.get("sample_rate") is None:
            data = {k: v for k, v in data.items() if k != "sample_rate"}
            rate = formats.default_rate(data.get("format"), data.get("codec"))
            if rate is not None:
                data["sample_rate"] = rate
        return data

    @field_validator("text")
    @classmethod
    def _text_given(cls, text: str, info: ValidationInfo) -> str:
        if not text and info.data.get("stream") is None:
            raise PydanticCustomError(
                "string_too_short", "is empty (only a streamed utterance may open without text)"
            )
        return text

    @model_validator(mode="after")
    def _plain_stream(self) -> Self:
        if self.stream is not None and self.text_type == "ssml":
            raise ValueError("a streamed utterance is plain text (text_type ssml is for whole requests)")
        return self

    @model_validator(mode="after")
    def _codec_for_wav(self) -> Self:
        if self.codec != "pcm_s16le" and self.format != "wav":
            raise ValueError(f"codec {self.codec!r} is for wav; format {self.format!r} has its own")
        return self

    @classmethod
    def new(cls, text: str, **fields: object) -> TTSRequest:
        """Build a request with a generated id and `created_at = now` unless given.

        Raises ContractError (naming the field) when a value is invalid.
        """
        fields.setdefault("request_id", uuid.uuid4().hex)
        fields.setdefault("created_at", datetime.now(UTC))
        return cls.from_obj({"text": text, **fields})


def pool_of(request: TTSRequest, long_text_chars: int) -> Pool:
    """The synthesize pool a request's segments go to: priority decides first, then length
    (the segment stage routes by it; admission predicts by it)."""
    if request.priority == "interactive":
        return "short"
    if request.priority == "batch" or len(request.text) > long_text_chars:
        return "long"
    return "short"
