"""The segment contract: one clause/sentence span of a request, on `tts.segments`."""

from __future__ import annotations

from typing import ClassVar, Literal, Self

from pydantic import AwareDatetime, Field, model_validator

from streamtts.schemas.base import Contract
from streamtts.schemas.context import RequestContext
from streamtts.schemas.request import MAX_SEGMENTS

SpanLanguage = Literal["zh", "en", "ja", "ko", "yue", "other"]


class Segment(Contract):
    """A span to synthesize. `seq` runs 0..total-1 per request; `last` marks seq == total-1."""

    contract_name: ClassVar[str] = "segment"

    schema_version: Literal[1] = 1
    request_id: str
    seq: int = Field(ge=0)
    total: int = Field(ge=1, le=MAX_SEGMENTS)
    last: bool
    text: str = Field(min_length=1, max_length=2000)
    lang: SpanLanguage
    sentence_index: int = Field(default=0, ge=0)
    ends_sentence: bool = True
    pause_after_ms: int = Field(default=0, ge=0, le=5000)
    """Silence to append after the span's audio (clause/sentence/paragraph pause)."""
    request: RequestContext
    segmented_at: AwareDatetime

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.seq >= self.total:
            raise ValueError(f"seq {self.seq} must be below total {self.total}")
        if self.last != (self.seq == self.total - 1):
            raise ValueError("last must be true exactly for seq == total - 1")
        if self.request_id != self.request.request_id:
            raise ValueError("request_id differs from request.request_id")
        return self
