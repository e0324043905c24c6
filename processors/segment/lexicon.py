"""A tenant lexicon applied to request text (pure): aliases rewrite the text, phoneme
entries become given pronunciations (see `pronunciations`).

Matching walks a character trie from every position (longest match wins, case-sensitive
entries before folded ones), so a 5000-entry lexicon costs at most one walk of the longest
grapheme per character — never one regex alternative per entry per character.
"""

from __future__ import annotations

import functools
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from typing import overload

from streamtts.processors.segment.pronunciations import Given, GivenTable
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.lexicon import Lexicon, LexiconEntry, fold

_SPOKEN = frozenset({"zh", "en", "ja", "ko", "yue"})


class LexiconError(ValueError):
    """An entry cannot be used; the message names it ("entry 3 ('招行'): …")."""


@dataclass(frozen=True)
class _Compiled:
    entry: LexiconEntry
    ipa: str | None
    """The entry's phonemes as IPA (pinyin converted), or None for an alias."""


def pinyin_ipa(pinyin: str) -> str:
    """Tone-numbered pinyin ("zhao1 hang2") → the IPA the zh G2P writes for it.

    Raises:
        ValueError: a syllable is not pinyin.
    """
    syllables = pinyin.strip().lower().replace("v", "ü").split()
    return "".join(_syllable_ipa(s if s[-1].isdigit() else s + "5") for s in syllables)


@functools.lru_cache(maxsize=4096)
def _syllable_ipa(syllable: str) -> str:
    # ~0.3 ms each in misaki; Mandarin has ~1300 toned syllables, so a lexicon repeats them.
    from misaki.zh import ZHG2P

    return str(ZHG2P.py2ipa(syllable))


def entry_ipa(entry: LexiconEntry) -> str | None:
    """The entry's IPA (None for an alias). Raises ValueError for unusable phonemes."""
    if entry.phonemes is None:
        return None
    if entry.alphabet == "pinyin":
        return pinyin_ipa(entry.phonemes)
    return unicodedata.normalize("NFC", entry.phonemes.strip())


def check_lexicon(lexicon: Lexicon) -> None:
    """Refuse a lexicon with an entry that cannot be used, naming the first such entry.

    Raises:
        LexiconError: e.g. pinyin with a syllable that does not exist.
    """
    LexiconMatcher(lexicon)


def _fold_char(ch: str) -> str:
    low = ch.lower()
    return low if len(low) == 1 else ch


def _boundary(ch: str) -> bool:
    """True where a whole-word match may begin or end next to `ch`."""
    if ch.isdigit():
        return False
    return not (ch.isalpha() and (ord(ch) < 0x250 or 0x1E00 <= ord(ch) <= 0x1EFF))


class LexiconMatcher:
    """The compiled lexicon of one tenant at one version."""

    def __init__(self, lexicon: Lexicon) -> None:
        self.tenant = lexicon.tenant
        self.version = lexicon.version
        self._exact: dict[str, object] = {}
        self._folded: dict[str, object] = {}
        self._longest = 0
        for i, entry in enumerate(lexicon.entries):
            try:
                ipa = entry_ipa(entry)
            except (ValueError, KeyError, AssertionError, IndexError) as err:
                raise LexiconError(f"entry {i} ({entry.grapheme!r}): phonemes unusable: {err}") from None
            if ipa is not None and not ipa.strip():
                raise LexiconError(f"entry {i} ({entry.grapheme!r}): phonemes are empty")
            key = fold(entry.grapheme)
            trie = self._exact if entry.case_sensitive else self._folded
            if not entry.case_sensitive:
                key = "".join(_fold_char(c) for c in key)
            node = trie
            for c in key:
                node = node.setdefault(c, {})  # type: ignore[assignment]
            node.setdefault("", []).append(_Compiled(entry, ipa))  # type: ignore[attr-defined]
            self._longest = max(self._longest, len(key))

    def __bool__(self) -> bool:
        return bool(self._exact or self._folded)

    @overload
    def apply(self, text: MappedText, lang_at: Callable[[int], str], given: GivenTable) -> MappedText: ...

    @overload
    def apply(
        self, text: MappedText, lang_at: Callable[[int], str], given: GivenTable, *, max_chars: int
    ) -> MappedText | None: ...

    def apply(
        self,
        text: MappedText,
        lang_at: Callable[[int], str],
        given: GivenTable,
        *,
        max_chars: int | None = None,
    ) -> MappedText | None:
        """`text` with every matching entry applied, left to right, longest match first.

        Args:
            text: one sentence (normalized).
            lang_at: the language the front-end reads character i in (decides which
                language's entries apply there).
            given: where phoneme entries put their pronunciations.
            max_chars: the longest result wanted: None is returned as soon as the text
                grows past it (an alias can be 500 times its grapheme), before the rest
                is expanded.
        """
        s = text.text
        folded = "".join(_fold_char(c) for c in s)
        out: list[MappedText] = []
        size = 0  # characters in `out`
        pos = i = 0
        while i < len(s):
            found = self._match(s, folded, i, lang_at)
            if found is None:
                i += 1
                continue
            end, compiled = found
            out.append(text.slice(pos, i))
            out.append(self._replacement(text, i, end, compiled, lang_at(i), given))
            size += len(out[-2]) + len(out[-1])
            if max_chars is not None and size > max_chars:
                return None
            pos = i = end
        if not out:
            return text
        if max_chars is not None and size + len(s) - pos > max_chars:
            return None
        out.append(text.slice(pos, len(s)))
        return MappedText.join(out)

    def _match(
        self, s: str, folded: str, i: int, lang_at: Callable[[int], str]
    ) -> tuple[int, _Compiled] | None:
        best: tuple[int, _Compiled] | None = None
        for trie, src in ((self._exact, s), (self._folded, folded)):
            node: object = trie
            j = i
            while isinstance(node, dict) and j <= len(src):
                for compiled in node.get("", ()):
                    if (best is None or j > best[0]) and self._fits(compiled.entry, s, i, j, lang_at):
                        best = (j, compiled)
                if j == len(src) or j - i >= self._longest:
                    break
                node = node.get(src[j])
                j += 1
        return best

    @staticmethod
    def _fits(entry: LexiconEntry, s: str, i: int, j: int, lang_at: Callable[[int], str]) -> bool:
        if entry.matches_words and (
            (i > 0 and not _boundary(s[i - 1])) or (j < len(s) and not _boundary(s[j]))
        ):
            return False
        if entry.language == "any":
            return True
        lang = lang_at(i)
        return lang == entry.language or {lang, entry.language} == {"zh", "yue"}

    @staticmethod
    def _replacement(
        text: MappedText, i: int, end: int, compiled: _Compiled, lang: str, given: GivenTable
    ) -> MappedText:
        entry = compiled.entry
        if compiled.ipa is None:
            assert entry.alias is not None
            new = entry.alias
        else:
            spoken_lang = lang if entry.language == "any" else entry.language
            if spoken_lang not in _SPOKEN:  # IPA for a script no G2P reads ("Москва"): say it as en
                spoken_lang = "en"
            new = given.add(Given(text.text[i:end], compiled.ipa, spoken_lang))
        if not text.tracked:
            return MappedText.of(new, tracked=False)
        a, b = text.source_range(i, end)
        return MappedText(new, (a,) * len(new), (b,) * len(new))
