"""Span synthesis used by the synthesize stage and the direct path (`processors.direct`): one
span in one language → post-processed audio chunks (a generator: the first chunk is yielded
before later parts are synthesized)."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from streamtts.audio import effects
from streamtts.audio.pcm import resample
from streamtts.processors.synthesize.engine import AudioChunk, SpeechEngine, VoiceSpec
from streamtts.processors.synthesize.exceptions import InvalidParameterError, SynthesisError
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.render_cache import CacheStatus, RenderCache, render_key
from streamtts.processors.synthesize.word_timing import (
    SpanWord,
    assign_phonemes,
    phoneme_times,
    span_words,
    word_units,
)
from streamtts.runtime.byte_lru import ByteLRU
from streamtts.runtime.canary import CanaryReferences
from streamtts.schemas.segment import TextBlock

log = logging.getLogger(__name__)

MIN_SPEED, MAX_SPEED = 0.5, 2.0
MIN_RATE, MAX_RATE = 8_000, 48_000
PHONEME_MEMO_BYTES = 4 << 20
"""Phonemes of recent spans kept per synthesizer (a few thousand spans)."""


@dataclass(frozen=True)
class SynthesisSettings:
    """Post-processing knobs."""

    trim_pad_ms: float = 40.0
    """Kept before the first sample of speech when trimming an engine's leading silence."""
    trim_tail_ms: float = 150.0
    """Kept after the last loud sample when trimming its trailing silence: the release of a
    final stop and the decay of a last vowel sit below the loudness threshold ("app", "Submit"
    at a sentence end lost their /p/ and /t/ with 40 ms: Whisper heard "R" and "Subman"). What
    this keeps beyond `trim_pad_ms` comes off the span's pause, so pacing is unchanged (a
    long span's inner cuts, at clause ends, have no pause: they gain up to 110 ms)."""
    fade_ms: float = 5.0
    """Fade-in/out at chunk edges."""
    ceiling: float = 0.95
    """Peak limiter ceiling (Kokoro exceeds ±1.0)."""
    loudness_dbfs: float | None = None
    """Target RMS level; None leaves levels as the engine made them."""


class SpeechRun(NamedTuple):
    """A piece of a span in one language; `ipa` given (a lexicon entry, an SSML phoneme)
    replaces the G2P's reading of `text`."""

    text: str
    lang: str
    ipa: str | None = None


Runs = Sequence[SpeechRun] | Sequence[tuple[str, str]]


def _speech_runs(runs: Runs) -> list[SpeechRun]:
    return [r if isinstance(r, SpeechRun) else SpeechRun(*r) for r in runs]


@dataclass(frozen=True)
class ResolvedVoice:
    """A voice resolved once per span: what speaks it, and whether it replaced the request's."""

    spec: VoiceSpec
    engine: SpeechEngine
    substituted: bool
    """True when the requested voice cannot speak the span's language (its base voice speaks)."""


