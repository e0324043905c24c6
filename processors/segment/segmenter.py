"""Public entry of the text front-end: request text → ordered spans, each tagged with its
language runs.

Steps: 1. normalize Unicode, 2. split sentences, 3. tag language runs per sentence, 4. verbalize
numbers per run, 5. split clauses and pack them into budget-sized spans (the first span of the
request is a short clause so the first audio chunk leaves fast), 6. drop spans with nothing to say.

A span may hold runs of several languages ("请在App里打开您的account设置。" is one span with
zh/en/zh/en/zh runs): one voice speaks it in one model call, which keeps the speaker and the
prosody of the sentence, while each run is phonemized by its own language's G2P. Only runs of
scripts no engine speaks ("other") are kept apart, so they can degrade on their own.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from streamtts.processors.segment.exceptions import (
    EmptyText,
    SegmentationError,
    UnsupportedLanguage,
)
from streamtts.processors.segment.han_words import han_breaks
from streamtts.processors.segment.langid import Run, normalize_lang_hint, tag_runs, text_language
from streamtts.processors.segment.lexicon import LexiconMatcher
from streamtts.processors.segment.normalize import has_speakable, normalize_mapped
from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN
from streamtts.processors.segment.numbers import verbalize_numbers
from streamtts.processors.segment.plan_budget import PlanDeadline
from streamtts.processors.segment.pronunciations import GivenTable, blank_placeholders, is_placeholder
from streamtts.processors.segment.span_limits import DEFAULT_LIMITS, SpanLimits
from streamtts.processors.segment.splitter import CLAUSE_END, ClauseSplitter
from streamtts.processors.segment.spoken_budget import SpokenBudget
from streamtts.processors.segment.text_map import MappedText

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
    """zh, en, ja, ko, yue, other (see `processors.segment.langid`), or mixed (see `runs`)."""
    sentence_index: int
    """0-based index of the sentence the span belongs to (counts sentences with spans)."""
    ends_sentence: bool
    """True for the last span of its sentence."""
    pause_after_ms: int = 0
    """Silence the synthesizer appends after the span's audio."""
    index: int = 0
    """0-based position of the span in the request."""
    runs: tuple[Run, ...] = ()
    """Language runs whose texts concatenate to `text` (one run unless `lang` is mixed)."""
    source: MappedText | None = None
    """`text` with, per character, the range of the request text it stands for."""

    @property
    def langs(self) -> frozenset[str]:
        """Every language a voice must speak to say this span."""
        return frozenset(r.lang for r in self.runs) or frozenset({self.lang})


