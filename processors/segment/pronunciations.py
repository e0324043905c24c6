"""Stretches of text whose pronunciation is given (a lexicon entry, an SSML `<phoneme>`).

Each such stretch is replaced in the text by one placeholder character from Unicode plane 16
(private use), so the rest of the front-end treats it as one unsplittable letter: number
reading, language tagging and clause splitting pass it through. At the end each placeholder
becomes a run of its own that carries its IPA (`Run.phonemes`), shown as it was written.
Normalization removes every other private-use character, so a placeholder can only come
from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

PLACEHOLDER_FIRST = 0x100000
PLACEHOLDER_LAST = 0x10FFFD


def is_placeholder(ch: str) -> bool:
    return PLACEHOLDER_FIRST <= ord(ch) <= PLACEHOLDER_LAST


# The segmenter's own private-use marks (a code kept whole, see `number_context`).
_MARKS = frozenset("\ue000\ue001")


def _internal(ch: str) -> bool:
    return ch in _MARKS or is_placeholder(ch)


def blank_placeholders(text: str) -> str:
    """`text` with plane-16 characters and the segmenter's code marks turned into spaces
    (same length: positions hold), so request text can never forge either."""
    if not any(_internal(c) for c in text):
        return text
    return "".join(" " if _internal(c) else c for c in text)


@dataclass(frozen=True)
class Given:
    """A written stretch and the IPA to say it with."""

    text: str
    """As written (what captions show)."""
    ipa: str
    lang: str | None = None
    """The language it is spoken in (None: the language around it)."""


@dataclass
class GivenTable:
    """The given pronunciations of one request, by placeholder (one table per request)."""

    _by_char: dict[str, Given] = field(default_factory=dict)

    def add(self, given: Given) -> str:
        """The placeholder standing for `given`."""
        if len(self._by_char) > PLACEHOLDER_LAST - PLACEHOLDER_FIRST:
            raise ValueError("too many given pronunciations in one request")
        ch = chr(PLACEHOLDER_FIRST + len(self._by_char))
        self._by_char[ch] = given
        return ch

    def get(self, ch: str) -> Given | None:
        return self._by_char.get(ch)

    def __bool__(self) -> bool:
        return bool(self._by_char)

    def display(self, ch: str) -> str:
        """What a placeholder shows as ("" for one that is not in the table)."""
        given = self._by_char.get(ch)
        return given.text if given is not None else ("" if is_placeholder(ch) else ch)
