"""What parsing an SSML document yields (blocks, marks, given pronunciations, notes), the
limits that bound it, and how its notes and refusals are worded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from streamtts.processors.segment.exceptions import InputRejected, SegmentationError
from streamtts.processors.segment.pronunciations import GivenTable
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.lexicon import MAX_GRAPHEME_CHARS

MAX_DEPTH = 32
MAX_ELEMENTS = 5000
MAX_ATTRIBUTE_CHARS = 1000
MAX_MARKS = 500
"""Marks per document (a result carries them all)."""
MAX_GIVEN_CHARS = MAX_GRAPHEME_CHARS
"""The text one `<phoneme>` pronounces: a word or a name, not a paragraph."""
MAX_BREAK_MS = 5000
"""The longest pause a segment carries; longer breaks are cut to it (with a note)."""
MAX_DOCUMENT_BREAK_MS = 120_000
"""The silence all of a document's breaks add up to; breaks past it are dropped (with a
note): 1,000 breaks of 5 s each asked for 5,000 s of silence, held by the sink in memory."""
MAX_BLOCKS = 1000
"""Blocks per document (each break, voice, language or rate change starts one; each is at
least one segment)."""
MAX_NOTES = 32


class InvalidSsml(SegmentationError, reason="invalid_ssml"):
    """Malformed or refused SSML; the message says what and where (line, column)."""


Refuse = Callable[[str], InvalidSsml]
"""Makes the error for a refusal, with the parser's current line and column."""


@dataclass(frozen=True)
class Style:
    """What holds for the text inside an element."""

    lang: str | None = None
    voice: str | None = None
    rate: float = 1.0


@dataclass
class Block:
    """Text one voice speaks at one rate in one language hint, up to a break."""

    text: MappedText
    style: Style
    pause_after_ms: int | None = None
    """Set when a `break` follows the block."""


@dataclass
class SsmlDocument:
    blocks: list[Block]
    marks: list[tuple[str, int]]
    """(name, position in the SSML source), in document order."""
    given: GivenTable
    notes: list[str]
    lang: str | None
    """`speak xml:lang` (or the document's script) — what say-as and phonemes read in."""


def looks_like_ssml(text: str) -> bool:
    """True for text that is an SSML document (starts with `<speak` or an XML declaration)."""
    head = text.lstrip()[:64].lower()
    return head.startswith("<speak") or (head.startswith("<?xml") and "<speak" in text[:512].lower())


class Remarks:
    """The notes a document earns (each once, a bounded number), and what becomes of an
    element the subset does not support: read as written with a note, or refused."""

    def __init__(self, unknown: str) -> None:
        self.unknown = unknown  # "ignore" or "reject": the request's policy
        self.notes: list[str] = []

    def note(self, note: str) -> None:
        if note not in self.notes and len(self.notes) < MAX_NOTES:
            self.notes.append(note[:200])

    def unsupported(self, what: str, inside: str | None = None) -> None:
        """`what`: a tag, or "say-as …" / "phoneme …" for an attribute value."""
        label = f"<{what}>" if not what.startswith("say-as") and not what.startswith("phoneme") else what
        if inside:
            label = f"<{what}> inside <{inside}>"
        if self.unknown == "reject":
            raise InputRejected("unsupported_ssml", f"SSML {label} is not supported")
        self.note(f"SSML {label} is not supported; its text is read as written")
