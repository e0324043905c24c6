"""An SSML subset → blocks of plain text for the segmenter (pure; no Kafka).

Supported: `speak`, `p`, `s`, `break` (time / strength), `say-as` (characters, digits,
telephone, cardinal, ordinal, date, time, currency), `sub alias`, `phoneme` (ipa; pinyin for
zh), `prosody rate`, `lang xml:lang`, `voice name`, `mark`. Other elements are read as plain
text with a note, or refused (policy `unknown="reject"`).

Parsed by expat with everything that expands or fetches refused: a DOCTYPE (so no entity
can be declared: no billion laughs), external entities, parameter entities. Depth, element
count and attribute sizes are bounded (`ssml_document`), so hostile SSML fails in
microseconds.

A *block* is a stretch spoken by one voice at one rate in one language hint, up to the next
`break` (`ssml_blocks`). Its text is a `MappedText` into the SSML source: word timestamps
point into the document the caller sent, and marks are positions in it.
"""

from __future__ import annotations

import bisect
import re
import xml.parsers.expat
from collections.abc import Callable
from dataclasses import dataclass, field

from streamtts.processors.segment.exceptions import SegmentationError
from streamtts.processors.segment.input_policy import check_characters, control_rejection, is_control
from streamtts.processors.segment.langid import normalize_lang_hint
from streamtts.processors.segment.pronunciations import GivenTable, blank_placeholders
from streamtts.processors.segment.ssml_blocks import BlockBuilder, script_lang
from streamtts.processors.segment.ssml_document import (
    MAX_ATTRIBUTE_CHARS,
    MAX_BREAK_MS,
    MAX_DEPTH,
    MAX_DOCUMENT_BREAK_MS,
    MAX_ELEMENTS,
    MAX_MARKS,
    InvalidSsml,
    Remarks,
    SsmlDocument,
    Style,
)
from streamtts.processors.segment.ssml_leaves import LEAVES, WS_RE, read_leaf
from streamtts.processors.segment.ssml_values import break_ms, prosody_rate
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.request import VOICE_PATTERN

# Elements read as they are (their text is spoken); the others have their own handling.
_CONTAINERS = frozenset({"speak", "p", "s", "prosody", "lang", "voice"})
_KNOWN = _CONTAINERS | LEAVES | {"break", "mark"}
_CHAR_REF_RE = re.compile(r"&#([xX][0-9a-fA-F]{1,8}|[0-9]{1,10});")


@dataclass
class _Frame:
    tag: str
    style: Style
    attrs: dict[str, str]
    start: int
    """Source position after the start tag."""
    text: list[str] = field(default_factory=list)
    """A leaf's content (say-as, sub, phoneme)."""
    content_start: int | None = None
    content_end: int | None = None


