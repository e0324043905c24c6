"""Chunk contracts: PCM from synthesis (`tts.pcm`), encoded audio for subscribers, and the
parts of a request's stored file for the completion sink (`tts.file.parts`).

A segment may yield several chunks (`part` 0..n) so that no record nears Kafka's ~1 MB limit.
Order within a request is (seq, part); `last_part` closes a segment and `last` closes the
request, so a consumer can reassemble, detect gaps, and know when it is done.
"""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from streamtts.schemas.base import AudioBytes, Contract
from streamtts.schemas.context import RequestContext
from streamtts.schemas.release import RELEASE_PATTERN
from streamtts.schemas.request import ID_PATTERN, MAX_PARTS, MAX_SEGMENTS, TENANT_PATTERN, AudioFormat
from streamtts.schemas.segment import SpanLanguage, SpanRecord

DegradationStep = Literal["fallback_voice", "please_wait_clip", "breaker_open", "formant"]
"""formant: espeak-ng's formant voice spoke the span (no neural voice speaks its language,
or the neural path failed)."""


class Degradation(BaseModel):
    """A span that was not rendered as asked, and why. Never silent."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    seq: int = Field(ge=0)
    step: DegradationStep
    reason: str = Field(max_length=200)
    """Machine-friendly cause, e.g. "g2p_timeout", "inference_error", "unsupported_language"."""
    lang: SpanLanguage
    voice_requested: str
    voice_used: str | None = None


def _check_order(seq: int, total: int, last: bool, last_part: bool) -> None:
    if seq >= total:
        raise ValueError(f"seq {seq} must be below total {total}")
    if last and not (last_part and seq == total - 1):
        raise ValueError("last requires last_part and seq == total - 1")


CacheState = Literal["hit", "miss", "off"]


class WordTiming(BaseModel):
    """A word as spoken: when (ms from the start of the request's audio) and where it is in
    the request text (`text == request_text[char_start:char_end]`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(max_length=2000)
    start_ms: float = Field(ge=0)
    end_ms: float = Field(ge=0)
    char_start: int = Field(ge=0)
    char_end: int = Field(ge=0)
    trailing: str = Field(default="", max_length=16)
    """The request text between this word and the next (spaces, punctuation), so captions
    read as the request was written; cut at 16 characters."""

    @model_validator(mode="after")
    def _ordered(self) -> Self:
        if self.end_ms < self.start_ms or self.char_end < self.char_start:
            raise ValueError("a word must not end before it starts")
        return self


MAX_WORDS_PER_CHUNK = 2000


class MarkTiming(BaseModel):
    """An SSML mark as spoken: its name and when (ms from the start of the request's audio)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    time_ms: float = Field(ge=0)


class ChunkRecord(SpanRecord):
    """What a chunk of one request's synthesized audio says about it, whatever form its audio
    travels in: PCM from synthesis (`PcmChunk`), or its part of the stored file (`FilePart`)."""

    part: int = Field(default=0, ge=0, lt=MAX_PARTS)
    last_part: bool = True
    last: bool
    lang: SpanLanguage
    voice_used: str
    sample_rate: int = Field(ge=8000, le=48000)
    degradation: Degradation | None = None
    synth_ms: float = Field(default=0.0, ge=0)
    cache: CacheState | None = None
    """Render cache: "hit" (served without inference), "miss" (rendered and stored) or "off"."""
    offset_ms: float | None = Field(default=None, ge=0)
    """With timestamps: where this chunk starts in the request's audio."""
    words: list[WordTiming] | None = Field(default=None, max_length=MAX_WORDS_PER_CHUNK)
    """With timestamps: the words that start in this chunk (times from the request's start)."""
    marks: list[MarkTiming] | None = Field(default=None, max_length=500)
    """SSML marks this chunk reaches (times from the request's start, like `words`)."""
    cancelled: bool = False
    """A marker without audio: the request was cancelled before this segment was spoken
    (one per remaining segment, so every reader still sees the request end)."""
    played_ms: float | None = Field(default=None, ge=0)
    """On a cancelled marker: the playback position the client reported, if any."""
    request: RequestContext
    synthesized_at: AwareDatetime

    @model_validator(mode="after")
    def _in_order(self) -> Self:
        _check_order(self.seq, self.total, self.last, self.last_part)
        return self

    @property
    def n_samples(self) -> int:
        """How many samples of the request's audio this chunk holds."""
        raise NotImplementedError

    @property
    def duration_ms(self) -> float:
        return self.n_samples / self.sample_rate * 1000.0


class PcmChunk(ChunkRecord):
    """Synthesized audio of (part of) one segment: signed 16-bit little-endian mono PCM."""

    contract_name: ClassVar[str] = "pcm_chunk"

    pcm: AudioBytes

    @model_validator(mode="after")
    def _whole_samples(self) -> Self:
        if len(self.pcm) % 2:
            raise ValueError("pcm must hold whole 16-bit samples (even byte count)")
        return self

    @property
    def n_samples(self) -> int:
        return len(self.pcm) // 2


FileCarries = Literal["frames", "pcm", "none"]
"""What a `FilePart` carries of its chunk's audio (see `FilePart.carries`)."""
StreamUse = Literal["alone", "opened", "continued", "reopened"]
"""How a chunk's frames were encoded: alone (no stream), first of a stream, next in its stream,
or the first of a new stream opened mid-request (the old one lost: a restart or a re-read)."""


class FilePart(ChunkRecord):
    """A chunk as the completion sink needs it (`tts.file.parts`, written by the encode stage):
    everything its PCM chunk says, and its audio in the form the stored file is built from.

    Where the format's streamed frames join into a valid file, the part carries those frames,
    so a request is encoded once (the stream's frames are the file); where they do not (Opus:
    one Ogg link per chunk; FLAC: one STREAMINFO per chunk), it carries the PCM and the sink
    encodes the file as before. A request that stores nothing carries no audio at all."""

    contract_name: ClassVar[str] = "file_part"

    carries: FileCarries
    """"frames": `audio` is the chunk's payload as streamed, in the request's format;
    "pcm": `audio` is its s16le PCM; "none": no audio (the request stores no file)."""
    audio: AudioBytes
    sample_count: int = Field(ge=0)
    """Samples of the chunk's audio (its duration, whatever `audio` holds)."""
    stream: StreamUse | None = None
    """With frames: how they were encoded (a file joins one stream's frames, or one chunk's)."""

    @model_validator(mode="after")
    def _carried(self) -> Self:
        if self.carries == "pcm" and len(self.audio) != 2 * self.sample_count:
            raise ValueError("a part carrying pcm must hold sample_count 16-bit samples")
        if self.carries == "none" and self.audio:
            raise ValueError("a part carrying none must have no audio")
        if self.carries == "frames" and self.stream is None:
            raise ValueError("a part carrying frames must say how they were encoded (stream)")
        return self

    @property
    def n_samples(self) -> int:
        return self.sample_count

    @property
    def pcm(self) -> bytes:
        """Its PCM (empty unless it carries pcm)."""
        return self.audio if self.carries == "pcm" else b""


class AudioChunk(Contract):
    """An independently decodable piece of the encoded audio, published to subscribers."""

    contract_name: ClassVar[str] = "audio_chunk"

    schema_version: Literal[1] = 1
    request_id: str = Field(pattern=ID_PATTERN)
    tenant: str = Field(pattern=TENANT_PATTERN)
    seq: int = Field(ge=0)
    total: int = Field(ge=1, le=MAX_SEGMENTS)
    part: int = Field(default=0, ge=0, lt=MAX_PARTS)
    last_part: bool = True
    last: bool
    format: AudioFormat
    sample_rate: int = Field(ge=8000, le=48000)
    audio: AudioBytes
    duration_ms: float = Field(ge=0)
    degradation: Degradation | None = None
    cache: CacheState | None = None
    """Render cache status of the segment's audio (see `PcmChunk.cache`)."""
    offset_ms: float | None = Field(default=None, ge=0)
    """With timestamps: where this chunk starts in the request's audio."""
    words: list[WordTiming] | None = Field(default=None, max_length=MAX_WORDS_PER_CHUNK)
    """With timestamps: the words that start in this chunk (see `PcmChunk.words`)."""
    marks: list[MarkTiming] | None = Field(default=None, max_length=500)
    """SSML marks this chunk reaches (see `PcmChunk.marks`)."""
    lexicon_version: int | None = Field(default=None, ge=1)
    """The tenant lexicon version the request was said with (None: none)."""
    cancelled: bool = False
    """No audio: the request was cancelled (see `PcmChunk.cancelled`); the stream ends here."""
    metadata: dict[str, str] = Field(default_factory=dict)
    release: str | None = Field(default=None, pattern=RELEASE_PATTERN)
    """The synthesize release that rendered it (see `RequestContext.release`)."""
    created_at: AwareDatetime
    """The request's creation time (so subscribers can measure end-to-end latency)."""
    encoded_at: AwareDatetime

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        _check_order(self.seq, self.total, self.last, self.last_part)
        return self
