"""Rendered segment → PCM chunk messages small enough for Kafka (pure)."""

from __future__ import annotations

from datetime import UTC, datetime

from streamtts.audio.pcm import to_int16
from streamtts.processors.synthesize.renderer import RenderedSegment
from streamtts.processors.synthesize.word_timing import SpanWord, contract_words
from streamtts.schemas import PcmChunk, Segment, WordTiming
from streamtts.schemas.chunks import MarkTiming


def pcm_chunks(
    segment: Segment, rendered: RenderedSegment, chunk_max_ms: int, offset_ms: float | None = None
) -> list[PcmChunk]:
    """Split the segment's audio into parts of at most `chunk_max_ms` (at least one part).

    offset_ms: with timestamps, where the segment starts in the request's audio; each part
    then carries its own offset and the words that start in it, timed from the request start.
    """
    pcm = to_int16(rendered.samples).astype("<i2")
    rate = rendered.sample_rate
    per_part = max(1, int(rate * chunk_max_ms / 1000))
    bounds = list(range(0, len(pcm), per_part)) or [0]
    timed = offset_ms is not None and segment.request.timestamps
    placed = offset_ms is not None  # timestamps or SSML marks: chunks say where they start
    words = request_words(segment, rendered.words or [], offset_ms or 0.0) if timed else []
    marks = [MarkTiming(name=n, time_ms=round((offset_ms or 0.0) + t, 1)) for n, t in rendered.marks or ()]
    now = datetime.now(UTC)
    parts = []
    for i, start in enumerate(bounds):
        last_part = i == len(bounds) - 1
        part_offset = (offset_ms or 0.0) + start * 1000.0 / rate
        part_end = (offset_ms or 0.0) + (start + per_part) * 1000.0 / rate
        parts.append(
            PcmChunk(
                request_id=segment.request_id,
                seq=segment.seq,
                total=segment.total,
                part=i,
                last_part=last_part,
                last=segment.last and last_part,
                lang=segment.lang,
                voice_used=rendered.voice_used,
                sample_rate=rate,
                pcm=pcm[start : start + per_part].tobytes(),
                degradation=rendered.degradation if i == 0 else None,
                synth_ms=rendered.synth_ms if i == 0 else 0.0,
                cache=rendered.cache,
                offset_ms=round(part_offset, 3) if placed else None,
                words=_starting_in(words, part_offset, part_end, i == 0, last_part) if timed else None,
                marks=[
                    m
                    for m in marks
                    if (i == 0 or m.time_ms >= part_offset) and (last_part or m.time_ms < part_end)
                ]
                or None,
                request=segment.request,
                synthesized_at=now,
            )
        )
    return parts


def cancelled_marker(segment: Segment, played_ms: float | None, *, cancelled: bool = True) -> PcmChunk:
    """The segment's place in the stream, without audio: the request was cancelled before
    it was spoken (or, `cancelled` False, the segment has nothing to say: a streamed
    utterance's empty end). Readers still see every (seq, part) and the request's end."""
    return PcmChunk(
        request_id=segment.request_id,
        seq=segment.seq,
        total=segment.total,
        part=0,
        last_part=True,
        last=segment.last,
        lang=segment.lang,
        voice_used="",
        sample_rate=segment.request.sample_rate,
        pcm=b"",
        cancelled=cancelled,
        played_ms=played_ms,
        offset_ms=None,
        words=[] if segment.request.timestamps else None,
        request=segment.request,
        synthesized_at=datetime.now(UTC),
    )


def request_words(segment: Segment, words: list[SpanWord], offset_ms: float) -> list[WordTiming]:
    """Span words → contract words: times from the request start, text as the request wrote
    it (`segment.source_text`)."""
    source, base = segment.source_text, segment.source_start
    if source is None:  # no text map (an older segment): the span's own characters
        source, base = segment.text, 0
    return contract_words(words, source, base, base + len(source), offset_ms)


def _starting_in(
    words: list[WordTiming], start_ms: float, end_ms: float, first: bool, last: bool
) -> list[WordTiming]:
    """The words that start in [start_ms, end_ms); the first and last parts take the rest."""
    return [w for w in words if (first or w.start_ms >= start_ms) and (last or w.start_ms < end_ms)]
