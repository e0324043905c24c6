"""Word timestamps of one span: phoneme durations → words → characters of the request text.

1. `phoneme_times`: the engine's per-phoneme sample bounds (see `durations`) of each chunk,
   after trimming and resampling, placed on the span's phoneme string.
2. `word_units`: the span's words with their character ranges, per run language (zh: jieba
   words, ja: OpenJTalk morphemes, others: letters/digits between spaces).
3. `assign_phonemes`: which word each phoneme character voices. The span was phonemized as a
   whole (context changes phonemes: espeak speaks "of the" as one "ʌvðə", zh tone sandhi), so
   each word is phonemized once more on its own, only as a label, and the labels are aligned
   to the real phoneme string; the audio is never rendered from the labels.
4. `span_words`: start/end of each word in ms from the span's audio start, and its character
   range in the request text through the segment's text map.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from streamtts.processors.synthesize.engine import AudioChunk
from streamtts.schemas import WordTiming
from streamtts.schemas.segment import TextBlock, text_map_range

_WORD_RE = re.compile(r"[\w'’\-]*\w", re.UNICODE)
_HAN_RE = re.compile(r"[\u3007\u3400-\u9fff\uf900-\ufaff\U00020000-\U0003134f]+")
_LATIN_RE = re.compile(r"[A-Za-z][A-Za-z'\-]*|\d+")
_SILENT = frozenset(" .,!?;:—…\"'«»“”()-")

Tokenizer = Callable[[str, str], list[tuple[int, int]]]
"""(text, lang) → [start, end) of each word in `text`."""


# An SSML tag (plain text like "a < b" is not one: no letter right after the "<").
_TAG_RE = re.compile(r"</?[A-Za-z!?][^<>]*>?")


@dataclass(frozen=True)
class SpanWord:
    """One word of a span: its time in the span's audio and its place in the request text."""

    start_ms: float
    end_ms: float
    char_start: int
    char_end: int


def phoneme_times(phonemes: str, chunks: Sequence[AudioChunk]) -> np.ndarray | None:
    """(len(phonemes), 2) float ms of each phoneme character from the span's audio start, or
    None when a chunk has no bounds. Chunks are the post-processed pieces of the span, each
    voicing a piece of `phonemes` (Kokoro splits long strings at spaces)."""
    times = np.zeros((len(phonemes), 2), dtype=np.float64)
    offset = 0
    cursor = 0
    for chunk in chunks:
        if chunk.bounds is None:
            return None
        ms = 1000.0 / chunk.sample_rate
        for k, ch in enumerate(chunk.phonemes):
            # Pieces are the string in order with some separators dropped.
            while cursor < len(phonemes) and phonemes[cursor] != ch:
                times[cursor] = (offset + chunk.bounds[k, 0]) * ms
                times[cursor, 1] = times[cursor, 0]
                cursor += 1
            if cursor >= len(phonemes):
                break
            times[cursor] = (offset + chunk.bounds[k]) * ms
            cursor += 1
        offset += len(chunk.samples)
    if cursor < len(phonemes):
        times[cursor:] = offset * 1000.0 / chunks[-1].sample_rate if chunks else 0.0
    return times


def word_units(
    text: str,
    lang: str,
    zh_words: Callable[[str], list[str]] | None = None,
    ja_words: Callable[[str], list[str]] | None = None,
) -> list[tuple[int, int]]:
    """[start, end) of each word of `text` in language `lang`."""
    if lang in ("zh", "yue") and zh_words is not None:
        out: list[tuple[int, int]] = []
        for m in _HAN_RE.finditer(text):
            at = m.start()
            for word in zh_words(m.group()):
                out.append((at, at + len(word)))
                at += len(word)
        out.extend(m.span() for m in _LATIN_RE.finditer(text))
        return sorted(out)
    if lang == "ja" and ja_words is not None:
        out, at = [], 0
        for word in ja_words(text):
            found = text.find(word, at)
            if found < 0 or not any(c.isalnum() for c in word):
                continue
            out.append((found, found + len(word)))
            at = found + len(word)
        return out
    return [m.span() for m in _WORD_RE.finditer(text)]


