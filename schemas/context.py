"""What every downstream message carries about its request, so each stage is stateless."""

from __future__ import annotations

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from streamtts.schemas.names import WavCodec
from streamtts.schemas.release import RELEASE_PATTERN
from streamtts.schemas.request import (
    ID_PATTERN,
    TENANT_PATTERN,
    VOICE_PATTERN,
    AudioFormat,
    Delivery,
    Language,
    Priority,
    TTSRequest,
)
from streamtts.schemas.utterance import EndReason


class RequestContext(BaseModel):
    """The request minus its text: enough for any stage to act without a lookup."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    request_id: str = Field(pattern=ID_PATTERN)
    tenant: str = Field(pattern=TENANT_PATTERN)
    language: Language
    voice: str = Field(max_length=600, pattern=VOICE_PATTERN)
    format: AudioFormat
    codec: WavCodec = "pcm_s16le"
    sample_rate: int = Field(ge=8000, le=48000)
    speed: float = Field(ge=0.5, le=2.0)
    priority: Priority
    delivery: Delivery
    metadata: dict[str, str] = Field(default_factory=dict)
    cache: bool = True
    timestamps: bool = False
    marks: bool = False
    """The SSML document has marks: chunks carry offsets so marks are timed on the request."""
    lexicon_version: int | None = Field(default=None, ge=1)
    """The tenant lexicon version the segment stage applied (None: the tenant has none)."""
    notes: list[str] = Field(default_factory=list, max_length=32)
    """What the segment stage could not do as written (an SSML tag it ignored), echoed
    on the result."""
    release: str | None = Field(default=None, pattern=RELEASE_PATTERN)
    """The synthesize release the segment stage routed the request to (None: no routing
    rule was in force, i.e. the base release "stable")."""
    created_at: AwareDatetime
    ended: EndReason | None = None
    """On a streamed utterance's last segment (and its chunks): why it ended ("client": its
    `end`; "idle", "limit", "cancelled"); the result says it."""

    @classmethod
    def of(
        cls,
        request: TTSRequest,
        *,
        lexicon_version: int | None = None,
        notes: list[str] | None = None,
        marks: bool = False,
    ) -> RequestContext:
        return cls(
            request_id=request.request_id,
            tenant=request.tenant,
            language=request.language,
            voice=request.voice,
            format=request.format,
            codec=request.codec,
            sample_rate=request.sample_rate,
            speed=request.speed,
            priority=request.priority,
            delivery=request.delivery,
            metadata=request.metadata,
            cache=request.cache,
            timestamps=request.timestamps,
            marks=marks,
            lexicon_version=lexicon_version,
            notes=notes or [],
            created_at=request.created_at,
        )
