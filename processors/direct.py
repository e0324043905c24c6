"""The direct path: text → audio in-process — the pipeline's plan and render without Kafka.

Used by `streamtts synth`, `streamtts cache warm`, the benchmarks' baseline and the speech
tests. The steps are the pipeline's own, so the two cannot drift apart:
1. `plan_text`: the segment stage's planning (input policy, SSML, lexicon, voice plan:
   `segment.planner.plan_segments`) of a request made from the arguments;
2. per segment, the synthesize stage's renderer (`SegmentRenderer.render`: the voice
   resolved and the span phonemized once, `span_plan`, with its fallbacks) — without time
   budgets, since nobody else waits on this process;
3. `cache warm` stops after the render step: the render lands in the cache.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import TypedDict, Unpack

from streamtts.errors import RecordError
from streamtts.processors.segment.exceptions import EmptyText
from streamtts.processors.segment.langid import normalize_lang_hint
from streamtts.processors.segment.lexicon import LexiconMatcher
from streamtts.processors.segment.normalize import fix_surrogates
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import DEFAULT_LIMITS, SpanLimits
from streamtts.processors.synthesize.engine import AudioChunk
from streamtts.processors.synthesize.exceptions import UnsupportedLanguageError
from streamtts.processors.synthesize.renderer import Budgets, RenderedSegment, SegmentRenderer
from streamtts.processors.synthesize.span_plan import plan_span, planned_voice, render_plan
from streamtts.processors.synthesize.synthesizer import Synthesizer, check_rate, check_speed
from streamtts.processors.synthesize.word_timing import contract_words
from streamtts.schemas import Segment, TTSRequest, WordTiming

log = logging.getLogger(__name__)

_PLACEHOLDER_RATE = 24_000
"""The request's rate while the first speaking voice is not known yet (see `plan_text`)."""


class Speech(TypedDict, total=False):
    """What a caller asks of the speech, as a request asks it; the keyword arguments every
    function here takes (one left out, or None: the request's default)."""

    lang_hint: str | None
    """The text's language ("auto" or None: identified per sentence)."""
    voice_id: str | None
    """The voice ("auto" or None: one voice for the whole request where one speaks all its
    languages, see `voice_plan`); a sentence it cannot speak gets the voice "auto" picks."""
    speed: float | None
    """None: 1.0."""
    sample_rate: int | None
    """Output rate; None takes the rate of the first voice that speaks, so all chunks of one
    request share one rate."""


_SPEECH_KEYS = Speech.__optional_keys__ | Speech.__required_keys__


def plan_text(
    synth: Synthesizer,
    text: str,
    *,
    timestamps: bool = False,
    text_type: str | None = None,
    markup: str = "reject",
    ssml_unknown: str = "ignore",
    limits: SpanLimits = DEFAULT_LIMITS,
    lexicon: LexiconMatcher | None = None,
    **speech: Unpack[Speech],
) -> list[Segment]:
    """The segments the pipeline would render for `text`, in order: the speakable ones.

    Args:
        synth: whose registry plans the voices and checks the requested one.
        text: as in a request.
        speech: language, voice, speed and rate, as in a request (see `Speech`).
        timestamps: map each segment to the text (for word timestamps).
        text_type, markup, ssml_unknown: the request's text type and the pipeline's input
            and SSML policies (see `planner.plan_segments`; the defaults are the pipeline's).
        limits: span and text sizes (the default: the pipeline's).
        lexicon: a tenant lexicon to apply (as the segment stage does).
    Returns:
        Every segment a base voice speaks (others are skipped with a warning).
    Raises:
        SegmentationError: empty/unspeakable/too long text, refused markup, invalid SSML.
        UnsupportedLanguageError: no segment can be spoken (e.g. only Cyrillic text).
        UnknownVoiceError, InvalidParameterError: before any audio.
    """
    # `**speech` takes any keyword at run time: a misspelled one must fail, not be ignored.
    unknown = speech.keys() - _SPEECH_KEYS
    if unknown:
        raise TypeError(f"unexpected keyword argument(s): {', '.join(sorted(unknown))}")
    # 1. What the gateway checks before a request is accepted, with the direct path's errors.
    voice_id = speech.get("voice_id")
    if voice_id == "auto":
        voice_id = None
    speed, sample_rate = speech.get("speed"), speech.get("sample_rate")
    if voice_id:
        synth.registry.spec(voice_id)  # unknown voice fails before any work
    check_rate(sample_rate)
    check_speed(1.0 if speed is None else speed)
    # A Python caller's text may hold surrogates no request can (they are not UTF-8); the
    # normalizer would drop them first anyway.
    text = fix_surrogates(text)
    if not text:
        raise EmptyText("text is empty")  # the contract refuses it before the planner could
    hint = normalize_lang_hint(speech.get("lang_hint"))
    request = TTSRequest.new(
        text,
        text_type=text_type,
        language=hint or "auto",
        voice=voice_id or "auto",
        speed=1.0 if speed is None else speed,
        sample_rate=sample_rate or _PLACEHOLDER_RATE,
        timestamps=timestamps,
        format="pcm",
    )
    # 2. The segment stage's planning.
    segments = plan_segments(
        request,
        limits=limits,
        markup=markup,
        voices=synth.registry,
        lexicon=lexicon,
        ssml_unknown=ssml_unknown,
        known_voice=lambda name: _known(synth, name),
    )
    # 3. Only what a voice speaks: the pipeline reads the rest in a fallback voice; here a
    #    caller gets the error.
    speakable = []
    for segment in segments:
        if not segment.langs <= set(synth.registry.base_voices):
            log.warning("skipping span %d: no voice for language %r", segment.seq, segment.lang)
            continue
        speakable.append(segment)
    if not speakable:
        langs = sorted({segment.lang for segment in segments})
        raise UnsupportedLanguageError(f"no supported language in the text (found {langs})")
    if sample_rate is not None:
        return speakable
    first = speakable[0]
    rate = synth.registry.voice_for(planned_voice(first), first.langs)[0].sample_rate
    ctx = first.request.model_copy(update={"sample_rate": rate})
    return [segment.model_copy(update={"request": ctx}) for segment in speakable]


