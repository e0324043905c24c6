"""Where a streamed utterance's held text is cut into a span to speak now.

The text arrives token by token. Spoken too early, a span ends mid-phrase and sounds cut off;
spoken too late, the caller waits (livekit agents #3798: the first sentence held until the
next token; pipecat #3696: ~200 ms lost to aggregation). The policy:

- **the first span** goes out at the first clause or sentence boundary once it holds
  `first_min_cost` (CJK characters count `cjk_weight`: a short Chinese clause is enough);
- **later spans** wait for whole sentences (the first span's audio is playing: prosody now
  matters more than latency) and are cut at a clause only once the held text reaches
  `max_cost`;
- **a timer** (`max_buffer_delay_ms` since the first unspoken delta) speaks what is held up to
  its last whole word (all of it when it ends with a word and its mark: "Thanks for holding,");
  **a flush** or **the end** speaks everything.

A boundary counts only once the text after it shows it is one, with the splitter's own rules
(`splitter`): "3." followed by "5", "Dr." before a name, "1," before "000" are not boundaries;
full-width CJK punctuation and newlines are final as they arrive. No cut falls inside a word
(the timer keeps a trailing partial word; a Han run keeps its last character, which may begin
a word), except in hostile text with no boundary at all, cut hard at `2 × max_cost` so the
held text, and the work per delta, stay bounded. One pass over the held text per delta. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from streamtts.processors.segment.cut_words import is_cjk
from streamtts.processors.segment.han_words import han_breaks, is_han
from streamtts.processors.segment.splitter import CLAUSE_END, CLOSERS, SENTENCE_END, ClauseSplitter
from streamtts.schemas.utterance import DEFAULT_MAX_BUFFER_DELAY_MS

Force = Literal["none", "words", "all"]
"""What asks for the cut: a new delta ("none"), the timer ("words"), a flush or the end ("all")."""

_FINAL_AT_ONCE = frozenset("。！？；，、：…\n") | (SENTENCE_END - frozenset("!?"))
"""Marks that end a clause or sentence as they arrive (nothing after them can change that)."""
_ASCII_CLAUSE = frozenset(",;:")


@dataclass(frozen=True)
class CutPolicy:
    first_min_cost: int = 12
    """The first span goes out at a boundary once it costs this much (see `cost`)."""
    max_cost: int = 150
    """Later spans are cut at a clause (not only a sentence) once the held text costs this."""
    cjk_weight: int = 2
    """Cost of a CJK character (one carries what a short word does)."""
    max_buffer_delay_ms: int = DEFAULT_MAX_BUFFER_DELAY_MS
    """The timer for the first span (0: none)."""
    later_delay_ms: int = 1500
    """The timer for later spans: they wait longer for a whole sentence."""

    def delay_ms(self, first: bool) -> int | None:
        """How long held text may wait for a boundary; None: no timer."""
        if self.max_buffer_delay_ms <= 0:
            return None
        return self.max_buffer_delay_ms if first else max(self.later_delay_ms, self.max_buffer_delay_ms)

    def cut(self, held: str, *, first: bool, force: Force = "none") -> int:
        """How many characters of `held` to speak now (0: keep waiting)."""
        if force == "all" or not held:
            return len(held)
        scan = _scan(held, self.cjk_weight, self.first_min_cost if first else None)
        if first and scan.first_boundary:
            return scan.first_boundary
        if not first and scan.last_sentence:
            return scan.last_sentence
        if not first and scan.cost >= self.max_cost and scan.last_clause:
            return scan.last_clause
        if force == "words" and _ends_whole_word(held):
            return len(held)  # "Thanks for holding," as the timer finds it: its last word is whole
        if force == "words" or scan.cost >= self.max_cost:
            if scan.last_word and (word_cut := _off_han_word(held, scan.last_word)):
                return word_cut
        if scan.cost >= 2 * self.max_cost:
            return scan.hard_cut(self.max_cost)
        return 0


@dataclass
class _Scan:
    cost: int = 0
    first_boundary: int = 0
    """The end of the first clause/sentence costing at least the minimum (first span only)."""
    last_sentence: int = 0
    last_clause: int = 0
    last_word: int = 0
    costs: list[int] | None = None

    def hard_cut(self, budget: int) -> int:
        assert self.costs is not None
        for i, c in enumerate(self.costs):
            if c > budget:
                return max(1, i)
        return len(self.costs)


def _scan(held: str, cjk_weight: int, first_min: int | None) -> _Scan:
    out = _Scan(costs=[])
    costs = out.costs
    assert costs is not None
    n, i, cost = len(held), 0, 0
    while i < n:
        ch = held[i]
        if ch in _MARKS:
            run, final = _mark_run(held, i)
            for c in held[i:run]:  # the run of marks and closers belongs to one span
                cost += cjk_weight if is_cjk(c) else 1
                costs.append(cost)
            if final:
                end = run
                while end < n and held[end].isspace():
                    end += 1  # the space after a boundary ends its span (the next starts with a word)
                    cost += 1
                    costs.append(cost)
                if any(c in SENTENCE_END or c in ".!?" for c in held[i:run]):
                    out.last_sentence = end
                out.last_clause = out.last_word = end
                if first_min is not None and not out.first_boundary and cost >= first_min:
                    out.first_boundary = end
                run = end
            i = run
            continue
        cost += cjk_weight if is_cjk(ch) else 1
        costs.append(cost)
        if ch.isspace():
            out.last_word = i + 1
        elif is_cjk(ch) and i > 0 and is_cjk(held[i - 1]) and not _is_hangul(ch):
            # Before this Han or kana character (it may begin a word still arriving); Korean
            # writes spaces between its words, so a Hangul word ends only at one.
            out.last_word = i
        i += 1
    out.cost = cost
    return out


_MARKS = SENTENCE_END | CLAUSE_END | frozenset(".!?")


def _is_hangul(ch: str) -> bool:
    return "\uac00" <= ch <= "\ud7af"


def _off_han_word(held: str, cut: int) -> int:
    """`cut`, or — where it falls between two Han characters — the last end of a jieba word
    of that run before it ("…我们的IT部|门" split 部门: the cut goes before 部门). The run's
    last word stays held (it may still be arriving); with no word end in the run, the cut goes
    before the run — 0 (no cut: wait) when the run starts the held text ("部门" alone is one
    word, held until more text, the end, or the hard cut of hostile text)."""
    if not (0 < cut < len(held) and is_han(held[cut - 1]) and is_han(held[cut])):
        return cut
    start, end = cut - 1, cut
    while start and is_han(held[start - 1]):
        start -= 1
    while end < len(held) and is_han(held[end]):
        end += 1
    inside = [start + e for e in han_breaks(held[start:end]).ends if 0 < e < end - start and start + e <= cut]
    if inside:
        return max(inside)
    return start


def _ends_whole_word(held: str) -> bool:
    """Whether held text ends with a word and the mark after it (a comma, a stop): the word is
    whole, whatever comes next — except a digit's "." or "," ("3." may become "3.5")."""
    end = len(held)
    while end and held[end - 1] in CLOSERS:
        end -= 1
    if not end or held[end - 1] not in _MARKS:
        return False
    start = end
    while start and held[start - 1] in _MARKS:
        start -= 1
    return start > 0 and held[start - 1].isalpha()


def _mark_run(held: str, i: int) -> tuple[int, bool]:
    """The end of the run of marks and closers from `i`, and whether it is a boundary known
    to be final (False also when what follows, which decides, has not arrived)."""
    n = len(held)
    j = i + 1
    while j < n and (held[j] in CLOSERS or held[j] in SENTENCE_END or held[j] in ".!?"):
        j += 1
    ch = held[i]
    if ch in _FINAL_AT_ONCE and ch != ".":
        return j, True
    if j >= n:
        return j, False  # the next character decides ("3." + "5", "1," + "000", "?" + a quote)
    if ch == ".":
        return j, ClauseSplitter._period_ends_sentence(held, i)
    if ch in _ASCII_CLAUSE:
        return j, held[j].isspace()
    return j, held[j].isspace() or not held[j].isalnum()  # ! ? …
