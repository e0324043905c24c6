"""The completion result on `tts.results`: a claim check pointing at the stored file."""

from __future__ import annotations

from typing import ClassVar, Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from streamtts.schemas.base import Contract
from streamtts.schemas.chunks import Degradation, MarkTiming, WordTiming
from streamtts.schemas.release import RELEASE_PATTERN
from streamtts.schemas.request import ID_PATTERN, TENANT_PATTERN, AudioFormat
from streamtts.schemas.utterance import EndReason


class StorageRef(BaseModel):
    """Where the assembled audio file is (object storage), and how to check it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    bucket: str
    key: str
    size: int = Field(ge=0)
    etag: str
    content_type: str
    url: str | None = None
    """Presigned GET URL when the request asked for one."""
    made_from: Literal["streamed", "pcm", "decoded"] | None = None
    """How the stored audio was made: "streamed" — it is the frames that were streamed (the
    request was encoded once); "pcm" — encoded from the PCM as a whole file (a format whose
    chunks do not join into one: opus, flac); "decoded" — the streamed frames could not be
    joined (a stream reopened after a failover) and were decoded and encoded again. None on
    captions, and from sinks before this field."""


class Captions(BaseModel):
    """Word timestamps of a completed request, stored next to its audio (same key, other
    extension): WebVTT and SRT cues, and the word list as JSON."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    vtt: StorageRef
    srt: StorageRef
    words: StorageRef
    """The full word list (JSON array of `WordTiming`): the claim check when it is large."""


# Results stay small records: longer word lists are read through `captions.words`.
MAX_INLINE_WORDS = 500
MAX_INLINE_MARKS = 500


class CompletionResult(Contract):
    contract_name: ClassVar[str] = "result"

    schema_version: Literal[1] = 1
    request_id: str = Field(pattern=ID_PATTERN)
    tenant: str = Field(pattern=TENANT_PATTERN)
    status: Literal["completed", "failed", "cancelled"]
    format: AudioFormat
    sample_rate: int = Field(ge=8000, le=48000)
    duration_ms: float = Field(ge=0)
    chunks: int = Field(ge=0)
    storage: StorageRef | None = None
    degraded: list[Degradation] = Field(default_factory=list)
    captions: Captions | None = None
    """With timestamps: where the captions and the word list are stored."""
    words: list[WordTiming] | None = Field(default=None, max_length=MAX_INLINE_WORDS)
    """With timestamps: every word, when there are at most `MAX_INLINE_WORDS` (otherwise
    None and read through `captions.words`)."""
    spoken_ms: float | None = Field(default=None, ge=0)
    """Cancelled: the audio the listener got — produced before the cancel, or up to the
    playback position the client reported, whichever is less."""
    words_spoken: list[WordTiming] | None = Field(default=None, max_length=MAX_INLINE_WORDS)
    """Cancelled, with timestamps: the words that started within `spoken_ms`."""
    marks: list[MarkTiming] | None = Field(default=None, max_length=MAX_INLINE_MARKS)
    """SSML marks, in order, timed on the assembled audio."""
    lexicon_version: int | None = Field(default=None, ge=1)
    """The tenant lexicon version the request was said with; a replay passing it as the
    request's `lexicon_version` says it the same way."""
    notes: list[str] = Field(default_factory=list, max_length=32)
    """What could not be done as written (e.g. an SSML tag that was ignored)."""
    error: str | None = None
    metadata: dict[str, str] = Field(default_factory=dict)
    release: str | None = Field(default=None, pattern=RELEASE_PATTERN)
    """The synthesize release that rendered it (see `RequestContext.release`)."""
    ended: EndReason | None = None
    """A streamed utterance: why it ended ("client": its `end`; "idle": no delta for
    `stream_idle_s`; "limit": past its bounds; "cancelled")."""
    first_audio_ms: float | None = Field(default=None, ge=0)
    """created_at → the request's first audio synthesized (what the release guard compares)."""
    created_at: AwareDatetime
    completed_at: AwareDatetime
    expires_at: AwareDatetime | None = None
    """When the tenant's retention lets object storage delete the stored files (None: kept
    until deleted by hand). The gateway answers 410 for their audio and captions after it."""
