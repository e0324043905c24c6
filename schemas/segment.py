"""The segment contract: one clause/sentence span of a request, on `tts.segments`."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from streamtts.schemas.base import Contract
from streamtts.schemas.context import RequestContext
from streamtts.schemas.languages import TAGS
from streamtts.schemas.names import OneOf
from streamtts.schemas.request import MAX_SEGMENTS, VOICE_PATTERN

SPAN_LANGUAGES: tuple[str, ...] = (*TAGS, "other", "mixed")


SpanLanguage = Annotated[str, OneOf(SPAN_LANGUAGES, "span language")]
"""A tag of the language table, "other" (a script nobody speaks) or "mixed" (see `runs`)."""
RunLanguage = Annotated[str, OneOf(TAGS, "run language")]


TextBlock = tuple[int, int, int, int]
"""(text_start, text_end, source_start, source_end): a stretch of a segment's text and the
stretch of the request text it stands for; linear (character k ↔ source_start + k -
text_start) when both lengths are equal, otherwise the whole for the whole (a number read out)."""


def text_map_range(blocks: list[TextBlock], start: int, end: int) -> tuple[int, int]:
    """The request-text range that segment characters [start, end) stand for."""
    lo: int | None = None
    hi: int | None = None
    for s, e, a, b in blocks:
        if e <= start or s >= end:
            continue
        if e - s == b - a:
            first, last = a + max(start, s) - s, a + min(end, e) - s
        else:
            first, last = a, b
        lo = first if lo is None else min(lo, first)
        hi = last if hi is None else max(hi, last)
    if lo is None or hi is None:
        return (0, 0)
    return lo, hi


class SpanRun(BaseModel):
    """A piece of a span in one language (each run has its own G2P), or a piece whose
    pronunciation is given (a lexicon entry, an SSML `phoneme`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    text: str = Field(min_length=1, max_length=2000)
    lang: RunLanguage
    phonemes: str | None = Field(default=None, min_length=1, max_length=2000)
    """IPA to speak instead of the G2P's reading of `text` (converted to the engine's
    alphabet at synthesis)."""


class Mark(BaseModel):
    """An SSML `<mark name=…/>`: reported with its time when the audio around it is spoken."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=200)
    at: int = Field(ge=0)
    """Its position in the request text (SSML source): the mark is timed at the first word
    that starts at or after it, or at the end of the span's speech."""


class SpanRecord(Contract):
    """What a pipeline record of one span begins with: its request and its `seq` of `total`
    (segments and PCM chunks; an audio chunk names its tenant before `seq`)."""

    schema_version: Literal[1] = 1
    request_id: str
    seq: int = Field(ge=0)
    total: int = Field(ge=1, le=MAX_SEGMENTS)


class Segment(SpanRecord):
    """A span to synthesize. `seq` runs 0..total-1 per request; `last` marks seq == total-1."""

    contract_name: ClassVar[str] = "segment"

    last: bool
    text: str = Field(max_length=2000)
    """The span's text; empty only on the last segment of a streamed utterance whose end
    brought no more text (it ends the request, and nothing is spoken)."""
    lang: SpanLanguage
    sentence_index: int = Field(default=0, ge=0)
    ends_sentence: bool = True
    pause_after_ms: int = Field(default=0, ge=0, le=5000)
    """Silence to append after the span's audio (clause/sentence/paragraph pause)."""
    runs: list[SpanRun] | None = Field(default=None, max_length=500)
    """For `lang` "mixed", or a span with given phonemes: the runs whose texts concatenate
    to `text` (one voice speaks them in one model call). None for a plain single-language span."""
    speed: float | None = Field(default=None, ge=0.5, le=2.0)
    """SSML `prosody rate`: the speed of this span (None: the request's)."""
    ssml_voice: str | None = Field(default=None, max_length=600, pattern=VOICE_PATTERN)
    """SSML `voice name`: the voice the document asks for here (None: the request's)."""
    marks: list[Mark] | None = Field(default=None, max_length=500)
    """SSML marks inside or at the end of this span."""
    voice: str | None = Field(default=None, max_length=600, pattern=VOICE_PATTERN)
    """The voice the segment stage chose for a request with voice "auto" (one speaker for
    the whole request where one voice speaks all its languages). None: the request's voice."""
    voice_scope: Literal["request", "sentence", "span"] | None = None
    """How widely `voice` holds: the whole request, this span's sentence, or only this span
    (no single voice speaks the sentence: the one case where the voice changes inside it)."""
    text_map: list[TextBlock] | None = Field(default=None, max_length=4000)
    """With timestamps: where `text` came from in the request text (see `TextBlock`)."""
    source_text: str | None = Field(default=None, max_length=20_000)
    """With timestamps: the request text from the first to the last character the span
    stands for (words are shown as the request wrote them: "100元", not "一百元")."""
    source_start: int = Field(default=0, ge=0)
    """Where `source_text` starts in the request text."""
    request: RequestContext
    segmented_at: AwareDatetime

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.seq >= self.total:
            raise ValueError(f"seq {self.seq} must be below total {self.total}")
        if self.last != (self.seq == self.total - 1):
            raise ValueError("last must be true exactly for seq == total - 1")
        if not self.text and not self.last:
            raise ValueError("text is empty (only a streamed utterance's last segment may be)")
        if self.request_id != self.request.request_id:
            raise ValueError("request_id differs from request.request_id")
        given = bool(self.runs) and any(r.phonemes for r in self.runs or ())
        if self.lang == "mixed" and not self.runs:
            raise ValueError('lang "mixed" needs runs')
        if self.runs and self.lang != "mixed" and not given:
            raise ValueError('runs are given for lang "mixed" or for runs with phonemes')
        if self.runs and "".join(r.text for r in self.runs) != self.text:
            raise ValueError("the runs' texts must concatenate to text")
        return self

    @property
    def langs(self) -> frozenset[str]:
        """Every language a voice must speak to say this span."""
        return frozenset(r.lang for r in self.runs) if self.runs else frozenset({self.lang})

    def run_pairs(self) -> list[tuple[str, str]]:
        """(text, lang) pieces to phonemize, in order."""
        return [(r.text, r.lang) for r in self.runs] if self.runs else [(self.text, self.lang)]

    def speech_runs(self) -> list[tuple[str, str, str | None]]:
        """(text, lang, given IPA or None) pieces to phonemize, in order."""
        if not self.runs:
            return [(self.text, self.lang, None)]
        return [(r.text, r.lang, r.phonemes) for r in self.runs]
