"""Where a sentence over its budget may be cut: between words, and which words.

A first span over its budget is cut inside its sentence. At the last space that fit, the cut
fell after an article or a preposition ("Bitte halten Sie Ihre | Auftragsbestätigung
bereit.", "confirmed for March | fifteenth"): the model spoke the head with a falling end on a
word that binds to the next, and ASR garbled the phrase (issue #45). A cut before a word that
opens a phrase or clause is where a speaker breathes; after a binding word is the worst place.
Lists for the Latin languages the neural voices speak (en, de, es, fr, it, pt).
"""

from __future__ import annotations

import unicodedata

from streamtts.processors.segment.han_words import HanBreaks
from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN

PHRASE_OPENERS = frozenset(
    # en
    "and but or because which when where while if so then please unless although though "
    # de
    "und oder aber denn weil dass wenn ob damit sodass bitte "
    # es, fr, it, pt
    "y pero porque cuando si et ou mais parce quand ma perché quando se mas".split()
)
"""Conjunctions and "please": a cut right before one of these (lower-cased) is a good one."""

BINDS_TO_NEXT = frozenset(
    # en
    "the a an my your our their his her its this these those of to in on at for with by from is "
    "are was were be will can could would should must may not no mr mrs ms dr "
    "january february march april june july august september october november december "
    # de
    "der die das den dem des ein eine einen einem einer eines mein meine ihr ihre ihren ihrer "
    "ihrem sein seine unser unsere am im zum zur vom beim ins per mit für von zu auf an in aus "
    "bei nach über unter um durch ohne gegen "
    # es
    "el la los las un una unos unas de del al en con por para su sus mi mis "
    # fr
    "le les une des du au aux votre vos mon mes son sa ses "
    # it
    "il lo gli uno di della dello delle dei degli nel nella sul "
    # pt
    "o os as um uma do da dos das em no na seu sua".split()
)
"""A cut right after one of these (lower-cased) splits a phrase: avoided where another fits."""


def space_cut_kind(before: str, after: str) -> int:
    """How good a cut between the words `before` and `after` is: 0 before a phrase opener,
    1 a plain word boundary, 2 after a word that binds to the next."""
    b, a = before.lower().strip(".,;:!?\"'()"), after.lower().strip(".,;:!?\"'()")
    if b in BINDS_TO_NEXT:
        return 2
    return 0 if a in PHRASE_OPENERS else 1


# Characters read past a cut to see the word it falls in whole (longer than jieba's words
# and than any English word a cut is moved off; a longer word is cut anyway).
WORD_LOOKAHEAD = 24
_WORD_JOINERS = frozenset("-'’")


def in_word(ch: str) -> bool:
    """A letter or digit of a spaced script (Latin, Cyrillic, digits…): part of a word."""
    return ch.isalnum() and not is_cjk(ch)


def splits_no_word(text: str, cut: int, han: HanBreaks | None) -> bool:
    """Whether cutting `text` before text[cut] leaves every word whole (0 < cut < len)."""
    left, right = text[cut - 1], text[cut]
    if unicodedata.combining(right):
        return False
    if in_word(right) and (in_word(left) or (left in _WORD_JOINERS and cut > 1 and in_word(text[cut - 2]))):
        return False
    if in_word(left) and right in _WORD_JOINERS and cut + 1 < len(text) and in_word(text[cut + 1]):
        return False
    if han is not None and _is_han(left) and _is_han(right):
        return cut in han.ends
    return True


def space_cut(window: str, limit: int) -> int | None:
    """The best cut at a space in (limit // 3, limit] of `window` (the text from where the
    piece starts, `WORD_LOOKAHEAD` past the budget): before a phrase opener in the budget's
    second half, else the latest of the best kind (`cut_words.space_cut_kind`: never after
    a word that binds to the next where another space fits). None: no space there."""
    spaces: list[int] = []
    inside = False  # a space inside a code's digit words is no place to cut (the splitter's `_outside_codes`)
    for i, ch in enumerate(window):
        if ch == " " and not inside:
            spaces.append(i)
        elif ch in (CODE_OPEN, CODE_CLOSE):
            inside = ch == CODE_OPEN
    best: tuple[int, int] | None = None  # (kind, cut): lower kind is better
    for n in range(len(spaces) - 1, -1, -1):
        at = spaces[n]
        if at > limit:
            continue
        if at <= limit // 3:
            break
        before = window[spaces[n - 1] + 1 if n else 0 : at]
        after = window[at + 1 : spaces[n + 1] if n + 1 < len(spaces) else len(window)]
        kind = space_cut_kind(before, after)
        cut = at + 1 if at < limit else at
        if kind == 0 and at > limit // 2:
            return cut
        if best is None or kind < best[0]:
            best = (kind, cut)
    return None if best is None else best[1]


def cut_kind(left: str, right: str, kana: bool) -> int:
    """How good a cut between `left` and `right` is when no word is split: 1 between words,
    2 next to a Latin word (its run then starts or ends a span), 3 inside kana or after a
    kanji's okurigana (Japanese words and inflections: "確認し|ます", "書|く") — a cut after
    a particle, before the next kanji or katakana word, is a 1; in text with kana, a cut
    between two kanji is a 2 (jieba's words are Chinese ones: "午前|中")."""
    if in_word(left) or in_word(right) or (kana and _is_han(left) and _is_han(right)):
        return 2
    if _is_hiragana(right) or (_is_katakana(left) and _is_katakana(right)):
        return 3  # kana goes on the word before it (okurigana, inflections, particles)
    if _is_hiragana(left) and left not in _PARTICLE_ENDS:
        return 3  # "お|届け": a prefix, not a particle, before the kanji
    return 1


# Hiragana that end a particle ("は", "を", "から", "まで"…): a cut after one, before a kanji or
# katakana word, falls between words.
_PARTICLE_ENDS = frozenset("はがをにでとのもへやかでらまど")


def has_kana(text: str) -> bool:
    return any(_is_hiragana(ch) or _is_katakana(ch) for ch in text)


def _is_hiragana(ch: str) -> bool:
    return 0x3041 <= ord(ch) <= 0x309F


def _is_katakana(ch: str) -> bool:
    return 0x30A0 <= ord(ch) <= 0x30FF


def _is_han(ch: str) -> bool:
    cp = ord(ch)
    return 0x3400 <= cp <= 0x9FFF or 0xF900 <= cp <= 0xFAFF


def is_cjk(ch: str) -> bool:
    cp = ord(ch)
    return (
        0x3040 <= cp <= 0x30FF
        or 0x3400 <= cp <= 0x9FFF
        or 0xAC00 <= cp <= 0xD7AF
        or 0xF900 <= cp <= 0xFAFF
        or 0x20000 <= cp <= 0x3134F
    )
