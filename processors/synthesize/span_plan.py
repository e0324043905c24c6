"""Plan a span once: the voice that speaks it, its speech runs, their phonemes, its render
settings and its cache key — what every later step needs, each made once and held by the
caller, as in Piper's `phonemize → phonemes_to_ids → phoneme_ids_to_audio`.

The steps:
1. `plan_span` (or `plan_span_with` for another voice): resolve the voice, build the runs,
   phonemize them (G2P), check speed and rate, compute the render-cache key;
2. `render_plan`: the post-processed audio of those phonemes, from the cache or the model;
3. `time_plan_words`: with timestamps, the words timed on that audio.

Used by the renderer's model path and its cache fast path, the direct path and `streamtts
cache warm`. The synthesize stage hands the plan its cache lookup made on to the model path,
so a first span that misses the cache is resolved and phonemized once, not twice.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from streamtts.processors.synthesize.engine import AudioChunk
from streamtts.processors.synthesize.render_cache import CacheStatus, render_key
from streamtts.processors.synthesize.synthesizer import (
    ResolvedVoice,
    SpeechRun,
    Synthesizer,
    check_rate,
    check_speed,
)
from streamtts.processors.synthesize.word_timing import SpanWord
from streamtts.schemas import Segment

G2P = Callable[[ResolvedVoice, Sequence[SpeechRun]], str]
"""The phonemizer a plan uses: `Synthesizer.phonemize`, or the renderer's budgeted call of it."""


@dataclass(frozen=True)
class SpanPlan:
    """One segment planned for one voice."""

    segment: Segment
    """The segment as rendered (a release profile already applied)."""
    asked: str | None
    """The voice asked of the registry (None: the "auto" pick for `langs`)."""
    langs: frozenset[str]
    """The languages that voice must speak."""
    voice: ResolvedVoice
    """The voice that speaks it (`voice.substituted`: not the one asked for)."""
    runs: tuple[SpeechRun, ...]
    """The span's pieces, each in a language of `langs`, with any given IPA."""
    phonemes: str
    """What the model speaks: every run's phonemes as one utterance."""
    speed: float
    """The checked speaking rate: the segment's (SSML prosody), else the request's."""
    sample_rate: int
    """The output rate the request asked for."""
    key: str | None
    """The render-cache key; None when there is no cache or the request bypasses it."""

    @property
    def voice_id(self) -> str:
        return self.voice.spec.voice_id

    @property
    def timed(self) -> bool:
        """Words are wanted: timestamps asked for, or SSML marks to place."""
        return self.segment.request.timestamps or bool(self.segment.marks)


def requested_voice(segment: Segment) -> str | None:
    """The voice asked for: an SSML `<voice>`'s, else the request's (None: "auto")."""
    ctx = segment.request
    return segment.ssml_voice or (None if ctx.voice == "auto" else ctx.voice)


def planned_voice(segment: Segment) -> str | None:
    """The voice to try first: the segment stage plans one per request or sentence (see
    `voice_plan`); older segments carry none and get the requested one."""
    return segment.voice or requested_voice(segment)


def speech_runs(segment: Segment, langs: frozenset[str]) -> tuple[SpeechRun, ...]:
    """The segment's runs, each in a language of `langs` (a fallback voice reads a run of
    a language it lacks in one it speaks)."""
    return tuple(
        SpeechRun(text, lang if lang in langs else next(iter(langs)), ipa)
        for text, lang, ipa in segment.speech_runs()
    )


def plan_span(synth: Synthesizer, segment: Segment, *, g2p: G2P | None = None) -> SpanPlan:
    """The plain path's plan: the segment's planned voice for all of its languages."""
    return plan_span_with(synth, segment, planned_voice(segment), segment.langs, g2p=g2p)


def plan_span_with(
    synth: Synthesizer,
    segment: Segment,
    voice_id: str | None,
    langs: frozenset[str],
    *,
    g2p: G2P | None = None,
) -> SpanPlan:
    """Plan `segment` for `voice_id` speaking `langs`, each step once:
    1. resolve the voice, 2. the speech runs, 3. phonemize them with `g2p` (None:
    `synth.phonemize`; the renderer passes its budgeted call of it), 4. check speed and rate
    and compute the cache key.

    Raises:
        UnknownVoiceError, UnsupportedLanguageError, InvalidParameterError; whatever `g2p`
        raises (a G2P failure, `BudgetExceeded`).
    """
    ctx = segment.request
    voice = synth.resolve(voice_id, langs)
    runs = speech_runs(segment, langs)
    phonemes = (g2p or synth.phonemize)(voice, runs)
    check_rate(ctx.sample_rate)
    speed = check_speed(segment.speed or ctx.speed)
    key = None
    if synth.cache is not None and ctx.cache:
        key = render_key(voice.engine, voice.spec, speed, phonemes)
    return SpanPlan(segment, voice_id, langs, voice, runs, phonemes, speed, ctx.sample_rate, key)


def render_plan(
    synth: Synthesizer, plan: SpanPlan, *, only_cached: bool = False
) -> tuple[list[AudioChunk], CacheStatus]:
    """Step 2: the plan's post-processed chunks and where they came from (see
    `Synthesizer.render_cached`; `only_cached`: ([], status) rather than running the model)."""
    return synth.render_cached(
        plan.phonemes,
        plan.voice,
        plan.speed,
        plan.sample_rate,
        pause_after_ms=plan.segment.pause_after_ms,
        use_cache=plan.key is not None,
        only_cached=only_cached,
        key=plan.key,
    )


def time_plan_words(
    synth: Synthesizer, plan: SpanPlan, chunks: Sequence[AudioChunk]
) -> list[SpanWord] | None:
    """Step 3 (timestamps): the plan's words timed on its rendered `chunks`."""
    return synth.time_words(plan.voice, plan.runs, plan.phonemes, chunks, plan.segment.text_map)
