"""`streamtts eval`: is the pipeline's speech as intelligible as the raw model it wraps?

Each sentence of a set is rendered three (or four) ways and transcribed back with offline Whisper:
- **raw**: the model alone — the whole sentence in one call, one voice, the engine's own G2P
  (no segmentation, no number reading): what a user of the bare model would get;
- **core**: the speech core in-process (`processors.direct`: segmentation, voice planning,
  number reading, post-processing), voice "auto";
- **pipeline**: real requests through Kafka (segment → synthesize → encode), voice "auto",
  audio taken from the subscriber's chunks as a listener gets them;
- **streamed** (`--streamed`): the same sentences through the same pipeline as streamed
  utterances, token by token at an LLM's pace (`token_stream.stream_tokens`), cut by the
  segment stage as the text arrives.
Per language it reports the error rate of each (see `speech_scoring`), the clipping ratio and
discontinuities, and for the core path the time to first audio per first-span policy.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from streamtts.bench.asr import WhisperASR
from streamtts.bench.speech_scoring import Score, clipping_ratio, join_clicks, score
from streamtts.errors import ConfigError
from streamtts.schemas.languages import BY_TAG

NEW_NEURAL = ("es", "it", "pt", "de", "fr", "hi")
"""The Kokoro v1.0 languages phonemized by espeak-ng (`schemas.languages`)."""
EVAL_LANGS = ("zh", "en", "ja", "mixed", "ko", *NEW_NEURAL)
# The raw model's voice per sentence language: the voice "auto" would pick for it, so the
# comparison is the same voice with and without the pipeline around it.
RAW_VOICE = {"zh": "jm_kumo", "mixed": "jm_kumo", "en": "en_joe", "ja": "jf_alpha", "ko": "jm_kumo"} | {
    tag: BY_TAG[tag].voice for tag in NEW_NEURAL
}
RAW_G2P_LANG = {"mixed": "zh"}  # the zh G2P phonemizes Latin words itself (espeak)
PIPELINE_RATE = 24_000


@dataclass(frozen=True)
class EvalSentence:
    id: str
    lang: str
    text: str
    expect: str
    """What a listener should hear (defaults to the text)."""


def load_sentences(
    path: Path | None = None, langs: Iterable[str] | None = None, per_lang: int | None = None
) -> list[EvalSentence]:
    """The sentence set (default: the bundled customer-service set).

    Raises:
        ConfigError: unreadable file, a malformed line, or an unknown language.
    """
    try:
        if path is None:
            text = (resources.files("streamtts.bench") / "workloads" / "eval_sentences.jsonl").read_text(
                "utf-8"
            )
        else:
            text = Path(path).read_text("utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read {path}: {err.strerror or err}") from err
    wanted = set(langs) if langs else set(EVAL_LANGS)
    if unknown := wanted - set(EVAL_LANGS):
        raise ConfigError(f"unknown language(s) {sorted(unknown)}; use {', '.join(EVAL_LANGS)}")
    out: list[EvalSentence] = []
    counts: dict[str, int] = {}
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            sentence = EvalSentence(
                str(row["id"]), str(row["lang"]), str(row["text"]), str(row.get("expect") or row["text"])
            )
        except (ValueError, KeyError, TypeError) as err:
            raise ConfigError(f"{path or 'eval set'} line {number}: {err}") from err
        if sentence.lang not in EVAL_LANGS:
            raise ConfigError(f"{path or 'eval set'} line {number}: unknown lang {sentence.lang!r}")
        if sentence.lang not in wanted or (per_lang is not None and counts.get(sentence.lang, 0) >= per_lang):
            continue
        counts[sentence.lang] = counts.get(sentence.lang, 0) + 1
        out.append(sentence)
    if not out:
        raise ConfigError("no sentences selected")
    return out


@dataclass
class Rendering:
    sentence: EvalSentence
    system: str
    samples: np.ndarray
    sample_rate: int
    first_audio_s: float | None = None
    joins: tuple[int, ...] = ()
    """Sample offsets where one chunk (model call or Kafka chunk) ends and the next begins."""
    transcript: str = ""
    score: Score = field(default_factory=lambda: Score(0, 0))


Progress = Callable[[str], None]


def _say(msg: str) -> None:
    print(f"[eval] {msg}", file=sys.stderr, flush=True)


# -- the three systems ------------------------------------------------------------------------


def render_raw(
    registry: Any, sentences: Sequence[EvalSentence], progress: Progress = _say
) -> list[Rendering]:
    """The bare model: one call per sentence, one voice, the engine's own G2P."""
    out = []
    for k, s in enumerate(sentences, 1):
        spec = registry.spec(RAW_VOICE[s.lang])
        engine = registry.engine(spec)
        chunks = list(engine.synthesize(s.text, RAW_G2P_LANG.get(s.lang, s.lang), spec, 1.0))
        samples = np.clip(np.concatenate([c.samples for c in chunks]), -1.0, 1.0)
        joins = tuple(np.cumsum([len(c.samples) for c in chunks])[:-1].tolist())
        out.append(Rendering(s, "raw", samples.astype(np.float32), engine.sample_rate, None, joins))
        progress(f"raw {k}/{len(sentences)}")
    return out