def assign_phonemes(phonemes: str, labels: Sequence[str]) -> list[int]:
    """For each character of `phonemes`, the index of the word that voices it (-1: a space or
    punctuation). `labels[i]` is word i phonemized on its own."""
    owners_l: list[int] = []
    joined: list[str] = []
    for i, label in enumerate(labels):
        if joined:
            joined.append(" ")
            owners_l.append(-1)
        joined.append(label)
        owners_l.extend([i] * len(label))
    label_text = "".join(joined)
    owner = [-1] * len(phonemes)
    matcher = difflib.SequenceMatcher(None, label_text, phonemes, autojunk=False)
    for block in matcher.get_matching_blocks():
        for k in range(block.size):
            owner[block.b + k] = owners_l[block.a + k]
    # What the labels did not match (context changed it) belongs to the words around it:
    # inside a space-separated group, to the group's own words; a group with none of its
    # own (espeak's "ɐ" for the label "eɪ") to the first word between its neighbours' words.
    groups = [m.span() for m in re.finditer(r"[^ ]+", phonemes)]
    for a, b in groups:
        voiced = [j for j in range(a, b) if phonemes[j] not in _SILENT]
        owned = [j for j in voiced if owner[j] >= 0]
        if owned:
            current = owner[owned[0]]
            for j in voiced:
                current = owner[j] if owner[j] >= 0 else current
                owner[j] = current
            continue
        if not voiced:
            continue
        before = max((o for o in owner[:a] if o >= 0), default=-1)
        after = min((o for o in owner[b:] if o >= 0), default=len(labels))
        pick = before + 1 if after - before > 1 else (before if before >= 0 else after)
        if 0 <= pick < len(labels):
            for j in voiced:
                owner[j] = pick
    for j, ch in enumerate(phonemes):
        if ch in _SILENT:
            owner[j] = -1
    # Keep words in order: a label matched out of place cannot move a word backwards.
    high = -1
    for j, o in enumerate(owner):
        if o >= 0:
            if o < high:
                owner[j] = high
            high = max(high, owner[j])
    return owner


def _word_break(phonemes: str, j: int) -> bool:
    """A space between two words in running speech (not the pause after punctuation)."""
    if not 0 < j < len(phonemes) - 1 or phonemes[j] != " ":
        return False
    return phonemes[j - 1] not in _SILENT and phonemes[j + 1] not in _SILENT


def span_words(
    units: Sequence[tuple[int, int]],
    owners: Sequence[int],
    times: np.ndarray,
    text_map: list[TextBlock] | None,
    phonemes: str = "",
) -> list[SpanWord]:
    """Timed words of a span: each unit's time from the phonemes it owns (a unit that owns
    none sits at the end of the one before), mapped to request-text characters. Units that
    map to the same characters (a number read as several words) are one word.

    A word break between two words is shared: the space token's frames are half the end of
    the word before and half the start of the next (speech runs on across a word break, as
    Kokoro's own timestamps split it); a pause after punctuation stays a pause."""
    n = len(units)
    starts = [float("inf")] * n
    ends = [-1.0] * n
    for j, o in enumerate(owners):
        if 0 <= o < n:
            start, end = float(times[j, 0]), float(times[j, 1])
            if _word_break(phonemes, j - 1):
                start = (float(times[j - 1, 0]) + float(times[j - 1, 1])) / 2
            if _word_break(phonemes, j + 1):
                end = (float(times[j + 1, 0]) + float(times[j + 1, 1])) / 2
            starts[o] = min(starts[o], start)
            ends[o] = max(ends[o], end)
    out: list[SpanWord] = []
    previous_end = 0.0
    for i, (a, b) in enumerate(units):
        if ends[i] < 0:
            start = end = previous_end
        else:
            start, end = max(starts[i], previous_end), max(ends[i], previous_end)
        previous_end = end
        cs, ce = text_map_range(text_map, a, b) if text_map else (a, b)
        if out and (cs, ce) == (out[-1].char_start, out[-1].char_end):
            out[-1] = SpanWord(out[-1].start_ms, end, cs, ce)
        elif out and cs < out[-1].char_end:  # overlapping sources: widen the previous word
            out[-1] = SpanWord(out[-1].start_ms, end, out[-1].char_start, max(ce, out[-1].char_end))
        else:
            out.append(SpanWord(start, end, cs, ce))
    return out


def contract_words(
    words: Sequence[SpanWord], source: str, base: int, end: int, offset_ms: float
) -> list[WordTiming]:
    """Span words → contract words: times `offset_ms` later, text as the request wrote it.

    Args:
        source: request text from character `base` on (at least up to `end`).
        end: where the span ends in the request text (the last word's trailing stops there).
    """
    out: list[WordTiming] = []
    for i, w in enumerate(words):
        upto = (words[i + 1].char_start if i + 1 < len(words) else end) - base
        between = source[w.char_end - base : max(w.char_end - base, upto)]
        if "<" in between:  # SSML: the tags between two words are not what a caption shows
            between = _TAG_RE.sub("", between)
        out.append(
            WordTiming(
                text=source[w.char_start - base : w.char_end - base][:2000],  # the contract's bound
                start_ms=round(offset_ms + w.start_ms, 1),
                end_ms=round(offset_ms + w.end_ms, 1),
                char_start=w.char_start,
                char_end=w.char_end,
                trailing=between[:16],
            )
        )
    return out
