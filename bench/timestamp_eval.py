"""Word-timestamp accuracy: our word starts against offline Whisper's word alignment.

For each sentence, the speech core renders the audio with timestamps (the direct path, the
same code the synthesize stage runs), Whisper-base transcribes that audio with
`word_timestamps=True`, and the two word lists are matched:
- en: by normalized word (lowercase, letters and digits), aligned in order;
- zh, ja, mixed: by character (Whisper's Chinese folded to simplified), aligned in order; a
  pair counts where a character begins a word on both sides.
The error of a pair is |our start − Whisper's start|. Words Whisper heard differently (a
number read out, another kanji) have no pair and are not counted; the match rate says how
many words were compared. Whisper's own alignment is not ground truth: its word starts come
from cross-attention on 20 ms frames and are typically tens of ms off themselves.
"""

from __future__ import annotations

import difflib
import statistics
import time
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from streamtts.bench.asr import Word
from streamtts.bench.speech_eval import EvalSentence, load_sentences
from streamtts.errors import ConfigError
from streamtts.schemas import WordTiming

TIMESTAMP_LANGS = ("zh", "en", "ja", "mixed")


def load_timestamp_sentences(
    path: Path | None = None, langs: Sequence[str] | None = None, per_lang: int | None = None
) -> list[EvalSentence]:
    """`path`, or by default the speech eval set's zh/en/ja/mixed sentences (codes, prices,
    dates) plus 32 plain customer-service sentences (`workloads/timestamp_sentences.jsonl`).

    Raises:
        ConfigError: an unreadable set, or a language without timestamps evaluation.
    """
    wanted = list(langs) if langs else list(TIMESTAMP_LANGS)
    if unknown := set(wanted) - set(TIMESTAMP_LANGS):
        raise ConfigError(f"timestamps are evaluated for {', '.join(TIMESTAMP_LANGS)}, not {sorted(unknown)}")
    if path is not None:
        return load_sentences(path, wanted, per_lang)
    plain = resources.files("streamtts.bench") / "workloads" / "timestamp_sentences.jsonl"
    both = load_sentences(None, wanted) + load_sentences(Path(str(plain)), wanted)
    if per_lang is None:
        return both
    counts: dict[str, int] = {}
    out = []
    for s in both:
        counts[s.lang] = counts.get(s.lang, 0) + 1
        if counts[s.lang] <= per_lang:
            out.append(s)
    return out


@dataclass
class SentenceTiming:
    sentence: EvalSentence
    errors_ms: list[float]
    """Signed: our start − Whisper's start."""
    written_ms: list[float]
    """The same, for words spoken as written only (see `read_out`)."""
    ours: int
    """Words we reported."""
    heard: int
    """Words Whisper reported."""
    align_ms: float
    """CPU time spent timing the words (the cost of timestamps)."""
    audio_ms: float
    transcript: str = ""


@dataclass
class TimestampReport:
    sentences: list[SentenceTiming] = field(default_factory=list)

    def by_lang(self, *, written_only: bool = False) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for lang in TIMESTAMP_LANGS:
            rows = [s for s in self.sentences if s.sentence.lang == lang]
            signed = [e for s in rows for e in (s.written_ms if written_only else s.errors_ms)]
            errors = [abs(e) for e in signed]
            if not rows:
                continue
            ours = sum(s.ours for s in rows)
            out[lang] = {
                "sentences": len(rows),
                "pairs": len(errors),
                "matched": round(len(errors) / ours, 3) if ours else 0.0,
                "median_ms": round(statistics.median(errors), 1) if errors else float("nan"),
                "p90_ms": round(float(np.percentile(errors, 90)), 1) if errors else float("nan"),
                "mean_signed_ms": round(statistics.fmean(signed), 1) if signed else float("nan"),
                "align_ms_per_sentence": round(statistics.median(s.align_ms for s in rows), 2),
                "align_ms_per_audio_s": round(
                    sum(s.align_ms for s in rows) / max(1e-9, sum(s.audio_ms for s in rows) / 1000), 2
                ),
            }
        return out


def _fold_char(ch: str, zh: Callable[[str], str] | None) -> str:
    ch = unicodedata.normalize("NFKC", ch).lower()
    return zh(ch) if zh is not None else ch


def _speakable(ch: str) -> bool:
    return unicodedata.category(ch)[0] in ("L", "N")


def _norm_word(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).lower() if c.isalnum())


def read_out(word: WordTiming) -> bool:
    """A word the front-end rewrote before speaking it (digits, %, $, …): its spoken order can
    differ from the written one ("15%" is spoken "百分之十五"), so its first character's
    start is not comparable with Whisper's, which writes what it heard."""
    return any(c.isdigit() or not (c.isalpha() or c in "'’-") for c in word.text)