def render_core(
    synthesizer: Any,
    sentences: Sequence[EvalSentence],
    *,
    first_min_chars: int | None = None,
    progress: Progress = _say,
    system: str = "core",
) -> list[Rendering]:
    """The speech core in-process, voice "auto" (one call per span)."""
    from streamtts.processors.direct import synthesize_text
    from streamtts.processors.segment.span_limits import SpanLimits

    limits = SpanLimits() if first_min_chars is None else SpanLimits(first_min_chars=first_min_chars)
    out = []
    for k, s in enumerate(sentences, 1):
        started = time.perf_counter()
        first: float | None = None
        pieces: list[np.ndarray] = []
        rate = PIPELINE_RATE
        for _span, chunk in synthesize_text(
            synthesizer, s.text, voice_id="auto", sample_rate=PIPELINE_RATE, limits=limits
        ):
            if first is None:
                first = time.perf_counter() - started
            pieces.append(chunk.samples)
            rate = chunk.sample_rate
        joins = tuple(np.cumsum([len(p) for p in pieces])[:-1].tolist())
        out.append(Rendering(s, system, np.concatenate(pieces).astype(np.float32), rate, first, joins))
        progress(f"{system} {k}/{len(sentences)}")
    return out


# -- transcription and report -----------------------------------------------------------------


def transcribe(
    asr: WhisperASR,
    renderings: Sequence[Rendering],
    progress: Progress = _say,
    *,
    lead_ms: Sequence[int] = (0,),
) -> None:
    """Transcribe and score each rendering; with several `lead_ms`, once per amount of silence
    put before the audio, edits and units summed over them. Whisper-base's error on the same
    audio moved by ±0.03 with 100–300 ms of leading silence (mixed zh/en, 12 sentences): a
    system that trims its leading silence (the pipeline) and one that keeps it (the raw model)
    differ by that much before any difference in speech; averaging over offsets measures the
    speech, not where Whisper's window starts."""
    for k, r in enumerate(renderings, 1):
        total = Score(0, 0)
        transcripts = []
        for lead in lead_ms:
            pad = np.zeros(int(lead * r.sample_rate / 1000), dtype=np.float32)
            text = asr.transcribe(np.concatenate([pad, r.samples]), r.sample_rate, r.sentence.lang).text
            transcripts.append(text)
            total = total + score(r.sentence.expect, text, r.sentence.lang)
        r.transcript = " | ".join(transcripts)
        r.score = total
        if k % 10 == 0 or k == len(renderings):
            progress(f"transcribed {k}/{len(renderings)}")


@dataclass(frozen=True)
class LangRow:
    lang: str
    n: int
    rate: dict[str, float]
    clipping: dict[str, float]
    join_clicks: dict[str, str]
    """Clicking joins / all joins between chunks."""
    first_audio_p50_s: dict[str, float]


def summarize(renderings: Sequence[Rendering]) -> list[LangRow]:
    systems = list(dict.fromkeys(r.system for r in renderings))
    rows = []
    for lang in [*EVAL_LANGS, "all"]:
        mine = [r for r in renderings if lang in ("all", r.sentence.lang)]
        if not mine:
            continue
        rate: dict[str, float] = {}
        clip: dict[str, float] = {}
        clicks: dict[str, str] = {}
        first: dict[str, float] = {}
        for system in systems:
            rs = [r for r in mine if r.system == system]
            if not rs:
                continue
            total = sum((r.score for r in rs), Score(0, 0))
            rate[system] = round(total.rate, 4)
            clip[system] = round(float(np.mean([clipping_ratio(r.samples) for r in rs])), 6)
            clicks[system] = (
                f"{sum(join_clicks(r.samples, r.joins) for r in rs)}/{sum(len(r.joins) for r in rs)}"
            )
            firsts = [r.first_audio_s for r in rs if r.first_audio_s is not None]
            if firsts:
                first[system] = round(statistics.median(firsts), 3)
        n = len({r.sentence.id for r in mine})
        rows.append(LangRow(lang, n, rate, clip, clicks, first))
    return rows


