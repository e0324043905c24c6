"""The lexicon contract on `tts.lexicons`: a tenant's pronunciations, versioned.

The topic is compacted. Key `TENANT` holds the tenant's current lexicon (a null value deletes
it); key `TENANT@vN` keeps version N, so a replay can say a request again exactly as it was
said (requests and results record the version used). The last `HISTORY_VERSIONS` versions
are kept: each put writes a null (a tombstone) for every older version key, so compaction
removes them and a worker's start does not re-read every version ever written.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, ClassVar, Literal, Self

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, model_validator

from streamtts.schemas.base import Contract
from streamtts.schemas.languages import TAGS
from streamtts.schemas.names import OneOf
from streamtts.schemas.request import TENANT_PATTERN

LEXICON_LANGUAGES: tuple[str, ...] = ("any", *TAGS)


LexiconLanguage = Annotated[
    str, OneOf(LEXICON_LANGUAGES, "language", "use any or a tag of the language table (`streamtts voices`)")
]
""""any" or any language of the table (`schemas.languages`): an entry applies where its
grapheme is read in that language."""
Alphabet = Literal["ipa", "pinyin"]

MAX_ENTRIES = 5000
MAX_GRAPHEME_CHARS = 100
MAX_ALIAS_CHARS = 500
MAX_PHONEME_CHARS = 500
ALIAS_PER_GRAPHEME_CHAR = 10
ALIAS_ALLOWANCE = 40
"""An alias says at most 10 characters per grapheme character, plus 40 ("WHO" → "World
Health Organization" fits; "q" → 500 characters, said 250 times the text, does not)."""
MAX_LEXICON_BYTES = 2 * 1024 * 1024
"""Largest lexicon record (the topic allows 4 MiB; one record is read whole by every worker):
refused by `lexicon put` and, already on the topic, by every worker's book, unparsed."""
HISTORY_VERSIONS = 16
"""Versions of each tenant kept under `TENANT@vN` for replays; `lexicon put` writes a
tombstone for each older one, so compaction removes them."""


def max_alias_chars(grapheme: str) -> int:
    """The longest alias `grapheme` may have."""
    return min(MAX_ALIAS_CHARS, ALIAS_PER_GRAPHEME_CHAR * len(fold(grapheme)) + ALIAS_ALLOWANCE)


# What an IPA string may hold: Latin letters, IPA extensions and modifiers (stress, length,
# tone letters, aspiration), combining diacritics, the few Greek letters IPA uses, the schwa
# and barred-i superscripts, misaki's retroflex ꭧ and tone arrows, and spaces between words.
IPA_CHARS = re.compile(r"^[A-Za-zæçðøœŋħɐ-ʯʰ-˿\u0300-\u036fβθχꭧᵊᵻ↗↘→↓ .]+$")
PINYIN_RE = re.compile(r"^[a-zü]+[1-5]?( [a-zü]+[1-5]?)*$")


def lexicon_key(tenant: str) -> str:
    """The compacted key of a tenant's current lexicon."""
    return tenant


def version_key(tenant: str, version: int) -> str:
    """The compacted key that keeps one version of a tenant's lexicon."""
    return f"{tenant}@v{version}"


def fold(text: str) -> str:
    """The form graphemes are matched in: NFKC (as request text is normalized) and, for
    case-insensitive entries, casefolded by the caller."""
    return unicodedata.normalize("NFKC", text)


class LexiconEntry(BaseModel):
    """One pronunciation: say `grapheme` as `alias` (other text) or as `phonemes`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    grapheme: str = Field(min_length=1, max_length=MAX_GRAPHEME_CHARS)
    """The written form to find in request text ("Zorvex", "招行", "A320neo")."""
    alias: str | None = Field(default=None, min_length=1, max_length=MAX_ALIAS_CHARS)
    """Text to say instead (read by the normal front-end: numbers, languages)."""
    phonemes: str | None = Field(default=None, min_length=1, max_length=MAX_PHONEME_CHARS)
    """The pronunciation, in `alphabet`."""
    alphabet: Alphabet = "ipa"
    """"ipa" (every language), or "pinyin" with tone numbers for zh ("zhao1 hang2")."""
    language: LexiconLanguage = "any"
    """Only replace where the grapheme is read in this language ("any": everywhere)."""
    case_sensitive: bool = False
    whole_word: bool | None = None
    """Match only between word boundaries; None: when the grapheme starts and ends with a
    Latin letter or digit (a CJK grapheme has no spaces around it to look for)."""

    @model_validator(mode="after")
    def _one_pronunciation(self) -> Self:
        if (self.alias is None) == (self.phonemes is None):
            raise ValueError("give exactly one of alias or phonemes")
        if not fold(self.grapheme).strip():
            raise ValueError("grapheme is blank")
        if self.alias is not None and not fold(self.alias).strip():
            raise ValueError("alias is blank (it would delete the word)")
        if self.alias is not None and len(self.alias) > (most := max_alias_chars(self.grapheme)):
            raise ValueError(
                f"alias has {len(self.alias)} characters for a grapheme of {len(fold(self.grapheme))}; "
                f"at most {most} ({ALIAS_PER_GRAPHEME_CHAR} per grapheme character + {ALIAS_ALLOWANCE})"
            )
        for name, value in (("grapheme", self.grapheme), ("alias", self.alias or "")):
            bad = next((c for c in value if unicodedata.category(c) in ("Cc", "Co", "Cs", "Cn")), None)
            if bad is not None:
                raise ValueError(f"{name} holds the control or private-use character U+{ord(bad):04X}")
            if "<" in value and ">" in value:
                raise ValueError(f"{name} holds markup; an alias is plain text")
        if self.phonemes is not None:
            if self.alphabet == "pinyin":
                if self.language not in ("zh", "yue"):
                    raise ValueError('alphabet "pinyin" is for language zh (or yue)')
                if not PINYIN_RE.match(self.phonemes.strip().lower().replace("v", "ü")):
                    raise ValueError(
                        f"phonemes {self.phonemes!r} are not pinyin syllables with tone numbers"
                        " (e.g. 'zhao1 hang2')"
                    )
            elif not IPA_CHARS.match(unicodedata.normalize("NFD", self.phonemes)):
                bad = next(
                    (c for c in unicodedata.normalize("NFD", self.phonemes) if not IPA_CHARS.match(c)), "?"
                )
                raise ValueError(f"phonemes {self.phonemes!r} hold {bad!r} (U+{ord(bad):04X}), not IPA")
        return self

    @property
    def matches_words(self) -> bool:
        if self.whole_word is not None:
            return self.whole_word
        g = fold(self.grapheme)
        return _wordish(g[0]) and _wordish(g[-1])


def _wordish(ch: str) -> bool:
    return ch.isascii() and ch.isalnum()


class Lexicon(Contract):
    """A tenant's lexicon at one version. Versions only grow (`streamtts lexicon put`
    writes current + 1)."""

    contract_name: ClassVar[str] = "lexicon"

    schema_version: Literal[1] = 1
    tenant: str = Field(pattern=TENANT_PATTERN)
    version: int = Field(ge=1)
    entries: list[LexiconEntry] = Field(max_length=MAX_ENTRIES)
    updated_at: AwareDatetime

    @model_validator(mode="after")
    def _unique(self) -> Self:
        seen: dict[tuple[str, str], int] = {}
        for i, e in enumerate(self.entries):
            g = fold(e.grapheme)
            key = (g if e.case_sensitive else g.casefold(), e.language)
            if key in seen:
                raise ValueError(
                    f"entry {i} ({e.grapheme!r}) repeats entry {seen[key]} for language {e.language}"
                )
            seen[key] = i
        return self
