"""Segment → PCM with graceful degradation: the pure core of the synthesize stage.

The chain, each step visible on the output (a `Degradation`), in a metric and a log event:
1. the requested voice (the normal path);
2. on failure (or a voice that cannot speak the span's language): the base voice of the
   request's main language — or of the span's language when the main one cannot speak it;
3. if that fails too: espeak-ng's formant voice in the span's language (`formant`), then a
   short "please wait" clip rendered by the model at start-up;
A language no neural voice speaks is spoken by the formant voice on the normal path, reported
as the step `formant` (reason `no_neural_voice`).
4. after `threshold` consecutive degradations of a (voice, lang) class, a breaker opens and
   that class goes straight to step 2 for `open_s` seconds (half-open probe after).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from streamtts.errors import failure_reason
from streamtts.processors.synthesize.breaker import CircuitBreaker
from streamtts.processors.synthesize.budgets import BudgetExceeded, BudgetGuard, Budgets, cpu_ms_of
from streamtts.processors.synthesize.exceptions import Preempted, SynthesisError
from streamtts.processors.synthesize.registry import voice_class
from streamtts.processors.synthesize.render_cache import CacheStatus
from streamtts.processors.synthesize.rendered import (
    NOTHING_CACHED,
    CacheLookup,
    RenderedSegment,
    Spoken,
    mark_times,
)
from streamtts.processors.synthesize.span_plan import (
    SpanPlan,
    plan_span_with,
    planned_voice,
    render_plan,
    requested_voice,
    time_plan_words,
)
from streamtts.processors.synthesize.synthesizer import ResolvedVoice, SpeechRun, Synthesizer
from streamtts.processors.synthesize.word_timing import SpanWord
from streamtts.runtime.jsonlog import log_event
from streamtts.schemas import Degradation, Segment
from streamtts.schemas.chunks import DegradationStep
from streamtts.schemas.languages import FORMANT_VOICE

log = logging.getLogger("streamtts.synthesize")

PLEASE_WAIT_TEXT = {
    "en": "Please wait.",
    "zh": "请稍等。",
    "ja": "少々お待ちください。",
    "ko": "Please wait.",
    "yue": "请稍等。",
}


class SegmentRenderer:
    """Renders segments; owns the breaker and the cache of pre-rendered "please wait" clips."""

    def __init__(
        self,
        synthesizer: Synthesizer,
        breaker: CircuitBreaker | None = None,
        on_degraded: Callable[[Degradation], None] | None = None,
        budgets: Budgets | None = None,
    ) -> None:
        self.synth = synthesizer
        self.breaker = breaker or CircuitBreaker()
        self.budgets = budgets or Budgets()
        self._clips: dict[tuple[str, int], np.ndarray] = {}
        self._on_degraded = on_degraded
        self._guard = BudgetGuard()

    # -- start-up ---------------------------------------------------------------------------
    def prerender_please_wait(
        self, langs: tuple[str, ...] = ("en", "zh", "ja"), rates: tuple[int, ...] = (24000,)
    ) -> None:
        """Render the fallback clips with the model itself, once, at start-up."""
        for lang in langs:
            for rate in rates:
                self._clip(lang, rate)

    def _clip(self, lang: str, rate: int) -> np.ndarray:
        key = (lang if lang in PLEASE_WAIT_TEXT else "en", rate)
        clip = self._clips.get(key)
        if clip is None:
            chunks = list(self.synth.synthesize_span(PLEASE_WAIT_TEXT[key[0]], key[0], None, 1.0, rate))
            clip = np.concatenate([c.samples for c in chunks]).astype(np.float32)
            self._clips[key] = clip
        return clip

    # -- per segment ------------------------------------------------------------------------
    def render(self, segment: Segment, plan: SpanPlan | None = None) -> RenderedSegment:
        """Audio for one segment. Never raises for a speech failure: it degrades instead.

        Args:
            plan: the segment's plain-path plan when the caller has it already (a cache
                lookup that missed, see `look_up`): the first attempt renders it instead of
                resolving the voice and phonemizing again.
        Raises:
            ValueError: `plan` was made for another segment or voice (a caller's bug).
        """
        if plan is not None and (
            plan.segment is not segment or plan.asked != planned_voice(segment) or plan.langs != segment.langs
        ):
            raise ValueError("a plan is reused only for the segment and voice it was made for")
        rendered, cpu_ms = cpu_ms_of(lambda: self._render(segment, plan))
        rendered = replace(rendered, cpu_ms=cpu_ms)
        if not segment.marks:
            return rendered
        return replace(rendered, marks=mark_times(segment, rendered))

    def _render(self, segment: Segment, plan: SpanPlan | None) -> RenderedSegment:
        ctx = segment.request
        requested = requested_voice(segment)
        planned = planned_voice(segment)
        lang = segment.lang
        langs = segment.langs
        main_lang = ctx.language if ctx.language != "auto" else _main_lang(segment)
        cls = (voice_class(ctx.voice), lang)
        started = time.perf_counter()
        # By-design substitutions (no native voice) are reported but are not failures.
        if lang == "other":
            reason = "unsupported_language"
        elif lang == "yue":
            reason = "cantonese_as_mandarin"
        elif not self.breaker.allow(cls):
            reason = "breaker_open"
        else:
            try:
                spoken = self._speak(plan or self._plan(segment, planned, langs))
            except Preempted:
                self.breaker.release(cls)  # no verdict: a half-open probe must not stay claimed
                raise
            except (SynthesisError, ValueError, RuntimeError, TimeoutError) as err:
                reason = _reason(err)
                self.breaker.record_degradation(cls)
                log_event(
                    log,
                    "synthesis_failed",
                    logging.WARNING,
                    request_id=ctx.request_id,
                    seq=segment.seq,
                    voice=ctx.voice,
                    lang=lang,
                    reason=reason,
                    error=str(err)[:200],
                )
            else:
                self.breaker.record_success(cls)
                used = spoken.voice_used
                if used == FORMANT_VOICE and requested != FORMANT_VOICE:
                    return self._degraded(segment, spoken, "formant", "no_neural_voice", started)
                if requested is not None and used != requested and (spoken.substituted or segment.voice):
                    # e.g. an English-only voice on a zh sentence: the planner gave the whole
                    # sentence one voice that speaks it.
                    return self._degraded(segment, spoken, "fallback_voice", "voice_lacks_language", started)
                if segment.voice_scope == "span":  # no single voice speaks this sentence
                    return self._degraded(segment, spoken, "fallback_voice", "no_single_voice", started)
                return RenderedSegment(
                    spoken.samples, ctx.sample_rate, used, None, _ms(started), spoken.cache, spoken.words
                )
        step: DegradationStep = "breaker_open" if reason == "breaker_open" else "fallback_voice"
        # Step 2: the base voice of the request's main language, then of the span's language.
        speak_langs = frozenset({"yue": "zh", "other": "en"}.get(x, x) for x in langs)
        for fallback_lang in _unique((main_lang, *sorted(speak_langs))):
            try:
                base = self.synth.registry.base_voice(
                    {"yue": "zh", "other": "en"}.get(fallback_lang, fallback_lang)
                )
                if not speak_langs <= base.languages:
                    found = self.synth.registry.voice_for_langs(speak_langs)
                    base = self.synth.registry.spec(found) if found else base
                spoken = self._speak(self._plan(segment, base.voice_id, speak_langs))
                taken: DegradationStep = "formant" if base.voice_id == FORMANT_VOICE else step
                return self._degraded(segment, spoken, taken, reason, started)
            except (SynthesisError, ValueError, RuntimeError, TimeoutError) as err:
                _fallback_failed(segment, fallback_lang, err)
        # Step 3: espeak-ng's formant voice, when it speaks every language of the span.
        formant = self.synth.registry.formant_voice()
        if langs <= formant.languages:
            try:
                spoken = self._speak(self._plan(segment, formant.voice_id, langs))
                return self._degraded(segment, spoken, "formant", reason, started)
            except (SynthesisError, ValueError, RuntimeError, TimeoutError) as err:
                _fallback_failed(segment, lang, err)
        # Step 4: the clip pre-rendered at start-up: cannot fail.
        clip = self._clip(main_lang if main_lang in PLEASE_WAIT_TEXT else "en", ctx.sample_rate)
        # No words: the clip says "please wait", not the span's text.
        said = Spoken(clip, "please_wait_clip", True, "off", None)
        return self._degraded(segment, said, "please_wait_clip", reason, started)

    def _plan(self, segment: Segment, voice_id: str | None, langs: frozenset[str]) -> SpanPlan:
        """The segment planned for `voice_id`, its G2P within the G2P budget."""
        return plan_span_with(self.synth, segment, voice_id, langs, g2p=self._g2p)

    def _g2p(self, voice: ResolvedVoice, runs: Sequence[SpeechRun]) -> str:
        phonemes = self._guard.within(self.budgets.g2p_s, "g2p", self.synth.phonemize, voice, runs)
        assert isinstance(phonemes, str)
        return phonemes

    def _speak(self, plan: SpanPlan, *, only_cached: bool = False) -> Spoken:
        """Speak a plan (its voice resolved and its runs phonemized once, see `span_plan`):
        render its phonemes in one call, or take them from the render cache (inference
        budget); with timestamps, time the words from the model's phoneme durations."""
        rendered: tuple[list, CacheStatus] = self._guard.within(  # type: ignore[assignment]
            self.budgets.inference_s(plan.segment.text),
            "inference",
            lambda: render_plan(self.synth, plan, only_cached=only_cached),
        )
        chunks, cache = rendered
        voice = plan.voice
        if not chunks:
            if only_cached:
                return Spoken(np.zeros(0, np.float32), voice.spec.voice_id, voice.substituted, cache, None)
            raise SynthesisError("engine produced no audio")
        samples = np.concatenate([c.samples for c in chunks]).astype(np.float32)
        words = self._words(plan, chunks) if plan.timed else None
        return Spoken(samples, voice.spec.voice_id, voice.substituted, cache, words)

    def _words(self, plan: SpanPlan, chunks: list) -> list[SpanWord] | None:
        """After the audio is final: a failure here loses the words, never the audio (it
        must not count as a synthesis failure or pick a fallback voice)."""
        try:
            return time_plan_words(self.synth, plan, chunks)
        except Exception as err:  # any labeller bug: the span is still spoken
            log_event(
                log,
                "word_timing_failed",
                logging.WARNING,
                request_id=plan.segment.request_id,
                seq=plan.segment.seq,
                error=f"{type(err).__name__}: {str(err)[:200]}",
            )
            return None

    def look_up(self, segment: Segment) -> CacheLookup:
        """The segment's audio if the render cache has it — never runs the model, so the
        stage can stream a cached first span at once while the model is busy. Only the plain
        path (no degradation, no fallback voice) is served from here. On a miss the plan it
        made comes back, for `render` to reuse."""
        ctx = segment.request
        if not ctx.cache or self.synth.cache is None or segment.lang in ("other", "yue"):
            return NOTHING_CACHED
        requested = requested_voice(segment)
        planned = planned_voice(segment)
        if planned is not None and requested is not None and planned != requested:
            return NOTHING_CACHED  # a substitution: reported by the regular path
        if segment.voice_scope == "span" or not self.breaker.is_closed(
            (voice_class(ctx.voice), segment.lang)
        ):
            return NOTHING_CACHED  # an open or probing breaker is the regular path's to handle
        started = time.perf_counter()
        try:
            plan = self._plan(segment, planned, segment.langs)
        except (SynthesisError, ValueError, RuntimeError, TimeoutError):
            return NOTHING_CACHED  # the regular path plans again and degrades as it must
        try:
            spoken = self._speak(plan, only_cached=True)
        except (SynthesisError, ValueError, RuntimeError, TimeoutError):
            return CacheLookup(None, plan)
        if spoken.cache != "hit" or not spoken.samples.size or (spoken.substituted and requested is not None):
            return CacheLookup(None, plan)
        rendered = RenderedSegment(
            spoken.samples, ctx.sample_rate, spoken.voice_used, None, _ms(started), "hit", spoken.words
        )
        if segment.marks:
            rendered = replace(rendered, marks=mark_times(segment, rendered))
        return CacheLookup(rendered, None)

    def close(self) -> None:
        self._guard.close()

    def _degraded(
        self, segment: Segment, spoken: Spoken, step: DegradationStep, reason: str, started: float
    ) -> RenderedSegment:
        ctx = segment.request
        used = spoken.voice_used
        deg = Degradation(
            seq=segment.seq,
            step=step,
            reason=reason,
            lang=segment.lang,
            voice_requested=ctx.voice,
            voice_used=used,
        )
        log_event(
            log,
            "degraded",
            logging.WARNING,
            request_id=ctx.request_id,
            tenant=ctx.tenant,
            stage="synthesize",
            **deg.model_dump(include={"seq", "step", "reason", "lang"}),  # as the chunk reports it
            voice=ctx.voice,
            voice_used=used,
        )
        if self._on_degraded:
            self._on_degraded(deg)
        return RenderedSegment(spoken.samples, ctx.sample_rate, used, deg, _ms(started), words=spoken.words)


def _main_lang(segment: Segment) -> str:
    """The language of a span's longest run (what a fallback voice should speak first)."""
    if not segment.runs:
        return segment.lang
    return max(segment.runs, key=lambda r: len(r.text)).lang


def _reason(err: BaseException) -> str:
    if isinstance(err, BudgetExceeded):
        return f"{err.what}_timeout"

    reason = failure_reason(err)
    return "inference_error" if reason == "processing_error" else reason


def _unique(items: tuple[str, ...]) -> list[str]:
    seen: list[str] = []
    for item in items:
        if item not in seen:
            seen.append(item)
    return seen


def _fallback_failed(segment: Segment, lang: str, err: Exception) -> None:
    """A degradation step that failed too: logged, and the next step is tried."""
    log_event(
        log,
        "fallback_failed",
        logging.WARNING,
        request_id=segment.request.request_id,
        seq=segment.seq,
        lang=lang,
        error=str(err)[:200],
    )


def _ms(started: float) -> float:
    return (time.perf_counter() - started) * 1000.0
