"""A streamed utterance: a request whose text arrives in pieces (an LLM's token stream).

On `tts.requests`, keyed by the request id (so every record of an utterance stays in order on
one partition):

1. a `TTSRequest` with `stream` set opens it (its `text` may be empty or the first words);
2. `TextDelta` records add text (`delta`), ask for what is held to be spoken now (`flush`),
   or close it (`end`).

Downstream it is one request: one result, one stored file, one caption track. A reader tells
the two contracts apart by `ce_type` (CloudEvents) or, in a v1 record, by the `delta` field,
which only a text delta has (`is_text_delta`).
"""

from __future__ import annotations

from typing import ClassVar, Literal

import orjson
from pydantic import BaseModel, ConfigDict, Field

from streamtts.schemas.base import Contract

MAX_DELTA_CHARS = 4096
"""Hard ceiling of one delta's text (a token is a few characters; a client batching a whole
paragraph into one delta still fits)."""
MAX_DELTAS = 100_000
"""Hard ceiling of an utterance's deltas; stages enforce a lower, configurable limit."""

EndReason = Literal["client", "idle", "limit", "cancelled"]


DEFAULT_MAX_BUFFER_DELAY_MS = 1000
"""How long a streamed utterance's first text waits for a clause boundary unless the opener
says otherwise. 300 ms cut one-sentence replies a token or two before their end at an LLM's
25 tokens/s (`…email | 邮箱。`, `…입력해 | 주세요.`): +0.059 CER streamed against whole for
mixed zh/en, +0.050 for ko; at 1,000 ms +0.020 and −0.025 (docs/speech-quality.md). The first
clause still goes out as soon as it is whole; Cartesia's default is 3,000 ms."""


class StreamOptions(BaseModel):
    """How a streamed utterance is cut into spoken spans (see `processors.segment.text_cutting`)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_buffer_delay_ms: int = Field(default=DEFAULT_MAX_BUFFER_DELAY_MS, ge=0, le=10_000)
    """Longest text waits unspoken for a clause boundary after its first delta arrived; then
    what is held is spoken up to its last whole word (0: only boundaries, flushes and the end
    cut). ElevenLabs' and Cartesia's knob of the same name."""
    min_first_chars: int | None = Field(default=None, ge=1, le=200)
    """The first span goes out at the first clause boundary once it has this much text (CJK
    characters count twice); None: the pipeline's setting."""


class TextDelta(Contract):
    """A piece of a streamed utterance's text, a flush, or its end."""

    contract_name: ClassVar[str] = "text_delta"

    schema_version: Literal[1] = 1
    request_id: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")
    tenant: str = Field(default="default", pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    delta: str = Field(default="", max_length=MAX_DELTA_CHARS)
    """Text to append, exactly as produced (tokens carry their own spaces)."""
    flush: bool = False
    """Speak everything received so far now, whatever the cutting policy would wait for."""
    end: bool = False
    """The utterance is complete: speak what is left and finish the request."""
    ended: EndReason | None = None
    """Why it ended, when not the client's `end` (written by the segment stage's timers)."""


def is_text_delta(value: bytes | None, ce_type: bytes | None) -> bool:
    """Whether a `tts.requests` record is a `TextDelta` rather than a `TTSRequest`."""
    if ce_type is not None:
        return ce_type.endswith(b".text_delta.v1")
    if not value or b'"delta"' not in value:
        return False
    try:
        obj = orjson.loads(value)
    except orjson.JSONDecodeError:
        return False
    return isinstance(obj, dict) and "delta" in obj