class Synthesizer:
    """Turns spans into post-processed audio chunks with a `VoiceRegistry`, in Piper's three
    visible steps: resolve the voice → phonemize → render the phonemes."""

    def __init__(
        self,
        registry: VoiceRegistry,
        settings: SynthesisSettings | None = None,
        cache: RenderCache | None = None,
    ) -> None:
        self.registry = registry
        self.settings = settings or SynthesisSettings()
        self.cache = cache
        """Render cache of raw engine output (None: every span is synthesized)."""
        self._phonemes: ByteLRU[str] = ByteLRU(PHONEME_MEMO_BYTES)
        self.canary_references = CanaryReferences()
        """The canary's references on this model (workers sharing it measure theirs once)."""

    def synthesize_span(
        self,
        span_text: str,
        lang: str,
        voice_id: str | None = None,
        speed: float | None = None,
        sample_rate: int | None = None,
        *,
        pause_after_ms: float = 0.0,
        runs: Runs | None = None,
    ) -> Iterator[AudioChunk]:
        """Synthesize one span (already segmented text).

        Args:
            span_text: text of the span.
            lang: its language (zh, en, ja, ko, yue; "mixed" with `runs`).
            voice_id: requested voice or blend; None picks the "auto" voice of the span's
                languages. A voice that cannot speak them all is replaced by that pick.
            speed: 0.5–2.0; None uses the voice's default.
            sample_rate: output rate (8000–48000); None keeps the engine's native rate.
            pause_after_ms: silence appended after the span's last chunk.
            runs: (text, lang) pieces of a mixed-language span; each is phonemized in its
                own language and the whole span is rendered in one model call.
        Yields:
            Post-processed chunks (trimmed, resampled, peak-limited, faded), usually one.
        Raises:
            UnknownVoiceError, UnsupportedLanguageError, InvalidParameterError.
        """
        check_rate(sample_rate)
        pieces = _speech_runs(runs) if runs else [SpeechRun(span_text, lang)]
        voice = self.resolve(voice_id, {piece.lang for piece in pieces})
        phonemes = self.phonemize(voice, pieces)
        yield from self.render_phonemes(phonemes, voice, speed, sample_rate, pause_after_ms=pause_after_ms)

    def resolve(self, voice_id: str | None, langs: str | Iterable[str]) -> ResolvedVoice:
        """Step 1: the voice that speaks `langs` (all of them) for a request asking for
        `voice_id`."""
        spec, substituted = self.registry.voice_for(voice_id, langs)
        if substituted:
            log.info("voice %s cannot speak %s; using %s", voice_id, langs, spec.voice_id)
        return ResolvedVoice(spec, self.registry.engine(spec), substituted)

    def phonemize(self, voice: ResolvedVoice, runs: Runs) -> str:
        """Step 2: the phonemes of a span's runs, each in its own language's G2P (or its
        given IPA), joined by a word break so the model speaks them as one utterance.

        G2P is deterministic per engine, so a span phonemized recently is not phonemized
        again (`PHONEME_MEMO_BYTES`): a repeated prompt served from the render cache costs
        no G2P at all."""
        pieces = _speech_runs(runs)
        key = _phoneme_key(voice.engine, pieces)
        known = self._phonemes.get(key)
        if known is not None:
            return known.decode("utf-8")
        parts = [_run_phonemes(voice.engine, run) for run in pieces]
        if len(pieces) > 1 and any(run.lang == "zh" for run in pieces):
            parts = [_set_off(p) if run.lang == "en" else p for run, p in zip(pieces, parts, strict=True)]
        phonemes = " ".join(p for p in parts if p)
        self._phonemes.put(key, phonemes.encode("utf-8"))
        return phonemes

    @staticmethod
    def time_words(
        voice: ResolvedVoice,
        runs: Runs,
        phonemes: str,
        chunks: Sequence[AudioChunk],
        text_map: list[TextBlock] | None = None,
    ) -> list[SpanWord] | None:
        """Step 4 (timestamps): the span's words timed by the model's own phoneme durations
        (see `word_timing`); None when the engine reports none. Each word is phonemized once
        more on its own, as an alignment label only: the audio is the span's as rendered.

        Args:
            runs, phonemes: what steps 2 and 3 spoke.
            chunks: the post-processed chunks of step 3, in order.
            text_map: the segment's map to the request text (None: span characters).
        """
        times = phoneme_times(phonemes, chunks)
        if times is None:
            return None
        engine = voice.engine
        bank = getattr(engine, "g2p", None)
        units: list[tuple[int, int]] = []
        labels: list[str] = []
        at = 0
        for text, lang, ipa in _speech_runs(runs):
            if ipa is not None:  # a given pronunciation is one word, labelled by itself
                lead = len(text) - len(text.lstrip())
                units.append((at + lead, at + len(text.rstrip())))
                labels.append(_run_phonemes(engine, SpeechRun(text, lang, ipa)))
                at += len(text)
                continue
            found = bank.words(text, lang) if bank is not None else word_units(text, lang)
            for a, b in found:
                units.append((at + a, at + b))
                try:
                    labels.append(engine.phonemize(text[a:b], lang))
                except (SynthesisError, ValueError, RuntimeError):
                    labels.append("")
            at += len(text)
        return span_words(units, assign_phonemes(phonemes, labels), times, text_map, phonemes)

    def render_phonemes(
        self,
        phonemes: str,
        voice: ResolvedVoice,
        speed: float | None = None,
        sample_rate: int | None = None,
        *,
        pause_after_ms: float = 0.0,
    ) -> Iterator[AudioChunk]:
        """Step 3: post-processed audio for phonemes made by `voice.engine.phonemize` (step 2),
        streamed chunk by chunk (no cache).

        Raises:
            InvalidParameterError: speed or sample rate out of range.
        """
        speed = _checked(voice, speed, sample_rate)
        raw = voice.engine.synthesize_phonemes(phonemes, voice.spec, speed)
        yield from self._post(raw, voice, sample_rate, pause_after_ms)

    def render_cached(
        self,
        phonemes: str,
        voice: ResolvedVoice,
        speed: float | None = None,
        sample_rate: int | None = None,
        *,
        pause_after_ms: float = 0.0,
        use_cache: bool = True,
        only_cached: bool = False,
        key: str | None = None,
    ) -> tuple[list[AudioChunk], CacheStatus]:
        """Step 3 through the render cache: the raw engine output comes from the cache when
        it has it, post-processing runs either way (so the result is the same bytes).

        Args:
            use_cache: False bypasses the cache (the request's `"cache": false`).
            only_cached: return ([], status) instead of synthesizing when the cache has
                nothing ("miss") or is not used ("off").
            key: the render key of these phonemes, voice and speed when the caller made it
                already (`span_plan`); None computes it here.
        """
        speed = _checked(voice, speed, sample_rate)
        spec, engine = voice.spec, voice.engine
        cache = self.cache if use_cache else None
        if cache is not None and key is None:
            key = render_key(engine, spec, speed, phonemes)
        raw = cache.lookup(key, spec.voice_id) if cache is not None and key is not None else None
        status: CacheStatus = "off" if cache is None else "hit" if raw is not None else "miss"
        if raw is None:
            if only_cached:
                return [], status
            raw = list(engine.synthesize_phonemes(phonemes, spec, speed))
            if cache is not None and key is not None and raw:
                cache.store(key, raw)
        return list(self._post(raw, voice, sample_rate, pause_after_ms)), status

    def _post(
        self,
        raw_chunks: Iterable[AudioChunk],
        voice: ResolvedVoice,
        sample_rate: int | None,
        pause_after_ms: float,
    ) -> Iterator[AudioChunk]:
        engine, spec = voice.engine, voice.spec
        out_rate = sample_rate or engine.sample_rate
        pending: AudioChunk | None = None
        for raw in raw_chunks:
            if pending is not None:
                yield self._finish(pending, engine.sample_rate, out_rate, 0.0, spec.voice_id)
            pending = raw
        if pending is not None:
            yield self._finish(pending, engine.sample_rate, out_rate, pause_after_ms, spec.voice_id)

    def _finish(
        self, raw: AudioChunk, rate_in: int, rate_out: int, pause_ms: float, voice_id: str
    ) -> AudioChunk:
        """Post-process one raw engine chunk; order matters:
        1. trim the engine's silence (before resampling: less work),
        2. resample (the filter can overshoot, so limiting comes after),
        3. optional loudness normalization, then peak limiting (ceiling holds at the end),
        4. fades at both edges (chunk starts and ends at zero: no clicks when concatenated),
        5. append the span's pause as exact zeros."""
        s = self.settings
        start, end, decay = _kept(raw.samples, rate_in, s)
        # The pause starts where a `trim_pad_ms` tail would have ended: the decay is part of it.
        pause_ms = max(0.0, pause_ms - decay * 1000.0 / rate_in)
        samples = resample(raw.samples[start:end], rate_in, rate_out)
        if s.loudness_dbfs is not None:
            samples = effects.normalize_loudness(samples, target_dbfs=s.loudness_dbfs)
        samples = effects.limit_peaks(samples, rate_out, ceiling=s.ceiling)
        samples = effects.apply_fades(samples, rate_out, fade_ms=s.fade_ms)
        spoken = len(samples)
        samples = effects.append_silence(samples, rate_out, pause_ms)
        bounds = None
        if raw.bounds is not None:
            # The same trim and rate change, applied to the phoneme positions; the last word
            # ends where speech does (the decay kept after it is the pause's).
            shifted = np.clip(raw.bounds - start, 0, end - decay - start).astype(np.float64)
            bounds = np.clip(np.rint(shifted * rate_out / rate_in), 0, spoken).astype(np.int64)
        return AudioChunk(np.asarray(samples, np.float32), rate_out, raw.phonemes, voice_id, bounds)


