"""Sentence and clause splitting with a size budget per model call."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

from streamtts.processors.segment.cut_words import (
    WORD_LOOKAHEAD,
    cut_kind,
    has_kana,
    is_cjk,
    space_cut,
    splits_no_word,
)
from streamtts.processors.segment.han_words import HanBreaks
from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN
from streamtts.processors.segment.span_limits import (
    DEFAULT_FIRST_MAX_CHARS,
    DEFAULT_FIRST_MIN_CHARS,
    DEFAULT_MAX_CHARS,
)
from streamtts.schemas.languages import CLOSED_STOPS

# "." ends a sentence unless it closes an abbreviation (checked apart), "…" ends a clause.
SENTENCE_END = frozenset(CLOSED_STOPS + "!?\n")
CLAUSE_END = frozenset("，、；：;:,…")
CLOSERS = frozenset("\"'”’」』）)】》〉]")
# Words after which "." does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc e.g i.e inc ltd co no fig approx dept est jan feb mar "
    "apr jun jul aug sep sept oct nov dec mt".split()
)
# A word longer than every abbreviation is none of them (nor an initial): the word before a
# period is looked for this far back at most, so each period costs O(1) (a search from the
# start of the text at every period made "a"*2000 + " ."*500 cubic).
_LONGEST_ABBREVIATION = max(len(a) for a in _ABBREVIATIONS)


# Month names after which "20." is a day's ordinal, not a sentence's end (German, Danish,
# Norwegian and Swedish write the day as "20. Mai"; abbreviations included).
_ORDINAL_MONTHS = frozenset(
    "januar jänner februar märz april mai juni juli august september oktober november dezember "
    "jan feb mär apr jun jul aug sep sept okt nov dez "
    "marts maj december mars desember januari februari augusti".split()
)
_LONGEST_MONTH = max(len(m) for m in _ORDINAL_MONTHS)


def _month_follows(text: str, at: int) -> bool:
    """Whether text[at:] is one space and then a month name (reads at most ~12 characters)."""
    if at >= len(text) or text[at] != " ":
        return False
    end = at + 1
    while end < len(text) and end - at <= _LONGEST_MONTH + 1 and text[end].isalpha():
        end += 1
    return text[at + 1 : end].lower() in _ORDINAL_MONTHS


def _word_char(ch: str) -> bool:
    """What the abbreviation check reads as a word: `[\\w.]` (alphanumerics, "_", ".")."""
    return ch.isalnum() or ch == "_" or ch == "."


def _outside_codes(text: str, start: int, cut: int, max_len: int) -> int:
    """`cut` (counted from `start`) moved to the start of the code it falls in (or past its
    end when the code starts text[start:] and is at most `max_len` long), so a code is never
    read half in one span and half in the next; a code longer than that is cut like any
    text. Looks at most `max(cut, max_len)` characters past `start`."""
    opened = text.rfind(CODE_OPEN, start, start + cut)
    if opened < 0 or text.rfind(CODE_CLOSE, start, start + cut) > opened:
        return cut
    if opened > start:
        return opened - start
    end = text.find(CODE_CLOSE, start + cut, start + max_len)
    return end + 1 - start if end >= 0 else cut


@dataclass(frozen=True)
class ClauseSplitter:
    """Splits normalized text into sentences, sentences into clauses, and packs clauses into
    pieces that fit a per-call budget.

    The budget is counted in "cost" units: a CJK character costs `cjk_weight` (its phoneme
    string is several characters long: Kokoro's 510-phoneme limit is reached at ~100 Han
    characters), any other character costs 1. Since every cost is ≥ 1, a piece within budget
    is also within the same number of characters.
    """

    max_chars: int = DEFAULT_MAX_CHARS
    """Budget of a regular piece."""
    first_max_chars: int = DEFAULT_FIRST_MAX_CHARS
    """Budget of the first piece of a request (keeps time-to-first-audio low)."""
    first_min_chars: int = DEFAULT_FIRST_MIN_CHARS
    """The first piece takes whole clauses until it costs at least this much."""
    cjk_weight: int = 2
    """Cost of one CJK character."""
    given_cost: Callable[[str], int] | None = None
    """Cost of a given-pronunciation placeholder (see `pronunciations`): the length of the
    text it stands for, so a span of them keeps to the budget once they are expanded."""
    han_breaks: Callable[[str], HanBreaks] | None = None
    """Where the words of a text's Han runs end (`han_words.han_breaks`): a cut inside a
    Chinese sentence falls only there, before a clause-opening word where one is near the
    budget. None: between any two Han characters."""

    def __post_init__(self) -> None:
        if self.first_max_chars < 4 or self.max_chars < self.first_max_chars:
            raise ValueError(
                "need 4 <= first_max_chars <= max_chars, got "
                f"first_max_chars={self.first_max_chars}, max_chars={self.max_chars}"
            )
        if self.cjk_weight < 1:
            raise ValueError(
                f"need cjk_weight >= 1 (a piece's cost bounds its length), got {self.cjk_weight}"
            )
        if not 0 <= self.first_min_chars <= self.first_max_chars:
            raise ValueError(
                "need 0 <= first_min_chars <= first_max_chars, got "
                f"first_min_chars={self.first_min_chars}, first_max_chars={self.first_max_chars}"
            )

    def cost(self, text: str) -> int:
        """Budget units used by `text`."""
        return sum(self._unit(c) for c in text)

    def _unit(self, ch: str) -> int:
        if is_cjk(ch):
            return self.cjk_weight
        if self.given_cost is not None and ord(ch) >= 0x100000:
            return max(1, self.given_cost(ch))
        return 1

    # -- sentences ------------------------------------------------------------------------

    def sentences(self, text: str) -> list[tuple[str, bool]]:
        """Split text into sentences.

        Returns:
            (sentence, ends_paragraph) pairs; sentences keep their terminal punctuation and
            closing quotes. Newlines end sentences and paragraphs.
        """
        out: list[tuple[str, bool]] = []
        start, i, n = 0, 0, len(text)
        while i < n:
            ch = text[i]
            if ch in SENTENCE_END or (ch == "." and self._period_ends_sentence(text, i)):
                j = i + 1
                while j < n and (text[j] in SENTENCE_END or text[j] in CLOSERS or text[j] == "."):
                    j += 1
                piece = text[start:j]
                para = "\n" in piece
                if piece.strip():
                    out.append((piece.strip(), para))
                elif para and out:
                    out[-1] = (out[-1][0], True)
                start = i = j
                continue
            i += 1
        if text[start:].strip():
            out.append((text[start:].strip(), True))
        return out

    @staticmethod
    def _period_ends_sentence(text: str, i: int) -> bool:
        nxt = text[i + 1] if i + 1 < len(text) else " "
        if not (nxt.isspace() or nxt in CLOSERS or nxt in SENTENCE_END):
            return False  # 3.14, example.com, e.g.
        # The run of word characters before the period, read back one past the longest
        # abbreviation: a longer run is a plain word.
        start, lo = i, max(0, i - _LONGEST_ABBREVIATION - 1)
        while start > lo and _word_char(text[start - 1]):
            start -= 1
        if start == i or i - start > _LONGEST_ABBREVIATION:
            return True
        word = text[start:i].lower()
        if word in _ABBREVIATIONS:
            return False
        if word.isdigit() and len(word) <= 2 and _month_follows(text, i + 1):
            return False  # a day's ordinal ("zum 20. Mai"): "Mai." alone was a span of its own
        # A single capital letter is an initial ("J. K. Rowling").
        return not (len(word) == 1 and text[start].isupper())

    # -- clauses --------------------------------------------------------------------------

    @staticmethod
    def clauses(sentence: str) -> list[str]:
        """Split a sentence after clause punctuation (，、；：,;:…), keeping it attached."""
        out: list[str] = []
        start, i, n = 0, 0, len(sentence)
        in_code = False
        while i < n:
            if sentence[i] in (CODE_OPEN, CODE_CLOSE):
                in_code = sentence[i] == CODE_OPEN
            elif in_code:
                pass  # the breath between a code's digit groups does not end a clause
            elif sentence[i] in CLAUSE_END or sentence[i] in SENTENCE_END or sentence[i] == ".":
                if sentence[i] in ",." and 0 < i < n - 1 and sentence[i + 1].isdigit():
                    i += 1  # 1,000 / 3.5 left by an unverbalized run
                    continue
                j = i + 1
                while j < n and (sentence[j] in CLAUSE_END or sentence[j] in CLOSERS or sentence[j] in ".!?"):
                    j += 1
                if sentence[i] == "." and j < n and not sentence[j].isspace():
                    i = j
                    continue
                out.append(sentence[start:j])
                start = i = j
                continue
            i += 1
        if start < n:
            out.append(sentence[start:])
        return [c for c in out if c.strip()]

    # -- budget ---------------------------------------------------------------------------

    def _fits(self, text: str, budget: int) -> bool:
        """cost(text) <= budget, reading at most `budget` characters (every cost is >= 1)."""
        return len(text) <= budget and self.cost(text) <= budget

    def cut_head(self, text: str, budget: int) -> tuple[str, str]:
        """Cut `text` into (head, tail) with cost(head) <= budget.

        Prefers the last space inside the budget (for Latin text); cuts at any character
        otherwise (CJK, or one very long word), never inside a combining sequence.
        """
        cut = self._cut(text, 0, budget)
        return (text, "") if cut is None else (text[:cut], text[cut:])

    def _cut(self, text: str, start: int, budget: int) -> int | None:
        """Where `cut_head(text[start:], budget)` cuts (an index into `text`), or None when
        text[start:] fits the budget. Reads about `budget` characters from `start`, never
        the whole rest: a long text is cut in one pass, not once per piece."""
        limit = None
        used = 0
        for k in range(start, len(text)):
            used += self._unit(text[k])
            if used > budget:
                limit = k - start
                break
        if limit is None:
            return None
        limit = max(limit, 1)
        cut = space_cut(text[start : start + limit + WORD_LOOKAHEAD], limit)
        if cut is None:
            cut = self._word_cut(text, start, limit)
        return start + _outside_codes(text, start, cut, budget * 3 // 2)

    def _word_cut(self, text: str, start: int, limit: int) -> int:
        """The best cut in (limit // 3, limit] (counted from `start`) that splits no word:
        not inside a Latin or digit word ("bil|ling" was read as three Chinese syllables),
        not inside a Chinese word where `han_breaks` says where they end, never inside a
        combining sequence. Best is before a clause-opening word in the budget's second half,
        then the latest of the best kind (`cut_kind`). Where every place splits a word (a very
        long word): `limit`, moved off a combining sequence. Reads `limit` + `WORD_LOOKAHEAD`
        characters."""
        window = text[start : start + limit + WORD_LOOKAHEAD]
        breaks = self.han_breaks(window) if self.han_breaks is not None else None
        best: tuple[int, int] | None = None  # (kind, cut): lower kind is better
        # jieba's words are Chinese ones: in Japanese text a cut after a particle is better.
        kana = has_kana(window)
        for cut in range(limit, limit // 3, -1):
            if not splits_no_word(window, cut, breaks):
                continue
            if breaks is not None and cut in breaks.openers and cut > limit // 2:
                return cut
            kind = cut_kind(window[cut - 1], window[cut], kana)
            if best is None or kind < best[0]:
                best = (kind, cut)
        if best is not None:
            return best[1]
        cut = limit
        while cut > 1 and unicodedata.combining(text[start + cut]):
            cut -= 1
        return cut

    def first_piece(self, clauses: list[str]) -> tuple[str, list[str]]:
        """The first piece of a request and the clauses left after it.

        Whole clauses are taken until the piece costs at least `first_min_chars`, as long as
        they fit `first_max_chars`: a clause boundary keeps the prosody a fragment loses. If
        the rest of the sentence would then be a fragment itself (under twice that), the whole
        sentence is taken when it fits 1.5 × `first_max_chars` (and `max_chars`). A first
        clause over the budget is cut (at a space where there is one).
        """
        left = list(clauses)
        head, k = self.first_piece_at(left, 0)
        return head, left[k:]

    def first_piece_at(self, clauses: list[str], start: int) -> tuple[str, int]:
        """`first_piece` of clauses[start:], in place: returns the piece and the index of the
        clauses left after it; a clause cut in two leaves its tail in its own slot. Reads
        only the clauses it takes (and a bounded look at the next ones), so calling it again
        on what is left costs no rescans."""
        head, k = clauses[start], start + 1
        while (
            k < len(clauses)
            and self._fits(head.strip(), self.first_min_chars - 1)
            and self._fits((head + clauses[k]).strip(), self.first_max_chars)
        ):
            head, k = head + clauses[k], k + 1
        tail = _joined_if_shorter(clauses, k, 2 * self.first_min_chars)
        whole_budget = min(self.first_max_chars * 3 // 2, self.max_chars)
        if (
            tail is not None
            and self._fits(tail[0], 2 * self.first_min_chars - 1)
            and self._fits((head + tail[1]).strip(), whole_budget)
        ):
            # What is left of the sentence would be a fragment too ("…，请妥善保管。" spoken
            # alone came back garbled): the sentence goes whole, up to 1.5 × the budget.
            return (head + tail[1]).strip(), len(clauses)
        whole = head.strip()
        head, rest = self.cut_head(whole, self.first_max_chars)
        if rest.strip():
            after = _joined_within(clauses, k, whole_budget)
            if after is not None and self._fits((whole + after).strip(), whole_budget):
                # A cut inside a clause leaves fragments on both sides ("…kann nicht mehr |
                # geändert werden." moved the stress and lost the sentence's fall): a
                # sentence within 1.5 × the budget goes whole, as it does past a clause.
                return (whole + after).strip(), len(clauses)
            k -= 1
            clauses[k] = rest
        return head, k

    def pack(self, clauses: list[str], budget: int | None = None) -> list[str]:
        """Merge consecutive clauses into pieces of cost <= budget; cut clauses that are longer.

        Args:
            clauses: clause texts in order (of one sentence and one language).
            budget: piece budget; defaults to `max_chars`.
        Returns:
            Stripped, non-empty pieces whose concatenation (ignoring whitespace at the
            joins) is the concatenation of `clauses`.
        """
        budget = self.max_chars if budget is None else budget
        pieces: list[str] = []
        current, current_cost = "", 0  # cost(current), kept so no piece is costed twice
        for clause in clauses:
            clause_cost = self.cost(clause)
            candidate = current + clause
            # Stripped whitespace costs 1 a character.
            if current_cost + clause_cost - (len(candidate) - len(candidate.strip())) <= budget:
                current, current_cost = candidate, current_cost + clause_cost
                continue
            if current.strip():
                pieces.append(current.strip())
            current, current_cost = clause, clause_cost
            text, at, rest = clause.strip(), 0, 0  # cut in one pass: each piece is read once
            while (cut := self._cut(text, at, budget)) is not None:
                pieces.append(text[at:cut].strip())
                at = rest = cut
                while at < len(text) and text[at].isspace():
                    at += 1
            if rest:
                current = text[rest:]
                current_cost = self.cost(current)
        if current.strip():
            pieces.append(current.strip())
        return [p for p in pieces if p]


def _joined_within(parts: list[str], start: int, limit: int) -> str | None:
    """ "".join(parts[start:]) when it is at most `limit` characters long, else None; joins
    only as many parts as it takes to know."""
    joined = ""
    for k in range(start, len(parts)):
        joined += parts[k]
        if len(joined) > limit:
            return None
    return joined


def _joined_if_shorter(parts: list[str], start: int, limit: int) -> tuple[str, str] | None:
    """("".join(parts[start:]).strip(), "".join(parts[start:])) when the stripped join is
    non-empty and shorter than `limit` characters, else None; joins only as many parts as
    it takes to know (a stripped join only grows as parts are added)."""
    joined = ""
    for k in range(start, len(parts)):
        joined += parts[k]
        if len(joined.strip()) >= limit:
            return None
    stripped = joined.strip()
    return (stripped, joined) if stripped else None