def synthesize_text(
    synth: Synthesizer,
    text: str,
    *,
    lexicon: LexiconMatcher | None = None,
    limits: SpanLimits = DEFAULT_LIMITS,
    **speech: Unpack[Speech],
) -> Iterator[tuple[Segment, AudioChunk]]:
    """Plan `text` and stream its audio segment by segment (see `plan_text` for the
    arguments, `limits` included, and errors; all are raised before any audio).

    Yields:
        (segment, its audio as one chunk) in order; a segment is rendered only after the
        previous one was taken.
    """
    segments = plan_text(synth, text, lexicon=lexicon, limits=limits, **speech)
    for segment, rendered in _rendered(synth, segments):
        yield segment, _chunk(rendered)


def synthesize_text_timed(
    synth: Synthesizer, text: str, **speech: Unpack[Speech]
) -> Iterator[tuple[Segment, AudioChunk, list[WordTiming]]]:
    """`synthesize_text` with word timestamps: each chunk comes with the words that start in
    it, timed in ms from the start of the whole audio, with their ranges in `text`."""
    segments = plan_text(synth, text, timestamps=True, **speech)
    spoken = fix_surrogates(text)  # the request's text: what the word ranges index
    position_ms = 0.0
    for segment, rendered in _rendered(synth, segments):
        said = rendered.words or []
        end = _segment_end(segment, said[-1].char_end if said else 0)
        chunk = _chunk(rendered)
        yield segment, chunk, contract_words(said, spoken, 0, end, position_ms)
        position_ms += chunk.duration_s * 1000.0


def warm_cache(
    synth: Synthesizer,
    text: str,
    *,
    markup: str = "reject",
    limits: SpanLimits = DEFAULT_LIMITS,
    **speech: Unpack[Speech],
) -> tuple[int, int]:
    """Render `text` into `synth.cache` segment by segment, planned as the pipeline plans it
    (the same settings give the same segments, plans and keys).

    Returns:
        (segments rendered now, segments that were already cached).
    Raises:
        ValueError: the synthesizer has no cache.
        SegmentationError, UnknownVoiceError, InvalidParameterError: as `plan_text`.
    """
    if synth.cache is None:
        raise ValueError("the synthesizer has no render cache")
    segments = plan_text(synth, text, markup=markup, limits=limits, **speech)
    rendered = cached = 0
    for segment in segments:
        _, status = render_plan(synth, plan_span(synth, segment))
        rendered += status == "miss"
        cached += status == "hit"
    return rendered, cached


def _rendered(synth: Synthesizer, segments: list[Segment]) -> Iterator[tuple[Segment, RenderedSegment]]:
    """Each segment through the synthesize stage's renderer, one at a time."""
    renderer = SegmentRenderer(synth, budgets=Budgets.unbounded())
    try:
        for segment in segments:
            yield segment, renderer.render(segment)
    finally:
        renderer.close()


def _chunk(rendered: RenderedSegment) -> AudioChunk:
    return AudioChunk(rendered.samples, rendered.sample_rate, "", rendered.voice_used)


def _segment_end(segment: Segment, default: int) -> int:
    """Where the segment ends in the request text."""
    if segment.source_text is None or not segment.source_text:
        return default
    return segment.source_start + len(segment.source_text)


def _known(synth: Synthesizer, name: str) -> bool:
    """An SSML `<voice name>` the registry has (as the segment stage checks it)."""
    try:
        synth.registry.spec(name)
    except (RecordError, ValueError, KeyError):
        return False
    return True
