"""Sentence and clause splitting with a size budget per model call."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass

SENTENCE_END = frozenset("。！？!?\n")
CLAUSE_END = frozenset("，、；：;:,…")
CLOSERS = frozenset("\"'”’」』）)】》〉]")
# Words after which "." does not end a sentence.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof st sr jr vs etc e.g i.e inc ltd co no fig approx dept est jan feb mar "
    "apr jun jul aug sep sept oct nov dec mt".split()
)
_WORD_BEFORE_RE = re.compile(r"([\w.]+)$")


def _is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x3040 <= cp <= 0x30FF
        or 0x3400 <= cp <= 0x9FFF
        or 0xAC00 <= cp <= 0xD7AF
        or 0xF900 <= cp <= 0xFAFF
        or 0x20000 <= cp <= 0x3134F
    )


# Marks around a code's digit words (see `number_context`): a cut never falls between them.
_CODE_OPEN, _CODE_CLOSE = "\ue000", "\ue001"


def _outside_codes(text: str, cut: int, max_len: int) -> int:
    """`cut` moved to the start of the code it falls in (or past its end when the code starts
    the text and is at most `max_len` long), so a code is never read half in one span and
    half in the next; a code longer than that is cut like any text."""
    start = text.rfind(_CODE_OPEN, 0, cut)
    if start < 0 or text.rfind(_CODE_CLOSE, 0, cut) > start:
        return cut
    if start > 0:
        return start
    end = text.find(_CODE_CLOSE, cut)
    return end + 1 if 0 <= end < max_len else cut


@dataclass(frozen=True)
class ClauseSplitter:
    """Splits normalized text into sentences, sentences into clauses, and packs clauses into
    pieces that fit a per-call budget.

    The budget is counted in "cost" units: a CJK character costs `cjk_weight` (its phoneme
    string is several characters long: Kokoro's 510-phoneme limit is reached at ~100 Han
    characters), any other character costs 1. Since every cost is ≥ 1, a piece within budget
    is also within the same number of characters.
    """

    max_chars: int = 150
    """Budget of a regular piece."""
    first_max_chars: int = 40
    """Budget of the first piece of a request (keeps time-to-first-audio low)."""
    first_min_chars: int = 12
    """The first piece takes whole clauses until it costs at least this much."""
    cjk_weight: int = 2
    """Cost of one CJK character."""
    given_cost: Callable[[str], int] | None = None
    """Cost of a given-pronunciation placeholder (see `pronunciations`): the length of the
    text it stands for, so a span of them keeps to the budget once they are expanded."""

    def __post_init__(self) -> None:
        if self.first_max_chars < 4 or self.max_chars < self.first_max_chars:
            raise ValueError(
                "need 4 <= first_max_chars <= max_chars, got "
                f"first_max_chars={self.first_max_chars}, max_chars={self.max_chars}"
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
        if _is_cjk(ch):
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
        m = _WORD_BEFORE_RE.search(text, 0, i)
        if m is None:
            return True
        word = m.group(1).lower()
        if word in _ABBREVIATIONS:
            return False
        # A single capital letter is an initial ("J. K. Rowling").
        return not (len(word) == 1 and text[m.start()].isupper())

    # -- clauses --------------------------------------------------------------------------

    @staticmethod
    def clauses(sentence: str) -> list[str]:
        """Split a sentence after clause punctuation (，、；：,;:…), keeping it attached."""
        out: list[str] = []
        start, i, n = 0, 0, len(sentence)
        in_code = False
        while i < n:
            if sentence[i] in (_CODE_OPEN, _CODE_CLOSE):
                in_code = sentence[i] == _CODE_OPEN
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

    def cut_head(self, text: str, budget: int) -> tuple[str, str]:
        """Cut `text` into (head, tail) with cost(head) <= budget.

        Prefers the last space inside the budget (for Latin text); cuts at any character
        otherwise (CJK, or one very long word), never inside a combining sequence.
        """
        if self.cost(text) <= budget:
            return text, ""
        used, limit = 0, 0
        for k, ch in enumerate(text):
            used += self._unit(ch)
            if used > budget:
                limit = k
                break
        limit = max(limit, 1)
        space = text.rfind(" ", 0, limit + 1)
        if space > limit // 3:
            cut = space + 1 if space < limit else space
        else:
            cut = limit
            while cut > 1 and unicodedata.combining(text[cut]):
                cut -= 1
        if _CODE_OPEN in text:
            cut = _outside_codes(text, cut, budget * 3 // 2)
        return text[:cut], text[cut:]

    def first_piece(self, clauses: list[str]) -> tuple[str, list[str]]:
        """The first piece of a request and the clauses left after it.

        Whole clauses are taken until the piece costs at least `first_min_chars`, as long as
        they fit `first_max_chars`: a clause boundary keeps the prosody a fragment loses. If
        the rest of the sentence would then be a fragment itself (under twice that), the whole
        sentence is taken
        when it fits 1.5 × `first_max_chars` (and `max_chars`). A first clause over the budget is cut (at a
        space where there is one).
        """
        head, k = clauses[0], 1
        while (
            k < len(clauses)
            and self.cost(head.strip()) < self.first_min_chars
            and self.cost((head + clauses[k]).strip()) <= self.first_max_chars
        ):
            head, k = head + clauses[k], k + 1
        rest = clauses[k:]
        tail_cost = self.cost("".join(rest).strip())
        whole_budget = min(self.first_max_chars * 3 // 2, self.max_chars)
        if (
            0 < tail_cost < 2 * self.first_min_chars
            and self.cost((head + "".join(rest)).strip()) <= whole_budget
        ):
            # What is left of the sentence would be a fragment too ("…，请妥善保管。" spoken
            # alone came back garbled): the sentence goes whole, up to 1.5 × the budget.
            return (head + "".join(rest)).strip(), []
        head, tail = self.cut_head(head.strip(), self.first_max_chars)
        return head, [tail, *rest] if tail.strip() else rest

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
        current = ""
        for clause in clauses:
            candidate = current + clause
            if self.cost(candidate.strip()) <= budget:
                current = candidate
                continue
            if current.strip():
                pieces.append(current.strip())
            current = clause
            while self.cost(current.strip()) > budget:
                head, current = self.cut_head(current.strip(), budget)
                pieces.append(head.strip())
        if current.strip():
            pieces.append(current.strip())
        return [p for p in pieces if p]