def word_start_errors(
    ours: Sequence[WordTiming],
    heard: Sequence[Word],
    lang: str,
    zh: Callable[[str], str] | None = None,
    *,
    written_only: bool = False,
) -> list[float]:
    """Our start − Whisper's start, in ms, for each word both sides agree on (see module);
    `written_only` leaves out words that were read out (see `read_out`)."""
    if lang == "en":
        a = [_norm_word(w.text) for w in ours]
        b = [_norm_word(w.text) for w in heard]
        matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
        return [
            ours[blk.a + k].start_ms - heard[blk.b + k].start_s * 1000.0
            for blk in matcher.get_matching_blocks()
            for k in range(blk.size)
            if a[blk.a + k] and not (written_only and read_out(ours[blk.a + k]))
        ]
    # Character level: (folded char, start if it begins a word).
    ours_chars: list[tuple[str, float | None]] = []
    for w in ours:
        first = not (written_only and read_out(w))
        for ch in w.text:
            if not _speakable(ch):
                continue
            ours_chars.append((_fold_char(ch, zh), w.start_ms if first else None))
            first = False
    heard_chars: list[tuple[str, float | None]] = []
    for hw in heard:
        first = True
        for ch in hw.text:
            if not _speakable(ch):
                continue
            heard_chars.append((_fold_char(ch, zh), hw.start_s * 1000.0 if first else None))
            first = False
    matcher = difflib.SequenceMatcher(
        None, [c for c, _ in ours_chars], [c for c, _ in heard_chars], autojunk=False
    )
    errors: list[float] = []
    for blk in matcher.get_matching_blocks():
        for k in range(blk.size):
            mine, theirs = ours_chars[blk.a + k][1], heard_chars[blk.b + k][1]
            if mine is not None and theirs is not None:
                errors.append(mine - theirs)
    return errors


def run_timestamp_eval(
    sentences: Sequence[EvalSentence],
    synth: Any,
    asr: Any,
    *,
    progress: Callable[[str], None] | None = None,
) -> TimestampReport:
    """Render, transcribe and compare each sentence (see the module docstring)."""
    from streamtts.bench.speech_scoring import _zhconv
    from streamtts.processors.direct import synthesize_text_timed

    zhconv = _zhconv()

    def fold_zh(text: str) -> str:
        return str(zhconv.convert(text, "zh-cn"))

    align_s = [0.0]
    plain = synth.time_words

    def timed_words(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return plain(*args, **kwargs)
        finally:
            align_s[0] += time.perf_counter() - started

    synth.time_words = timed_words  # measure exactly the extra work timestamps cost
    report = TimestampReport()
    try:
        for i, s in enumerate(sentences, 1):
            align_s[0] = 0.0
            hint = None if s.lang == "mixed" else s.lang
            chunks = list(synthesize_text_timed(synth, s.text, lang_hint=hint, voice_id="auto"))
            samples = np.concatenate([c.samples for _, c, _ in chunks])
            rate = chunks[0][1].sample_rate
            words = [w for _, _, ws in chunks for w in ws]
            transcript = asr.transcribe(samples, rate, s.lang, words=True)
            fold = fold_zh if s.lang != "en" else None
            errors = word_start_errors(words, transcript.words, s.lang, fold)
            written = word_start_errors(words, transcript.words, s.lang, fold, written_only=True)
            report.sentences.append(
                SentenceTiming(
                    s,
                    errors,
                    written,
                    len(words),
                    len(transcript.words),
                    align_s[0] * 1000,
                    len(samples) / rate * 1000,
                    transcript.text,
                )
            )
            if progress is not None:
                med = f"{statistics.median(abs(e) for e in errors):.0f} ms" if errors else "–"
                progress(
                    f"[{i}/{len(sentences)}] {s.id} {s.lang}: {len(errors)} words compared, median {med}"
                )
    finally:
        synth.time_words = plain
    return report


def format_timestamp_table(report: TimestampReport, *, written_only: bool = False) -> str:
    rows = report.by_lang(written_only=written_only)
    lines = [
        "lang   sentences  pairs  matched  median ms  P90 ms  bias ms  align ms/sentence  align ms/audio s",
    ]
    for lang, r in rows.items():
        lines.append(
            f"{lang:<6} {r['sentences']:>9} {r['pairs']:>6} {r['matched']:>8.2f} {r['median_ms']:>10.1f}"
            f" {r['p90_ms']:>7.1f} {r['mean_signed_ms']:>8.1f} {r['align_ms_per_sentence']:>18.2f}"
            f" {r['align_ms_per_audio_s']:>17.2f}"
        )
    return "\n".join(lines)


def report_json(report: TimestampReport) -> dict[str, Any]:
    """Summary per language (all words, and words spoken as written) and every sentence."""
    return {
        "by_lang": report.by_lang(),
        "by_lang_written_only": report.by_lang(written_only=True),
        "sentences": [
            {
                "id": s.sentence.id,
                "lang": s.sentence.lang,
                "text": s.sentence.text,
                "whisper": s.transcript,
                "words": s.ours,
                "whisper_words": s.heard,
                "start_errors_ms": [round(e, 1) for e in s.errors_ms],
                "align_ms": round(s.align_ms, 2),
                "audio_ms": round(s.audio_ms, 1),
            }
            for s in report.sentences
        ],
    }