def segment_text(
    text: str,
    *,
    lang_hint: str | None = None,
    limits: SpanLimits = DEFAULT_LIMITS,
    strip_markup: bool = True,
    verbalize: bool = True,
    mapped: bool = False,
    lexicon: LexiconMatcher | None = None,
    given: GivenTable | None = None,
    first: bool = True,
    spoken: SpokenBudget | None = None,
    deadline: PlanDeadline | None = None,
) -> list[Span]:
    """Segment request text into spans.

    Args:
        text: request text, any Unicode (lone surrogates and control characters are removed).
        lang_hint: request language (zh, en, ja, ko, yue, BCP-47 variants, or None): decides
            Han characters without kana in their sentence; spans of other scripts keep their
            own language.
        limits: span and text sizes (see `SpanLimits`); `first_min_chars` is capped at
            `first_max_chars`.
        strip_markup: remove SSML/HTML-like tags.
        verbalize: rewrite numbers, dates, currency and units into words.
        mapped: keep, per span character, where it came from in `text` (`Span.source`, for
            word timestamps); off, spans have no source and nothing is aligned.
        lexicon: the tenant's lexicon, applied per sentence before numbers are read.
        given: pronunciations `text` already holds placeholders for (an SSML document's
            phonemes); lexicon phonemes are added to it. None: a fresh table (any
            placeholder in `text` is then forged and removed).
        first: the first span gets the short first-span budget (False for a later block
            of an SSML document).
        spoken: what the request may still say, spent span by span (None: a budget for
            `text` alone, see `spoken_budget`); checked after the lexicon too, so an
            expansion past it stops there.
        deadline: checked before each sentence (see `plan_budget`).
    Returns:
        Spans in speaking order, each with speakable text.
    Raises:
        SegmentationError: empty text, nothing speakable, text too long (as written, or
            as said: ExpandedTooLong), unknown hint, or past the deadline (TooCostly).
    """
    limits.check_length(text)
    if spoken is None:
        spoken = SpokenBudget.for_text(len(text), limits.max_text_chars)
    hint = normalize_lang_hint(lang_hint)
    if given is None:
        given = GivenTable()
        text = blank_placeholders(text)
    clean = normalize_mapped(text, strip_markup=strip_markup, tracked=mapped)
    if not clean.text:
        raise EmptyText("text is empty")
    if not has_speakable(clean.text):
        raise SegmentationError("text has nothing speakable (only punctuation, symbols or emoji)")
    # The request text's own language: the default of a sentence too short to identify.
    default = text_language(clean.text) if hint is None else None
    table = given
    splitter = ClauseSplitter(
        max_chars=limits.max_chars,
        first_max_chars=limits.first_max_chars,
        first_min_chars=max(0, min(limits.first_min_chars, limits.first_max_chars)),
        given_cost=lambda ch: len(table.display(ch)),
        han_breaks=han_breaks,
    )

    spans: list[Span] = []
    sentence_index = 0
    cursor = 0
    for sentence_text, ends_paragraph in splitter.sentences(clean.text):
        if deadline is not None:
            deadline.check(cursor)
        sentence = clean.find(sentence_text, cursor)
        if sentence is None:  # unreachable: sentences are stripped substrings, in order
            sentence = MappedText.of(sentence_text, tracked=False)
        else:
            cursor = clean.text.find(sentence_text, cursor) + len(sentence_text)
        if lexicon:
            sentence = _with_lexicon(sentence, hint, lexicon, given, spoken, default)
        pieces = _sentence_pieces(
            sentence,
            hint,
            splitter,
            first=first and not spans,
            verbalize=verbalize,
            given=given,
            default=default,
        )
        if not pieces:
            continue
        for k, (raw_runs, piece_map) in enumerate(pieces):
            # Codes were kept whole between markers (see `number_context`).
            marked = tuple(Run(_unmark(r.text), r.lang) for r in raw_runs if _unmark(r.text))
            piece_runs = _expand_given(marked, given)
            if not piece_runs:
                continue
            piece = "".join(r.text for r in piece_runs)
            spoken.spend(len(piece))
            source = piece_map.without(CODE_OPEN + CODE_CLOSE).map_chars(given.display)
            last = k == len(pieces) - 1
            if last:
                pause = PAUSE_PARAGRAPH_MS if ends_paragraph else PAUSE_SENTENCE_MS
            else:
                pause = PAUSE_CLAUSE_MS if piece[-1] in CLAUSE_END else 0
            langs = {r.lang for r in piece_runs}
            lang = piece_runs[0].lang if len(langs) == 1 else "mixed"
            kept = source if source.tracked else None
            spans.append(Span(piece, lang, sentence_index, last, pause, len(spans), piece_runs, kept))
        sentence_index += 1
    if not spans:  # only reachable if every letter sat in stripped markup
        raise SegmentationError("text has nothing speakable after removing markup")
    if all(s.lang == "other" for s in spans):
        raise UnsupportedLanguage(
            "no voice speaks the language of this text (not even espeak-ng); see `streamtts voices`"
        )
    return spans


def _with_lexicon(
    sentence: MappedText,
    hint: str | None,
    lexicon: LexiconMatcher,
    given: GivenTable,
    spoken: SpokenBudget,
    default: str | None = None,
) -> MappedText:
    """The sentence with the lexicon applied; an entry applies where the front-end reads
    its grapheme in the entry's language. Raises ExpandedTooLong as soon as the sentence
    grows past what the request may still say."""
    langs: list[str] = []
    for run in tag_runs(sentence.text, hint, default):
        langs.extend([run.lang] * len(run.text))
    out = lexicon.apply(
        sentence, lambda i: langs[i] if i < len(langs) else "other", given, max_chars=spoken.left
    )
    if out is None:
        raise spoken.exceeded()
    return out


# A stand-in of each language's script for a placeholder while runs are tagged: a given
# pronunciation belongs to the run of its own language (a neutral character would join the
# run beside it, e.g. a Cyrillic one no voice speaks).
_PROXY = {"zh": "中", "yue": "中", "ja": "ア", "ko": "한", "en": "a"}


def _tag(text: str, hint: str | None, given: GivenTable | None, default: str | None = None) -> list[Run]:
    if not given or not any(is_placeholder(c) for c in text):
        return tag_runs(text, hint, default)
    proxy = "".join(_proxy(c, given) for c in text)
    out: list[Run] = []
    at = 0
    for run in tag_runs(proxy, hint, default):
        out.append(Run(text[at : at + len(run.text)], run.lang))
        at += len(run.text)
    return out


def _proxy(ch: str, given: GivenTable) -> str:
    found = given.get(ch) if is_placeholder(ch) else None
    return _PROXY.get(found.lang or "", ch) if found is not None else ch


def _expand_given(runs: tuple[Run, ...], given: GivenTable) -> tuple[Run, ...]:
    """Each placeholder → a run of its own, with its IPA and its written text."""
    if not any(is_placeholder(c) for r in runs for c in r.text):
        return runs
    out: list[Run] = []

    def plain(text: str, lang: str) -> None:
        if out and out[-1].phonemes is None and out[-1].lang == lang:
            out[-1] = Run(out[-1].text + text, lang)
        elif out and not has_speakable(text) and text.strip() == "":
            out[-1] = Run(out[-1].text + text, out[-1].lang, out[-1].phonemes)
        else:
            out.append(Run(text, lang))

    for run in runs:
        buf = ""
        for ch in run.text:
            if not is_placeholder(ch):
                buf += ch
                continue
            found = given.get(ch)
            if found is None:  # forged: text cannot hold placeholders of its own
                continue
            if buf:
                plain(buf, run.lang)
                buf = ""
            out.append(Run(found.text, found.lang or run.lang, found.ipa))
        if buf:
            plain(buf, run.lang)
    return tuple(out)


