"""Request → ordered segments: the pure core of the segment stage (no Kafka here)."""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.processors.segment.input_policy import check_text
from streamtts.processors.segment.segmenter import DEFAULT_FIRST_MIN_CHARS, Span, segment_text
from streamtts.processors.segment.voice_plan import VoiceChooser, plan_voices
from streamtts.schemas import RequestContext, Segment, TTSRequest
from streamtts.schemas.segment import SpanRun

# Span languages the contract knows; anything else the segmenter reports is "other".
_CONTRACT_LANGS = {"zh", "en", "ja", "ko", "yue", "mixed"}


def plan_segments(
    request: TTSRequest,
    *,
    first_max_chars: int,
    max_chars: int,
    max_text_chars: int,
    markup: str = "reject",
    now: datetime | None = None,
    first_min_chars: int = DEFAULT_FIRST_MIN_CHARS,
    voices: VoiceChooser | None = None,
) -> list[Segment]:
    """Split a request into segments numbered 0..total-1 with `last` on the final one.

    With `voices`, each segment also carries the voice planned for it (see `voice_plan`).

    Raises:
        InputRejected: markup or control characters (see `input_policy`).
        SegmentationError: empty/unspeakable/too long text (a permanent failure: DLQ).
    """
    check_text(request.text, markup=markup)
    hint = None if request.language == "auto" else request.language
    spans = segment_text(
        request.text,
        lang_hint=hint,
        first_max_chars=first_max_chars,
        first_min_chars=first_min_chars,
        max_chars=max_chars,
        max_text_chars=max_text_chars,
        mapped=request.timestamps,
    )
    ctx = RequestContext.of(request)
    stamp = now or datetime.now(UTC)
    requested = None if request.voice == "auto" else request.voice
    planned = plan_voices(spans, requested, voices) if voices is not None else None
    if planned is not None:
        spans = [span for span, _ in planned]
    plans = [plan for _, plan in planned] if planned is not None else None
    total = len(spans)
    return [
        Segment(
            request_id=request.request_id,
            seq=i,
            total=total,
            last=i == total - 1,
            text=span.text,
            lang=span.lang if span.lang in _CONTRACT_LANGS else "other",  # type: ignore[arg-type]
            sentence_index=span.sentence_index,
            ends_sentence=span.ends_sentence,
            pause_after_ms=int(span.pause_after_ms),
            runs=[SpanRun(text=r.text, lang=r.lang) for r in span.runs] if span.lang == "mixed" else None,  # type: ignore[arg-type]
            voice=plans[i].voice if plans else None,
            voice_scope=plans[i].scope if plans else None,
            text_map=span.source.blocks() if span.source is not None and _mapped(request, span) else None,
            source_text=_source_text(request, span)[0] if _mapped(request, span) else None,
            source_start=_source_text(request, span)[1] if _mapped(request, span) else 0,
            request=ctx,
            segmented_at=stamp,
        )
        for i, span in enumerate(spans)
    ]


def _mapped(request: TTSRequest, span: Span) -> bool:
    return request.timestamps and span.source is not None and len(span.source) > 0


def _source_text(request: TTSRequest, span: Span) -> tuple[str, int]:
    """With timestamps: the request text the span covers, and where it starts (see `Segment`)."""
    assert span.source is not None
    start, end = span.source.source_range(0, len(span.source))
    return request.text[start:end], start
