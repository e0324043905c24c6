"""Request → ordered segments: the pure core of the segment stage (no Kafka here)."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from streamtts.processors.segment.exceptions import (
    ExpandedTooLong,
    SegmentationError,
    TooManySegments,
    UnreadableNumber,
)
from streamtts.processors.segment.input_policy import check_text
from streamtts.processors.segment.lexicon import LexiconMatcher
from streamtts.processors.segment.plan_budget import PlanDeadline
from streamtts.processors.segment.segmenter import Span, segment_text
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.segment.splitter import SENTENCE_END
from streamtts.processors.segment.spoken_budget import SpokenBudget
from streamtts.processors.segment.ssml import parse_ssml
from streamtts.processors.segment.ssml_document import looks_like_ssml
from streamtts.processors.segment.voice_plan import VoiceChooser, VoicePlan, plan_voices
from streamtts.schemas import RequestContext, Segment, TTSRequest
from streamtts.schemas.request import MAX_SEGMENTS
from streamtts.schemas.segment import SPAN_LANGUAGES, Mark, SpanRun, TextBlock

# Span languages the contract knows; anything else the segmenter reports is "other".
_CONTRACT_LANGS = frozenset(SPAN_LANGUAGES)
_MIN_SPEED, _MAX_SPEED = 0.5, 2.0


@dataclass(frozen=True)
class _Planned:
    """A span with what the plan says about it beyond the text."""

    span: Span
    plan: VoicePlan | None
    speed: float | None = None
    ssml_voice: str | None = None
    marks: tuple[Mark, ...] = ()


def is_ssml(request: TTSRequest, markup: str) -> bool:
    """The request is an SSML document: asked for, or detected under policy "ssml"."""
    if request.text_type is not None:
        return request.text_type == "ssml"
    return markup == "ssml" and looks_like_ssml(request.text)


def plan_segments(
    request: TTSRequest,
    *,
    limits: SpanLimits,
    markup: str = "reject",
    now: datetime | None = None,
    voices: VoiceChooser | None = None,
    lexicon: LexiconMatcher | None = None,
    ssml_unknown: str = "ignore",
    known_voice: Callable[[str], bool] | None = None,
    deadline: PlanDeadline | None = None,
) -> list[Segment]:
    """Split a request into segments numbered 0..total-1 with `last` on the final one, spans
    and text within `limits`.

    With `voices`, each segment also carries the voice planned for it (see `voice_plan`).
    With `lexicon` (the tenant's), its entries are applied and every segment records its
    version. An SSML request (see `is_ssml`) is parsed by `ssml.parse_ssml` first. With
    `deadline`, planning stops at the first sentence, block or span past it (`plan_budget`).

    Raises:
        InputRejected: markup or control characters (see `input_policy`).
        InvalidSsml: malformed or hostile SSML (reason "invalid_ssml", with the position).
        SegmentationError: empty/unspeakable/too long text, as written or as said once
            lexicon, numbers and markup are read out (`spoken_budget`), or more than
            `MAX_SEGMENTS` segments, or planning past `deadline` (TooCostly); all
            permanent failures: DLQ.
    """
    hint = None if request.language == "auto" else request.language
    notes: list[str] = []
    if is_ssml(request, markup):
        check_text(request.text, markup="allow")
        limits.check_length(request.text)
        items = _ssml_plan(
            request,
            hint,
            limits=limits,
            spoken=SpokenBudget.for_text(len(request.text), limits.max_text_chars),
            voices=voices,
            lexicon=lexicon,
            unknown=ssml_unknown,
            known_voice=known_voice,
            notes=notes,
            deadline=deadline,
        )
    else:
        check_text(request.text, markup="reject" if markup == "ssml" else markup)
        spans = segment_text(
            request.text,
            lang_hint=hint,
            limits=limits,
            mapped=request.timestamps,
            lexicon=lexicon,
            deadline=deadline,
        )
        requested = None if request.voice == "auto" else request.voice
        if voices is not None:
            items = [_Planned(span, plan) for span, plan in plan_voices(spans, requested, voices)]
        else:
            items = [_Planned(span, None) for span in spans]
    if len(items) > MAX_SEGMENTS:
        raise TooManySegments(f"the text makes {len(items)} segments; a request makes at most {MAX_SEGMENTS}")
    ctx = RequestContext.of(
        request,
        lexicon_version=lexicon.version if lexicon else None,
        notes=notes,
        marks=any(item.marks for item in items),
    )
    stamp = now or datetime.now(UTC)
    total = len(items)
    segments: list[Segment] = []
    for i, item in enumerate(items):
        if deadline is not None:
            deadline.check(_start(item, len(request.text)))
        text_map, source_text, source_start = _source(request, item)
        segments.append(
            Segment(
                request_id=request.request_id,
                seq=i,
                total=total,
                last=i == total - 1,
                text=item.span.text,
                lang=item.span.lang if item.span.lang in _CONTRACT_LANGS else "other",
                sentence_index=item.span.sentence_index,
                ends_sentence=item.span.ends_sentence,
                pause_after_ms=int(item.span.pause_after_ms),
                runs=_runs(item.span),
                speed=item.speed,
                ssml_voice=item.ssml_voice,
                marks=list(item.marks) or None,
                voice=item.plan.voice if item.plan else None,
                voice_scope=item.plan.scope if item.plan else None,
                text_map=text_map,
                source_text=source_text,
                source_start=source_start,
                request=ctx,
                segmented_at=stamp,
            )
        )
    return segments


def _runs(span: Span) -> list[SpanRun] | None:
    given = any(r.phonemes for r in span.runs)
    if span.lang != "mixed" and not given:
        return None
    return [SpanRun(text=r.text, lang=r.lang, phonemes=r.phonemes) for r in span.runs]


def _ssml_plan(
    request: TTSRequest,
    hint: str | None,
    *,
    limits: SpanLimits,
    spoken: SpokenBudget,
    voices: VoiceChooser | None,
    lexicon: LexiconMatcher | None,
    unknown: str,
    known_voice: Callable[[str], bool] | None,
    notes: list[str],
    deadline: PlanDeadline | None = None,
) -> list[_Planned]:
    """Spans of an SSML request: each block segmented on its own (a break, a voice, a rate
    or a language change is a span boundary), its map carried back into the document. Only
    the first block has a first span (`limits.first_max_chars`, `first_min_chars`)."""
    doc = parse_ssml(request.text, unknown=unknown, known_voice=known_voice)
    notes.extend(doc.notes)
    out: list[_Planned] = []
    sentence_base = 0
    open_sentence = False  # the last block ended inside a sentence
    requested = None if request.voice == "auto" else request.voice
    for k, block in enumerate(doc.blocks):
        at = block.text.source_range(0, 1)[0]
        if deadline is not None:
            deadline.check(at)
        sizes = limits if not out else replace(limits, first_max_chars=limits.max_chars, first_min_chars=0)
        try:
            spans = segment_text(
                block.text.text,
                lang_hint=block.style.lang or hint or doc.lang,
                limits=replace(sizes, max_text_chars=len(block.text.text) + 1),
                strip_markup=False,
                mapped=True,
                lexicon=lexicon,
                given=doc.given,
                first=not out,
                spoken=spoken,
                deadline=deadline.within(at) if deadline is not None else None,
            )
        except (ExpandedTooLong, UnreadableNumber):
            raise  # the document says too much, or a number in it cannot be said
        except SegmentationError:  # nothing speakable in this block (only punctuation)
            if block.pause_after_ms and out:
                last = out[-1]
                pause = min(5000, last.span.pause_after_ms + block.pause_after_ms)
                out[-1] = replace(last, span=replace(last.span, pause_after_ms=pause))
            continue
        ends = (
            block.pause_after_ms is not None
            or k == len(doc.blocks) - 1
            or block.text.text.rstrip()[-1:] in SENTENCE_END | {"…", "."}
        )
        base = sentence_base - 1 if open_sentence and sentence_base > 0 else sentence_base
        fixed: list[Span] = []
        for j, span in enumerate(spans):
            source = span.source.through(block.text) if span.source is not None else None
            span = replace(span, sentence_index=base + span.sentence_index, source=source)
            if j == len(spans) - 1 and not ends:
                span = replace(span, pause_after_ms=0, ends_sentence=False)
            if j == len(spans) - 1 and block.pause_after_ms is not None:
                span = replace(span, pause_after_ms=block.pause_after_ms, ends_sentence=True)
            fixed.append(span)
        sentence_base = fixed[-1].sentence_index + 1
        open_sentence = not ends
        speed = request.speed * block.style.rate
        if not _MIN_SPEED <= speed <= _MAX_SPEED:
            clamped = min(_MAX_SPEED, max(_MIN_SPEED, speed))
            note = f"prosody rate gives speed {speed:.2f}; spoken at {clamped:.2f} (the range is 0.5–2.0)"
            if note not in notes and len(notes) < 32:  # the contract's bound
                notes.append(note)
            speed = clamped
        block_voice = block.style.voice
        asked = block_voice or requested
        plans: list[tuple[Span, VoicePlan | None]]
        if voices is not None:
            plans = list(plan_voices(fixed, asked, voices))
        else:
            plans = [(s, None) for s in fixed]
        for span, plan in plans:
            out.append(_Planned(span, plan, speed if block.style.rate != 1.0 else None, block_voice))
    if not out:
        raise SegmentationError("the SSML document has nothing speakable")
    out = [replace(item, span=replace(item.span, index=i)) for i, item in enumerate(out)]
    return _with_marks(out, doc.marks)


def _with_marks(items: list[_Planned], marks: list[tuple[str, int]]) -> list[_Planned]:
    """Each mark on the first span that reaches past it (the last span for a mark at the end)."""
    by_item: dict[int, list[Mark]] = {}
    ends = [
        item.span.source.source_range(0, len(item.span.source))[1] if item.span.source else 0
        for item in items
    ]
    reach = list(itertools.accumulate(ends, max))  # how far the spans up to each one reach
    for name, at in marks:
        k = min(bisect.bisect_right(reach, at), len(items) - 1)  # the first that reaches past
        by_item.setdefault(k, []).append(Mark(name=name, at=at))
    return [
        replace(item, marks=tuple(by_item.get(i, ()))) if i in by_item else item
        for i, item in enumerate(items)
    ]


def _start(item: _Planned, text_chars: int) -> int:
    """Where the item's span starts in the request text (all of it, if not mapped)."""
    source = item.span.source
    if source is None or not source.tracked or not len(source):
        return text_chars
    return source.source_range(0, 1)[0]


def _source(request: TTSRequest, item: _Planned) -> tuple[list[TextBlock] | None, str | None, int]:
    """With timestamps or marks: the span's map to the request text, the request text it
    covers and where that starts (see `Segment`); else (None, None, 0)."""
    source = item.span.source
    if not (request.timestamps or item.marks) or source is None or not len(source):
        return None, None, 0
    start, end = source.source_range(0, len(source))
    return source.blocks(), request.text[start:end], start