def _line(first: str, second: str, cells: Iterable[str]) -> str:
    return f"{first:<6} {second:<26} " + " ".join(f"{c:>12}" for c in cells)


STREAMED_WITHIN = 0.02
"""Does a streamed utterance sound as intelligible as the same text sent whole: its error
within this of the whole request's, per language."""


def streamed_deltas(rows: Sequence[LangRow]) -> dict[str, float]:
    """Per language, the streamed system's error minus the whole pipeline's (where both ran)."""
    return {
        row.lang: round(row.rate["streamed"] - row.rate["pipeline"], 4)
        for row in rows
        if "streamed" in row.rate and "pipeline" in row.rate
    }


def streamed_verdict(delta: float) -> str:
    """ "yes" within ±STREAMED_WITHIN; "better" where the streamed utterance was understood
    better than the whole request by more than that (not a regression: report it, and read it
    as noise or as the cut helping); "no" where it was worse."""
    if abs(delta) <= STREAMED_WITHIN:
        return "yes"
    return "better" if delta < 0 else "no"


def format_table(rows: Sequence[LangRow]) -> str:
    systems = list(dict.fromkeys(s for row in rows for s in row.rate))
    lines = [_line("lang", "error rate (n, metric)", systems)]
    for row in rows:
        metric = "WER" if row.lang == "en" else "CER" if row.lang != "all" else "CER/WER"
        lines.append(
            _line(row.lang, f"{row.n} {metric}", (f"{row.rate.get(s, float('nan')):.3f}" for s in systems))
        )
    lines += ["", _line("lang", "clipped samples (ratio)", systems)]
    for row in rows:
        lines.append(_line(row.lang, "", (f"{row.clipping.get(s, float('nan')):.5f}" for s in systems)))
    lines += ["", _line("lang", "clicking joins / joins", systems)]
    for row in rows:
        lines.append(_line(row.lang, "", (row.join_clicks.get(s, "-") for s in systems)))
    if deltas := streamed_deltas(rows):
        lines += ["", _line("lang", "streamed − pipeline", ("Δ error", f"±{STREAMED_WITHIN}"))]
        for lang, delta in deltas.items():
            lines.append(_line(lang, "", (f"{delta:+.3f}", streamed_verdict(delta))))
    timed = [s for s in systems if any(s in row.first_audio_p50_s for row in rows)]
    if timed:
        lines += ["", _line("lang", "first audio p50 (s)", timed)]
        for row in rows:
            lines.append(
                _line(row.lang, "", (f"{row.first_audio_p50_s.get(s, float('nan')):.3f}" for s in timed))
            )
    return "\n".join(lines)


def write_measurements(path: Path, rows: Sequence[LangRow], *, today: str) -> dict[str, dict[str, Any]]:
    """Merge each table language's error into the measurements file the language table reads
    (`schemas.languages.MEASURED_FILE`): the pipeline's where it ran, else the core path's.
    Languages not in this run keep their earlier measurement. Returns what was written."""
    from streamtts.schemas.languages import BY_TAG as TABLE

    try:
        doc = json.loads(path.read_text("utf-8")) if path.exists() else {}
    except (OSError, ValueError) as err:
        raise ConfigError(f"cannot read {path}: {err}") from err
    languages: dict[str, Any] = dict(doc.get("languages", {}))
    written: dict[str, dict[str, Any]] = {}
    for row in rows:
        if row.lang not in TABLE or not row.n:
            continue  # "mixed" and "all" are not table rows
        system = "pipeline" if "pipeline" in row.rate else "core"
        written[row.lang] = {
            "error": round(row.rate[system], 3),
            "system": system,
            "sentences": row.n,
            "voice": RAW_VOICE.get(row.lang, TABLE[row.lang].voice),
            "measured_at": today,
        }
    languages.update(written)
    doc = {
        "about": "Written by `streamtts eval --write-tiers`: Whisper-base character error (en: word "
        "error) per language through the system named, voice auto, no language given. "
        "schemas/languages.py derives the tiers of the espeak-phonemized Kokoro languages from it.",
        "languages": dict(sorted(languages.items())),
    }
    try:
        path.write_text(json.dumps(doc, ensure_ascii=False, indent=1) + "\n", "utf-8")
    except OSError as err:
        raise ConfigError(f"cannot write {path}: {err.strerror or err}") from err
    return written


