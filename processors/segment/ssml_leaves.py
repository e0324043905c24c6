"""`say-as`, `sub` and `phoneme`: an element's content → what is spoken in its place."""

from __future__ import annotations

import re
import unicodedata

from streamtts.processors.segment.exceptions import UnreadableNumber
from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN
from streamtts.processors.segment.pronunciations import Given, GivenTable, blank_placeholders
from streamtts.processors.segment.say_as import INTERPRETATIONS, SayAsError, say_as
from streamtts.processors.segment.ssml_document import MAX_GIVEN_CHARS, Refuse, Remarks
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.lexicon import IPA_CHARS, PINYIN_RE

LEAVES = frozenset({"say-as", "sub", "phoneme"})
"""Elements whose content is replaced (their text is not read as it stands)."""
WS_RE = re.compile(r"\s+")
_MARKS = CODE_OPEN + CODE_CLOSE


def read_leaf(
    tag: str,
    attrs: dict[str, str],
    content: str,
    span: tuple[int, int],
    lang: str,
    *,
    given: GivenTable,
    remarks: Remarks,
    refuse: Refuse,
) -> MappedText | None:
    """What a leaf says, mapped to `span` (its content's source range) as a whole; None when
    it says nothing. A given pronunciation (`phoneme`) is added to `given`."""
    start, end = span
    spoken: str
    if tag == "sub":
        alias = attrs.get("alias")
        if alias is None:
            raise refuse("<sub> needs an alias")
        spoken = WS_RE.sub(" ", alias).strip()
    elif tag == "say-as":
        kind = attrs.get("interpret-as", "").strip().lower()
        if kind not in INTERPRETATIONS:
            remarks.unsupported(f"say-as interpret-as={kind!r}")
            spoken = blank_placeholders(content)
        else:
            try:
                spoken = say_as(kind, content, lang, attrs.get("format"))
            except (SayAsError, UnreadableNumber) as err:
                remarks.note(f"{err}; read as written")
                spoken = content
    else:  # phoneme
        spoken = _phoneme(attrs, content, lang, given, remarks, refuse)
    if tag != "phoneme":
        spoken = blank_placeholders(spoken)
    if not spoken:
        return None
    if tag == "say-as":
        # Kept whole: the splitter never cuts a phone number or an amount in two.
        spoken = CODE_OPEN + spoken + CODE_CLOSE
    piece = MappedText(spoken, (start,) * len(spoken), (end,) * len(spoken))
    if tag != "phoneme":
        # Words read out stay words of their own beside the text around them ("Code"
        # + "ay, bee" must not glue into one word); the segmenter folds double spaces.
        before = MappedText(" ", (start,), (start,)) if spoken.strip(_MARKS)[:1].isascii() else None
        after = MappedText(" ", (end,), (end,)) if spoken.strip(_MARKS)[-1:].isascii() else None
        piece = MappedText.join([p for p in (before, piece, after) if p is not None])
    return piece


def _phoneme(
    attrs: dict[str, str], content: str, lang: str, given: GivenTable, remarks: Remarks, refuse: Refuse
) -> str:
    alphabet = attrs.get("alphabet", "ipa").strip().lower()
    ph = attrs.get("ph", "").strip()
    if not ph:
        raise refuse("<phoneme> needs a ph attribute")
    if alphabet == "ipa":
        if not IPA_CHARS.match(unicodedata.normalize("NFD", ph)):
            raise refuse(f"phoneme ph {ph[:40]!r} is not IPA")
        ipa = unicodedata.normalize("NFC", ph)
    elif alphabet in ("pinyin", "x-pinyin") and PINYIN_RE.match(ph.lower().replace("v", "ü")):
        from streamtts.processors.segment.lexicon import pinyin_ipa

        try:
            ipa = pinyin_ipa(ph)
        except ValueError as err:
            raise refuse(f"phoneme ph {ph[:40]!r}: {err}") from None
        lang = "zh"
    else:
        remarks.unsupported(f"phoneme alphabet={alphabet!r}")
        return blank_placeholders(content)
    if not content:
        raise refuse("<phoneme> needs the text it pronounces")
    if len(content) > MAX_GIVEN_CHARS:
        raise refuse(f"<phoneme> pronounces at most {MAX_GIVEN_CHARS} characters (a word or a name)")
    return given.add(Given(content, ipa, lang))
