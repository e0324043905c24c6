"""The one place a completion result (the claim check on tts.results) is built (pure, no I/O).

Both outcomes of a request go through `build_result`: an assembled request (completed,
cancelled, or failed because its audio could not be stored) and a request whose audio stopped
coming (failed, with no audio), so the two can never drift apart in what they carry.
"""

from __future__ import annotations

from datetime import datetime

from streamtts.schemas import CompletionResult, RequestContext, WordTiming
from streamtts.schemas.result import MAX_INLINE_MARKS, MAX_INLINE_WORDS
from streamtts.sinks.assembler import AssembledRequest
from streamtts.sinks.storage_writer import StoredFiles


def incomplete_error(missing: list[int], after_s: float) -> str:
    """The error of a request whose segments `missing` never arrived within `after_s`."""
    return f"incomplete: no audio for segments {missing[:20]} after {after_s:.0f} s"


def build_result(
    ctx: RequestContext,
    audio: AssembledRequest | None,
    *,
    completed_at: datetime,
    stored: StoredFiles | None = None,
    error: str | None = None,
) -> CompletionResult:
    """The result of one rendering of `ctx`.

    Args:
        audio: the assembled request; None when its audio never came together (stale).
        stored: where its files went; None when nothing was stored.
        error: why it failed; None for a completed or cancelled request.
    """
    if audio is None and error is None:
        raise ValueError("a request without assembled audio can only have failed")  # paranoid
    words: list[WordTiming] | None = None
    spoken_ms: float | None = None
    words_spoken: list[WordTiming] | None = None
    duration_ms = 0.0
    if audio is not None:
        duration_ms = audio.duration_ms
        if audio.words is not None and len(audio.words) <= MAX_INLINE_WORDS and not error:
            words = audio.words
        if audio.cancelled and not error:
            spoken_ms = duration_ms if audio.played_ms is None else min(duration_ms, audio.played_ms)
            if audio.words is not None:
                words_spoken = [w for w in audio.words if w.start_ms < spoken_ms][:MAX_INLINE_WORDS]
    cancelled = audio is not None and audio.cancelled
    return CompletionResult(
        request_id=ctx.request_id,
        tenant=ctx.tenant,
        status="failed" if error else "cancelled" if cancelled else "completed",
        format=ctx.format,
        sample_rate=audio.sample_rate if audio else ctx.sample_rate,
        duration_ms=round(duration_ms, 3),
        chunks=audio.chunks if audio else 0,
        storage=stored.audio if stored else None,
        degraded=audio.degraded if audio else [],
        captions=stored.captions if stored else None,
        words=words,
        spoken_ms=round(spoken_ms, 1) if spoken_ms is not None else None,
        words_spoken=words_spoken,
        # Bounded like words: a result that cannot be built would stop the sink for all.
        marks=audio.marks[:MAX_INLINE_MARKS] if audio and audio.marks and not error else None,
        lexicon_version=ctx.lexicon_version,
        notes=ctx.notes,
        ended=ctx.ended,
        error=error,
        metadata=ctx.metadata,
        release=ctx.release,
        first_audio_ms=audio.first_audio_ms if audio else None,
        created_at=ctx.created_at,
        completed_at=completed_at,
        expires_at=stored.expires_at if stored else None,
    )


def as_heard(
    result: CompletionResult, heard_ms: float, *, tolerance_ms: float = 1.0
) -> CompletionResult | None:
    """The result again, saying what the listener heard, when that is less than it says.

    A gateway that stopped a request's audio at a barge-in knows what it wrote to the
    client; the sink knows only what was made (a request the pipeline had finished before the
    cancel is `completed`, whole). None when `result` already says no more than `heard_ms`
    (or it failed: there is nothing spoken to correct)."""
    if result.status == "failed":
        return None
    said = (
        result.spoken_ms
        if result.status == "cancelled" and result.spoken_ms is not None
        else result.duration_ms
    )
    if said <= heard_ms + tolerance_ms:
        return None
    spoken = round(min(heard_ms, result.duration_ms), 1)
    words_spoken = None
    if result.words is not None:
        words_spoken = [w for w in result.words if w.start_ms < spoken][:MAX_INLINE_WORDS]
    return result.model_copy(
        update={"status": "cancelled", "spoken_ms": spoken, "words_spoken": words_spoken}
    )
