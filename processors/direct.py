"""The direct path: text → audio in-process, segment and synthesize composed without Kafka.

Used by `streamtts synth`, the benchmarks' baseline and the speech tests. The pipeline does
the same two steps in two stages (segment, then synthesize), with Kafka between them.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import numpy as np

from streamtts.processors.segment.lexicon import LexiconMatcher
from streamtts.processors.segment.segmenter import (
    DEFAULT_FIRST_MAX_CHARS,
    DEFAULT_FIRST_MIN_CHARS,
    DEFAULT_MAX_CHARS,
    DEFAULT_MAX_TEXT_CHARS,
    Span,
    segment_text,
)
from streamtts.processors.segment.voice_plan import plan_voices
from streamtts.processors.synthesize.engine import AudioChunk
from streamtts.processors.synthesize.exceptions import UnsupportedLanguageError
from streamtts.processors.synthesize.synthesizer import SpeechRun, Synthesizer, check_rate
from streamtts.processors.synthesize.word_timing import SpanWord, contract_words
from streamtts.schemas import WordTiming

log = logging.getLogger(__name__)


def _planned_spans(
    synth: Synthesizer,
    text: str,
    voice_id: str | None,
    lang_hint: str | None,
    *,
    first_max_chars: int,
    first_min_chars: int,
    max_chars: int,
    max_text_chars: int,
    mapped: bool = False,
    lexicon: LexiconMatcher | None = None,
) -> tuple[list[Span], list[tuple[Span, str | None]]]:
    """Segment `text` as the pipeline does and plan its voices (see `voice_plan`).

    Returns:
        (every span, the speakable ones with the voice each is spoken with; None: "auto").
    Raises:
        SegmentationError, UnknownVoiceError: before any audio.
    """
    voice_id = None if voice_id in (None, "auto") else voice_id
    if voice_id:
        synth.registry.spec(voice_id)  # unknown voice fails before any work
    spans = segment_text(
        text,
        lang_hint=lang_hint,
        first_max_chars=first_max_chars,
        first_min_chars=first_min_chars,
        max_chars=max_chars,
        max_text_chars=max_text_chars,
        mapped=mapped,
        lexicon=lexicon,
    )
    speakable: list[tuple[Span, str | None]] = []
    for span, plan in plan_voices(spans, voice_id, synth.registry):
        if not span.langs <= set(synth.registry.base_voices):
            log.warning("skipping span %d: no voice for language %r", span.index, span.lang)
            continue
        speakable.append((span, plan.voice or voice_id))
    return spans, speakable


def synthesize_text(
    synth: Synthesizer,
    text: str,
    lang_hint: str | None = None,
    voice_id: str | None = None,
    speed: float | None = None,
    sample_rate: int | None = None,
    *,
    first_max_chars: int = DEFAULT_FIRST_MAX_CHARS,
    first_min_chars: int = DEFAULT_FIRST_MIN_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    lexicon: LexiconMatcher | None = None,
) -> Iterator[tuple[Span, AudioChunk]]:
    """Segment `text` and stream its audio span by span.

    Args:
        synth: the speech core that renders each span.
        text: request text.
        lang_hint: request language (decides Han characters; see `segment_text`).
        voice_id: requested voice ("auto" or None: one voice for the whole request where one
            speaks all its languages, see `voice_plan`); a sentence it cannot speak gets the
            voice "auto" picks for that sentence.
        speed: 0.5–2.0 or None.
        sample_rate: output rate for all chunks; None uses the rate of the first voice
            used, so that all chunks of one request share one rate.
        lexicon: a tenant lexicon to apply (as the segment stage does).
    Yields:
        (span, chunk) pairs in order; a span split by the engine yields several chunks.
    Raises:
        SegmentationError: empty/unspeakable/too long text (before any audio).
        UnsupportedLanguageError: no span could be spoken (e.g. only Cyrillic text).
        UnknownVoiceError, InvalidParameterError: before any audio.
    """
    for span, chunk, _ in _spoken(
        synth,
        text,
        lang_hint,
        voice_id,
        speed,
        sample_rate,
        timed=False,
        first_max_chars=first_max_chars,
        first_min_chars=first_min_chars,
        max_chars=max_chars,
        max_text_chars=max_text_chars,
        lexicon=lexicon,
    ):
        yield span, chunk


def synthesize_text_timed(
    synth: Synthesizer,
    text: str,
    lang_hint: str | None = None,
    voice_id: str | None = None,
    speed: float | None = None,
    sample_rate: int | None = None,
) -> Iterator[tuple[Span, AudioChunk, list[WordTiming]]]:
    """`synthesize_text` with word timestamps: each chunk comes with the words that start in
    it, timed in ms from the start of the whole audio, with their ranges in `text`."""
    position_ms = 0.0
    for span, chunk, words in _spoken(synth, text, lang_hint, voice_id, speed, sample_rate, timed=True):
        said = words or []
        end = _span_end(span, said[-1].char_end if said else 0)
        yield span, chunk, contract_words(said, text, 0, end, position_ms)
        position_ms += chunk.duration_s * 1000.0


def _span_end(span: Span, default: int) -> int:
    """Where the span ends in the request text."""
    if span.source is None or not len(span.source):
        return default
    return span.source.source_range(0, len(span.source))[1]


def _spoken(
    synth: Synthesizer,
    text: str,
    lang_hint: str | None,
    voice_id: str | None,
    speed: float | None,
    sample_rate: int | None,
    *,
    timed: bool,
    first_max_chars: int = DEFAULT_FIRST_MAX_CHARS,
    first_min_chars: int = DEFAULT_FIRST_MIN_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    lexicon: LexiconMatcher | None = None,
) -> Iterator[tuple[Span, AudioChunk, list[SpanWord] | None]]:
    """Span by span: (span, chunk, words of the span relative to the chunk's start or None)."""
    check_rate(sample_rate)
    spans, speakable = _planned_spans(
        synth,
        text,
        voice_id,
        lang_hint,
        first_max_chars=first_max_chars,
        first_min_chars=first_min_chars,
        max_chars=max_chars,
        max_text_chars=max_text_chars,
        mapped=timed,
        lexicon=lexicon,
    )
    spoken = 0
    for span, voice in speakable:
        if sample_rate is None:
            sample_rate = synth.registry.voice_for(voice, span.langs)[0].sample_rate
        runs = [SpeechRun(r.text, r.lang, r.phonemes) for r in span.runs] or [SpeechRun(span.text, span.lang)]
        resolved = synth.resolve(voice, span.langs)
        phonemes = synth.phonemize(resolved, runs)
        chunks = synth.render_phonemes(
            phonemes, resolved, speed, sample_rate, pause_after_ms=span.pause_after_ms
        )
        if not timed:
            for chunk in chunks:
                spoken += 1
                yield span, chunk, None
            continue
        # Timed: the span's chunks are joined so its words are timed in one piece.
        parts = list(chunks)
        if not parts:
            continue
        text_map = span.source.blocks() if span.source is not None else None
        words = synth.time_words(resolved, runs, phonemes, parts, text_map)
        joined = AudioChunk(
            np.concatenate([c.samples for c in parts]), parts[0].sample_rate, phonemes, parts[0].voice_id
        )
        spoken += 1
        yield span, joined, words
    if spoken == 0:
        langs = sorted({span.lang for span in spans})
        raise UnsupportedLanguageError(f"no supported language in the text (found {langs})")


def warm_cache(
    synth: Synthesizer,
    text: str,
    voice_id: str | None = None,
    lang_hint: str | None = None,
    speed: float | None = None,
    *,
    first_max_chars: int = DEFAULT_FIRST_MAX_CHARS,
    first_min_chars: int = DEFAULT_FIRST_MIN_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
) -> tuple[int, int]:
    """Render `text` into `synth.cache` span by span, as the pipeline would segment it (the
    same segmentation settings give the same spans, phonemes and keys).

    Returns:
        (spans rendered now, spans that were already cached).
    Raises:
        ValueError: the synthesizer has no cache.
        SegmentationError, UnknownVoiceError, InvalidParameterError: as `synthesize_text`.
    """
    if synth.cache is None:
        raise ValueError("the synthesizer has no render cache")
    _, speakable = _planned_spans(
        synth,
        text,
        voice_id,
        lang_hint,
        first_max_chars=first_max_chars,
        first_min_chars=first_min_chars,
        max_chars=max_chars,
        max_text_chars=DEFAULT_MAX_TEXT_CHARS,
    )
    rendered = cached = 0
    for span, voice_id_of_span in speakable:
        voice = synth.resolve(voice_id_of_span, span.langs)
        phonemes = synth.phonemize(voice, [SpeechRun(r.text, r.lang, r.phonemes) for r in span.runs])
        _, status = synth.render_cached(phonemes, voice, speed)
        rendered += status == "miss"
        cached += status == "hit"
    return rendered, cached