def report_json(
    rows: Sequence[LangRow], renderings: Sequence[Rendering], *, stream_tokens_per_s: float | None = None
) -> dict[str, Any]:
    streamed = (
        {"streamed_tokens_per_s": stream_tokens_per_s, "streamed_minus_pipeline": streamed_deltas(rows)}
        if stream_tokens_per_s is not None
        else {}
    )
    return {
        "summary": [row.__dict__ for row in rows],
        **streamed,
        "sentences": [
            {
                "id": r.sentence.id,
                "lang": r.sentence.lang,
                "system": r.system,
                "expect": r.sentence.expect,
                "transcript": r.transcript,
                "edits": r.score.edits,
                "units": r.score.units,
                "audio_s": round(len(r.samples) / r.sample_rate, 3),
                "first_audio_s": r.first_audio_s,
            }
            for r in renderings
        ],
    }


# -- one whole run ----------------------------------------------------------------------------


@dataclass(frozen=True)
class EvalPlan:
    sentences: tuple[EvalSentence, ...]
    pipeline: bool = True
    """Also render through Kafka (needs the local stack, started if it is not running)."""
    first_mins: tuple[int, ...] = ()
    """Extra first-span policies for the core path ("core fm=N"), for the latency trade-off."""
    threads: int = 2
    lead_ms: tuple[int, ...] = (0,)
    """Leading silence (ms) each rendering is transcribed with, scores summed (see `transcribe`)."""
    stream_tokens_per_s: float | None = None
    """Also send each sentence through the pipeline as a streamed utterance at this many
    tokens a second (system "streamed"; needs `pipeline`)."""
    stream_delay_ms: int | None = None
    """The streamed utterances' `max_buffer_delay_ms` (None: the contract's default)."""


def run_eval(
    plan: EvalPlan, settings: Any | None = None, progress: Progress = _say
) -> tuple[list[LangRow], list[Rendering]]:
    """Render, transcribe and score `plan.sentences`.

    Args:
        plan: what to run.
        settings: Kafka/S3 settings of a running stack for the pipeline part (None: the
            local default from the environment, started if needed).
    """
    from streamtts.bench.speech_pipeline import pipeline_part
    from streamtts.processors.synthesize.registry import VoiceRegistry
    from streamtts.processors.synthesize.renderer import SegmentRenderer
    from streamtts.processors.synthesize.synthesizer import Synthesizer

    if plan.stream_tokens_per_s is not None and not plan.pipeline:
        raise ConfigError("the streamed system runs through the pipeline: it cannot be skipped")
    sentences = list(plan.sentences)
    progress(f"{len(sentences)} sentences; loading the model and warming the phonemizers")
    registry = VoiceRegistry(threads=plan.threads)
    registry.warm_up(("jm_kumo", "en_joe"), langs=("zh", "en", "ja", "ko"))
    synthesizer = Synthesizer(registry)
    renderings = render_raw(registry, sentences, progress)
    renderings += render_core(synthesizer, sentences, progress=progress)
    for first_min in plan.first_mins:
        renderings += render_core(
            synthesizer,
            sentences,
            first_min_chars=first_min,
            progress=progress,
            system=f"core fm={first_min}",
        )
    if plan.pipeline:
        if settings is None:
            from streamtts.infra.local.stack import LocalStack
            from streamtts.runtime.settings import Settings

            settings = Settings.from_env()
            LocalStack.from_settings(settings).up()
        renderer = SegmentRenderer(synthesizer)
        try:
            renderings += asyncio.run(
                pipeline_part(
                    settings,
                    renderer,
                    sentences,
                    progress,
                    stream_tokens_per_s=plan.stream_tokens_per_s,
                    stream_delay_ms=plan.stream_delay_ms,
                )
            )
        finally:
            renderer.close()
    progress("loading Whisper-base (offline, from its PyPI packages)")
    transcribe(WhisperASR(threads=plan.threads), renderings, progress, lead_ms=plan.lead_ms)
    return summarize(renderings), renderings
