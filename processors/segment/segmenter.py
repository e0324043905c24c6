"""Public entry of the text front-end: request text → ordered, single-language spans.

Steps: 1. normalize Unicode, 2. split sentences, 3. tag language runs per sentence, 4. verbalize
numbers per run, 5. split clauses and pack them into budget-sized spans (the first span of the
request is kept short so the first audio chunk leaves fast), 6. drop spans with nothing to say.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from streamtts.processors.segment.exceptions import EmptyText, SegmentationError, TextTooLong
from streamtts.processors.segment.langid import normalize_lang_hint, tag_runs
from streamtts.processors.segment.normalize import has_speakable, normalize_text
from streamtts.processors.segment.numbers import verbalize_numbers
from streamtts.processors.segment.splitter import CLAUSE_END, ClauseSplitter

DEFAULT_FIRST_MAX_CHARS = 40
DEFAULT_MAX_CHARS = 150
DEFAULT_MAX_TEXT_CHARS = 20_000

# Silence to add after a span, by how it ends. Engines' own leading/trailing silence is trimmed
# by the synthesizer, so these are the audible pauses.
_SPACES_RE = re.compile(r" {2,}")

PAUSE_CLAUSE_MS = 80
PAUSE_SENTENCE_MS = 200
PAUSE_PARAGRAPH_MS = 400


@dataclass(frozen=True)
class Span:
    """One unit of synthesis: a piece of text in one language that fits one model call."""

    text: str
    """Speakable text (normalized, numbers verbalized), never empty."""
    lang: str
    """zh, en, ja, ko, yue or other (see `processors.segment.langid`)."""
    sentence_index: int
    """0-based index of the sentence the span belongs to (counts sentences with spans)."""
    ends_sentence: bool
    """True for the last span of its sentence."""
    pause_after_ms: int = 0
    """Silence the synthesizer appends after the span's audio."""
    index: int = 0
    """0-based position of the span in the request."""


def segment_text(
    text: str,
    *,
    lang_hint: str | None = None,
    first_max_chars: int = DEFAULT_FIRST_MAX_CHARS,
    max_chars: int = DEFAULT_MAX_CHARS,
    max_text_chars: int = DEFAULT_MAX_TEXT_CHARS,
    strip_markup: bool = True,
    verbalize: bool = True,
) -> list[Span]:
    """Segment request text into spans.

    Args:
        text: request text, any Unicode (lone surrogates and control characters are removed).
        lang_hint: request language (zh, en, ja, ko, yue, BCP-47 variants, or None): decides
            Han characters without kana in their sentence; spans of other scripts keep their
            own language.
        first_max_chars: size limit of the first span (latency of the first audio chunk).
        max_chars: size limit of every other span (CJK characters count double).
        max_text_chars: longest accepted input, counted before normalization.
        strip_markup: remove SSML/HTML-like tags.
        verbalize: rewrite numbers, dates, currency and units into words.
    Returns:
        Spans in speaking order, each with speakable text.
    Raises:
        SegmentationError: empty text, nothing speakable, text too long, or unknown hint.
    """
    if len(text) > max_text_chars:
        raise TextTooLong(f"text has {len(text)} characters; the limit is {max_text_chars}")
    hint = normalize_lang_hint(lang_hint)
    clean = normalize_text(text, strip_markup=strip_markup)
    if not clean:
        raise EmptyText("text is empty")
    if not has_speakable(clean):
        raise SegmentationError("text has nothing speakable (only punctuation, symbols or emoji)")
    splitter = ClauseSplitter(max_chars=max_chars, first_max_chars=first_max_chars)

    spans: list[Span] = []
    sentence_index = 0
    for sentence, ends_paragraph in splitter.sentences(clean):
        pieces = _sentence_pieces(sentence, hint, splitter, first=not spans, verbalize=verbalize)
        if not pieces:
            continue
        for k, (piece, lang) in enumerate(pieces):
            last = k == len(pieces) - 1
            if last:
                pause = PAUSE_PARAGRAPH_MS if ends_paragraph else PAUSE_SENTENCE_MS
            else:
                pause = PAUSE_CLAUSE_MS if piece[-1] in CLAUSE_END else 0
            spans.append(Span(piece, lang, sentence_index, last, pause, len(spans)))
        sentence_index += 1
    if not spans:  # only reachable if every letter sat in stripped markup
        raise SegmentationError("text has nothing speakable after removing markup")
    return spans


def _drop_symbols(text: str) -> str:
    """Emoji and other symbols left after verbalization would be read out as garbage."""
    if text.isascii():
        return text
    kept = "".join(
        " " if unicodedata.category(c) in ("So", "Sk") else c for c in text if c not in "\ufe0e\ufe0f"
    )
    return _SPACES_RE.sub(" ", kept)


def _sentence_pieces(
    sentence: str, hint: str | None, splitter: ClauseSplitter, *, first: bool, verbalize: bool
) -> list[tuple[str, str]]:
    """Pieces (text, lang) of one sentence; `first` makes the first piece short."""
    out: list[tuple[str, str]] = []
    for run in tag_runs(sentence, hint):
        run_text = verbalize_numbers(run.text, run.lang) if verbalize else run.text
        run_text = _drop_symbols(run_text)
        clauses = splitter.clauses(run_text)
        while first and not out and clauses:
            # Streaming first: the first span is the first clause, cut if still too long.
            head, tail = splitter.cut_head(clauses[0].strip(), splitter.first_max_chars)
            clauses = [tail, *clauses[1:]] if tail.strip() else clauses[1:]
            if has_speakable(head):
                out.append((head.strip(), run.lang))
        out.extend((p, run.lang) for p in splitter.pack(clauses) if has_speakable(p))
    return out