_CLOSING = re.compile(r"(?<=[^\s.!?,;:—…])([.!?,;:—…]+)$")


def _set_off(phonemes: str) -> str:
    """An English word that ends a clause of a Chinese sentence, with its punctuation set off
    by a space, as the zh G2P writes it (a Latin run phonemized inside "…的app。" comes out
    "ˈæp ."). Glued ("ˈæp."), Kokoro swallowed the word: Whisper heard "app" as "R",
    "Submit" as "Subman" (eval mx02, mx07, mx12; 21 edits of 696 over three leads)."""
    return _CLOSING.sub(r" \1", phonemes)


def _kept(samples: np.ndarray, rate: int, s: SynthesisSettings) -> tuple[int, int, int]:
    """[start, end) of an engine chunk that trimming keeps (`trim_pad_ms` before its first
    loud sample, `trim_tail_ms` after its last), and how many of the kept samples lie beyond
    a `trim_pad_ms` tail."""
    loud = effects.loud_range(samples)
    if loud is None:
        return 0, 0, 0
    lead, tail = int(s.trim_pad_ms * rate / 1000), int(s.trim_tail_ms * rate / 1000)
    end = min(len(samples), loud[1] + tail)
    return max(0, loud[0] - lead), end, max(0, end - min(len(samples), loud[1] + lead))