class _Parser:
    def __init__(self, source: str, *, unknown: str, known_voice: Callable[[str], bool] | None) -> None:
        # Lone surrogates cannot be UTF-8 (what expat reads); one character each keeps positions.
        source = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in source)
        self.source = source
        self.known_voice = known_voice
        encoded = source.encode("utf-8")
        # Byte offset of each character (expat reports byte offsets into the UTF-8 input).
        self._char_bytes = [0] * (len(source) + 1)
        b = 0
        for i, ch in enumerate(source):
            self._char_bytes[i] = b
            b += len(ch.encode("utf-8")) if ord(ch) > 0x7F else 1
        self._char_bytes[len(source)] = b
        assert b == len(encoded)
        self.stack: list[_Frame] = []
        self.elements = 0
        self.text = BlockBuilder(self._error)
        self.marks: list[tuple[str, int]] = []
        self.given = GivenTable()
        self.remarks = Remarks(unknown)
        self.doc_lang: str | None = None
        self.silence_ms = 0
        """The breaks' silence so far (bounded by MAX_DOCUMENT_BREAK_MS)."""
        self.pending: tuple[str, int] | None = None
        """Character data whose end is known only at the next event."""
        self.saw_root = False
        self.p = xml.parsers.expat.ParserCreate()
        self._source_lang: str | None = None

    # -- positions -----------------------------------------------------------------------

    def _pos(self) -> int:
        return bisect.bisect_left(self._char_bytes, self.p.CurrentByteIndex)

    def _error(self, message: str) -> InvalidSsml:
        return InvalidSsml(
            f"invalid SSML at line {self.p.CurrentLineNumber}, column "
            f"{self.p.CurrentColumnNumber + 1}: {message}"
        )

    # -- text ----------------------------------------------------------------------------

    def _flush_pending(self) -> None:
        if self.pending is None:
            return
        data, start = self.pending
        self.pending = None
        end = self._pos()
        if self.source[start:end] == data:
            piece = MappedText.of(data, start)
        else:  # an entity or character reference, CDATA, a normalized newline: whole for whole
            piece = MappedText(data, (start,) * len(data), (end,) * len(data))
        # The decoded text, not only the source: `&#x202E;` is U+202E once parsed.
        check_characters(data, positions=piece.starts, how=" (in SSML)")
        if self._in_leaf():
            leaf = self._leaf()
            assert leaf is not None
            leaf.text.append(data)
            leaf.content_start = start if leaf.content_start is None else leaf.content_start
            leaf.content_end = end
            return
        self._append(piece.sub(WS_RE, " ").map_chars(blank_placeholders))

    def _in_leaf(self) -> bool:
        return any(f.tag in LEAVES for f in self.stack)

    def _leaf(self) -> _Frame | None:
        return next((f for f in self.stack if f.tag in LEAVES), None)

    def _append(self, piece: MappedText) -> None:
        self.text.append(piece, self.stack[-1].style if self.stack else Style())

    def _boundary(self, paragraph: bool) -> None:
        self.text.boundary(self._pos(), paragraph)

    # -- handlers ------------------------------------------------------------------------

    def start(self, name: str, attrs: dict[str, str]) -> None:
        self._flush_pending()
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            raise self._error(f"more than {MAX_ELEMENTS} elements")
        if len(self.stack) >= MAX_DEPTH:
            raise self._error(f"elements nested deeper than {MAX_DEPTH}")
        for key, value in attrs.items():
            if len(value) > MAX_ATTRIBUTE_CHARS:
                raise self._error(
                    f"attribute {key!r} of <{name}> is longer than {MAX_ATTRIBUTE_CHARS} characters"
                )
            # Aliases are spoken and mark names returned: the same characters are refused.
            check_characters(value, positions=self._pos(), how=f" (in attribute {key!r})")
        tag = name.rpartition(":")[2]
        if not self.saw_root:
            self.saw_root = True
            if tag != "speak":
                raise self._error(f"the root element must be <speak>, not <{name}>")
        style = self.stack[-1].style if self.stack else Style()
        if self._in_leaf():
            self.remarks.unsupported(tag, inside=self._leaf().tag)  # type: ignore[union-attr]
            self.stack.append(_Frame(tag, style, attrs, self._after_tag()))
            return
        style = self._styled(tag, attrs, style)
        if tag in ("p", "s"):
            self._boundary(tag == "p")
        elif tag == "break":
            self._break(attrs)
        elif tag == "mark":
            mark = attrs.get("name", "").strip()
            if not mark:
                raise self._error("<mark> needs a name")
            if len(self.marks) >= MAX_MARKS:
                raise self._error(f"more than {MAX_MARKS} marks")
            self.marks.append((mark[:200], self._pos()))
        elif tag not in _KNOWN:
            self.remarks.unsupported(tag)
        self.stack.append(_Frame(tag, style, attrs, self._after_tag()))

    def _after_tag(self) -> int:
        # Where the element's content begins: after the start tag's ">".
        end = self.source.find(">", self._pos())
        return end + 1 if end >= 0 else self._pos()

    def end(self, name: str) -> None:
        self._flush_pending()
        frame = self.stack.pop()
        if frame.tag in LEAVES and not self._in_leaf():
            self._leaf_done(frame)
        elif frame.tag in ("p", "s"):
            self._boundary(frame.tag == "p")

    def data(self, text: str) -> None:
        self._flush_pending()
        self.pending = (text, self._pos())

    def other(self, *args: object) -> None:
        self._flush_pending()

    # -- elements ------------------------------------------------------------------------

    def _styled(self, tag: str, attrs: dict[str, str], style: Style) -> Style:
        lang_attr = attrs.get("xml:lang")
        if lang_attr is not None and tag in ("speak", "lang", "voice", "p", "s"):
            try:
                lang = normalize_lang_hint(lang_attr)
            except SegmentationError:
                lang = None
                self.remarks.note(f"xml:lang {lang_attr[:20]!r} is not a language we speak; ignored")
            if tag == "speak":
                self.doc_lang = lang
            style = Style(lang, style.voice, style.rate) if lang else style
        if tag == "voice":
            name = attrs.get("name", "").strip()
            if not name:
                self.remarks.note("<voice> without a name; ignored")
            elif not re.match(VOICE_PATTERN, name) or (
                self.known_voice is not None and not self.known_voice(name)
            ):
                self.remarks.note(f"voice {name[:60]!r} is not known; the request's voice speaks instead")
            else:
                style = Style(style.lang, name, style.rate)
        if tag == "prosody":
            rate = attrs.get("rate")
            if rate is not None:
                style = Style(style.lang, style.voice, prosody_rate(rate, style.rate, self._error))
            for other in sorted(set(attrs) - {"rate"}):
                self.remarks.note(f"prosody {other} is not supported; ignored")
        return style

    def _break(self, attrs: dict[str, str]) -> None:
        ms = break_ms(attrs, self._error)
        if ms == 0:
            return
        if ms > MAX_BREAK_MS:
            self.remarks.note(f"a break of {ms:.0f} ms was shortened to {MAX_BREAK_MS} ms")
            ms = MAX_BREAK_MS
        if self.silence_ms + ms > MAX_DOCUMENT_BREAK_MS:
            self.remarks.note(f"breaks past {MAX_DOCUMENT_BREAK_MS // 1000} s of silence in all were dropped")
            ms = MAX_DOCUMENT_BREAK_MS - self.silence_ms
            if ms <= 0:
                return  # as strength="none": no pause, no boundary
        self.silence_ms += int(ms)
        self.text.close(int(ms))

    def _leaf_done(self, frame: _Frame) -> None:
        content = WS_RE.sub(" ", "".join(frame.text)).strip()
        start = frame.content_start if frame.content_start is not None else frame.start
        end = frame.content_end if frame.content_end is not None else start
        lang = frame.style.lang or self.text.letter_lang or self.doc_lang or self._document_lang()
        piece = read_leaf(
            frame.tag,
            frame.attrs,
            content,
            (start, end),
            lang,
            given=self.given,
            remarks=self.remarks,
            refuse=self._error,
        )
        if piece is not None:
            self._append(piece)

    def _document_lang(self) -> str:
        """The language the document's script says (computed once)."""
        if self._source_lang is None:
            self._source_lang = script_lang(self.source)
        return self._source_lang

    # -- refusals ------------------------------------------------------------------------

    def doctype(self, *args: object) -> None:
        raise self._error("a DOCTYPE is not allowed (entity declarations are refused)")

    def entity_decl(self, *args: object) -> None:
        raise self._error("entity declarations are not allowed")

    def external_entity(self, *args: object) -> int:
        raise self._error("external entities are not allowed")

    def run(self) -> SsmlDocument:
        p = self.p
        p.SetParamEntityParsing(xml.parsers.expat.XML_PARAM_ENTITY_PARSING_NEVER)
        p.StartDoctypeDeclHandler = self.doctype
        p.EntityDeclHandler = self.entity_decl
        p.UnparsedEntityDeclHandler = self.entity_decl
        p.ExternalEntityRefHandler = self.external_entity
        p.StartElementHandler = self.start
        p.EndElementHandler = self.end
        p.CharacterDataHandler = self.data
        p.CommentHandler = self.other
        p.ProcessingInstructionHandler = self.other
        p.StartCdataSectionHandler = self.other
        p.EndCdataSectionHandler = self.other
        try:
            p.Parse(self.source, True)
        except xml.parsers.expat.ExpatError as err:
            self._refuse_bad_reference(err)
            raise InvalidSsml(
                f"invalid SSML at line {err.lineno}, column {err.offset + 1}: "
                f"{xml.parsers.expat.ErrorString(err.code)}"
            ) from None
        except RecursionError:
            raise InvalidSsml("invalid SSML: nested too deeply") from None
        self.text.close()
        lang = self.doc_lang or self._document_lang()
        return SsmlDocument(self.text.blocks, self.marks, self.given, self.remarks.notes, lang)

    def _refuse_bad_reference(self, err: xml.parsers.expat.ExpatError) -> None:
        """`&#7;`: XML has no such character, and expat stops there. When the character is
        one the input policy refuses, refuse it for that reason (as in plain text)."""
        if err.code != xml.parsers.expat.errors.codes[xml.parsers.expat.errors.XML_ERROR_BAD_CHAR_REF]:
            return
        at = bisect.bisect_left(self._char_bytes, self.p.ErrorByteIndex)
        ref = _CHAR_REF_RE.match(self.source, at)
        if ref is None:
            return
        digits = ref.group(1)
        number = int(digits[1:], 16) if digits[0] in "xX" else int(digits)
        if number <= 0x10FFFF and is_control(chr(number)):
            raise control_rejection(chr(number), at, how=" (in SSML)") from None


def parse_ssml(
    source: str, *, unknown: str = "ignore", known_voice: Callable[[str], bool] | None = None
) -> SsmlDocument:
    """Parse an SSML document into blocks.

    Args:
        source: the request text (an SSML document whose root is `<speak>`).
        unknown: "ignore" (read unknown elements' text, with a note) or "reject".
        known_voice: tells whether a `<voice name>` exists (None: any name is taken).
    Raises:
        InvalidSsml: malformed XML, a DOCTYPE / entity declaration, limits exceeded, a bad
            attribute value (the message gives line and column).
        InputRejected: an unsupported element under `unknown="reject"`.
    """
    return _Parser(source, unknown=unknown, known_voice=known_voice).run()
