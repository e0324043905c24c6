"""An SSML document's text gathered into blocks: one voice, rate and language hint each, up
to the next break, with sentence ends where `p` and `s` close."""

from __future__ import annotations

import re

from streamtts.processors.segment.langid import script_of
from streamtts.processors.segment.ssml_document import MAX_BLOCKS, MAX_BREAK_MS, Block, Refuse, Style
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.languages import SENTENCE_STOPS

_SPACE_BEFORE_PUNCT_RE = re.compile(r" +([\ue001]?[.,!?;:])")
SCRIPT_LANG = {"han": "zh", "kana": "ja", "hangul": "ko", "latin": "en"}
"""The language a letter of a script is read in when nothing says otherwise."""


def script_lang(source: str) -> str:
    """The language the document's script says (markup left out)."""
    text = re.sub(r"<[^>]*>", " ", source)
    scripts = {script_of(c) for c in text}
    if "kana" in scripts:
        return "ja"
    if "hangul" in scripts:
        return "ko"
    if "han" in scripts:
        return "zh"
    return "en"


class BlockBuilder:
    """Pieces of text in, blocks out. What the handlers ask about the block so far (its last
    character, its last letter's language) is kept as text arrives, so nothing rescans the
    block: a document of 1000 say-as elements must parse in linear time."""

    def __init__(self, refuse: Refuse) -> None:
        self.blocks: list[Block] = []
        self._refuse = refuse
        self._pieces: list[MappedText] = []
        self._style = Style()
        self._tail = ""
        """The current block's last non-space character."""
        self.letter_lang: str | None = None
        """The language of the current block's last letter."""

    def append(self, piece: MappedText, style: Style) -> None:
        if not piece.text:
            return
        if style != self._style:
            self.close()
            self._style = style
        self._track(piece.text)
        self._pieces.append(piece)

    def _track(self, text: str) -> None:
        stripped = text.rstrip()
        if stripped:
            self._tail = stripped[-1]
        for ch in reversed(text):
            lang = SCRIPT_LANG.get(script_of(ch))
            if lang is not None:
                self.letter_lang = lang
                break

    def close(self, pause_ms: int | None = None) -> None:
        """End the current block (a `break` of `pause_ms` follows it, or a style change)."""
        text = MappedText.join(self._pieces).sub(_SPACE_BEFORE_PUNCT_RE, lambda m: m.group(1))
        self._tail, self.letter_lang = "", None
        if text.text.strip():
            if len(self.blocks) >= MAX_BLOCKS:
                raise self._refuse(
                    f"more than {MAX_BLOCKS} blocks of text "
                    "(each break, voice, language or rate change starts one)"
                )
            self.blocks.append(Block(text, self._style, pause_ms))
        elif pause_ms is not None and self.blocks:
            prev = self.blocks[-1]
            prev.pause_after_ms = min(MAX_BREAK_MS, (prev.pause_after_ms or 0) + pause_ms)
        self._pieces = []

    def boundary(self, at: int, paragraph: bool) -> None:
        """End the text so far with a sentence end at source position `at` ("\n" for a
        paragraph)."""
        last = self._tail
        if not last:
            return
        if paragraph:
            mark = "\n"
        elif last == ".":
            mark = " "  # a period ends a sentence only before a space ("3.14" does not)
        elif last in SENTENCE_STOPS:
            return
        else:
            mark = "。" if script_of(last) in ("han", "kana", "hangul") else "."
        self._track(mark)
        self._pieces.append(MappedText(mark, (at,) * len(mark), (at,) * len(mark)))