def _unmark(text: str) -> str:
    return text.replace(CODE_OPEN, "").replace(CODE_CLOSE, "")


def _drop_symbols(text: str) -> str:
    """Emoji and other symbols left after verbalization would be read out as garbage."""
    if text.isascii():
        return text
    kept = "".join(
        " " if unicodedata.category(c) in ("So", "Sk") else c for c in text if c not in "\ufe0e\ufe0f"
    )
    return _SPACES_RE.sub(" ", kept)


def _sentence_pieces(
    sentence: MappedText,
    hint: str | None,
    splitter: ClauseSplitter,
    *,
    first: bool,
    verbalize: bool,
    given: GivenTable | None = None,
    default: str | None = None,
) -> list[tuple[tuple[Run, ...], MappedText]]:
    """Pieces of one sentence, each as its runs and its mapped text; `first` makes the first
    piece a short clause."""
    runs: list[Run] = []
    mapped_runs: list[MappedText] = []
    before = ""
    pos = 0
    for run in _tag(sentence.text, hint, given, default):
        found = sentence.find(run.text, pos)
        if found is None:  # unreachable: runs partition the sentence; map to all of it
            a, b = sentence.source_range(0, len(sentence))
            source = MappedText(run.text, (a,) * len(run.text), (b,) * len(run.text))
            if not sentence.tracked:
                source = MappedText.of(run.text, tracked=False)
        else:
            source = found
            pos = sentence.text.find(run.text, pos) + len(run.text)
        text = verbalize_numbers(run.text, run.lang, before) if verbalize else run.text
        before += run.text
        text = _drop_symbols(text)
        mapped = source.rewritten(text)
        if runs and runs[-1].lang == run.lang:
            runs[-1] = Run(runs[-1].text + text, run.lang)
            mapped_runs[-1] = mapped_runs[-1] + mapped
        elif text:
            runs.append(Run(text, run.lang))
            mapped_runs.append(mapped)
    out: list[tuple[tuple[Run, ...], MappedText]] = []
    for group, mapped_group in _speakable_groups(runs, mapped_runs):
        text = "".join(r.text for r in group)
        group_map = MappedText.join(mapped_group)
        langs = [r.lang for r in group for _ in r.text]
        clauses = splitter.clauses(text)
        pieces: list[str] = []
        at, spoken = 0, False
        while first and not out and at < len(clauses) and not spoken:
            # The first *speakable* piece gets the first-span budget (a leading "," does not).
            head, at = splitter.first_piece_at(clauses, at)
            pieces.append(head)
            spoken = has_speakable(head)
        pieces.extend(splitter.pack(clauses[at:]))
        pos = 0
        for piece in pieces:
            piece = piece.strip()
            if not has_speakable(piece):
                continue
            start = text.find(piece, pos)
            if start < 0:  # unreachable: pieces are substrings in order; keep one language
                a, b = group_map.source_range(0, len(group_map))
                out.append(
                    (
                        (Run(piece, group[0].lang),),
                        MappedText(piece, (a,) * len(piece), (b,) * len(piece))
                        if group_map.tracked
                        else MappedText.of(piece, tracked=False),
                    )
                )
                continue
            pos = start + len(piece)
            out.append((_runs_of(piece, langs[start:pos]), group_map.slice(start, pos)))
    return out


def _speakable_groups(runs: list[Run], mapped: list[MappedText]) -> list[tuple[list[Run], list[MappedText]]]:
    """Consecutive runs that one voice may speak together; each "other" run stands alone."""
    groups: list[tuple[list[Run], list[MappedText]]] = []
    for run, m in zip(runs, mapped, strict=True):
        if groups and run.lang != "other" and groups[-1][0][-1].lang != "other":
            groups[-1][0].append(run)
            groups[-1][1].append(m)
        else:
            groups.append(([run], [m]))
    return groups


def _runs_of(piece: str, langs: list[str]) -> tuple[Run, ...]:
    """Split a piece into runs by its characters' languages; a run with nothing to say (a
    comma, a space) joins its neighbour so no G2P call gets bare punctuation."""
    runs: list[Run] = []
    for ch, lang in zip(piece, langs, strict=True):
        if runs and runs[-1].lang == lang:
            runs[-1] = Run(runs[-1].text + ch, lang)
        else:
            runs.append(Run(ch, lang))
    merged: list[Run] = []
    for run in runs:
        if merged and (not has_speakable(run.text) or not has_speakable(merged[-1].text)):
            lang = merged[-1].lang if has_speakable(merged[-1].text) else run.lang
            merged[-1] = Run(merged[-1].text + run.text, lang)
        elif merged and merged[-1].lang == run.lang:
            merged[-1] = Run(merged[-1].text + run.text, run.lang)
        else:
            merged.append(run)
    return tuple(merged)