def _phoneme_key(engine: SpeechEngine, runs: Sequence[SpeechRun]) -> str:
    """What a span's phonemes depend on: the engine (its G2P and alphabet) and the runs."""
    h = hashlib.sha256(f"{engine.name}\0{engine.model_id}".encode())
    for run in runs:
        h.update(f"\0{run.text}\0{run.lang}\0{run.ipa}".encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _run_phonemes(engine: SpeechEngine, run: SpeechRun) -> str:
    """A run's phonemes: its given IPA in the engine's alphabet, or the G2P's reading when
    there is none (or none of the IPA can be spoken by this engine)."""
    if run.ipa is not None:
        given = engine.from_ipa(run.ipa, run.lang)
        if given:
            return given
        log.warning(
            "no symbol of the given IPA %r is spoken by %s; reading %r", run.ipa, engine.name, run.text
        )
    return engine.phonemize(run.text, run.lang)


def _checked(voice: ResolvedVoice, speed: float | None, sample_rate: int | None) -> float:
    """The speed to render with (the voice's default for None), after checking both knobs.

    Raises:
        InvalidParameterError: speed or sample rate out of range.
    """
    check_rate(sample_rate)
    return check_speed(voice.spec.default_speed if speed is None else speed)


def check_speed(speed: float) -> float:
    """`speed` as a float.

    Raises:
        InvalidParameterError: outside 0.5–2.0.
    """
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise InvalidParameterError(f"speed must be between {MIN_SPEED} and {MAX_SPEED}, got {speed}")
    return float(speed)


def check_rate(sample_rate: int | None) -> None:
    if sample_rate is not None and not MIN_RATE <= sample_rate <= MAX_RATE:
        raise InvalidParameterError(
            f"sample rate must be between {MIN_RATE} and {MAX_RATE} Hz, got {sample_rate}"
        )
