"""An SSML subset → blocks of plain text for the segmenter (pure; no Kafka).

Supported: `speak`, `p`, `s`, `break` (time / strength), `say-as` (characters, digits,
telephone, cardinal, ordinal, date, time, currency), `sub alias`, `phoneme` (ipa; pinyin for
zh), `prosody rate`, `lang xml:lang`, `voice name`, `mark`. Other elements are read as plain
text with a note, or refused (policy `unknown="reject"`).

Parsed by expat with everything that expands or fetches refused: a DOCTYPE (so no entity
can be declared: no billion laughs), external entities, parameter entities. Depth, element
count and attribute sizes are bounded, so hostile SSML fails in microseconds.

A *block* is a stretch spoken by one voice at one rate in one language hint, up to the next
`break`. Its text is a `MappedText` into the SSML source: word timestamps point into the
document the caller sent, and marks are positions in it.
"""

from __future__ import annotations

import bisect
import re
import xml.parsers.expat
from collections.abc import Callable
from dataclasses import dataclass, field

from streamtts.processors.segment.exceptions import InputRejected, SegmentationError, UnreadableNumber
from streamtts.processors.segment.input_policy import check_characters, control_rejection, is_control
from streamtts.processors.segment.langid import normalize_lang_hint, script_of
from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN
from streamtts.processors.segment.pronunciations import Given, GivenTable, blank_placeholders
from streamtts.processors.segment.say_as import INTERPRETATIONS, SayAsError, say_as
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.languages import SENTENCE_STOPS
from streamtts.schemas.lexicon import IPA_CHARS, MAX_GRAPHEME_CHARS, PINYIN_RE
from streamtts.schemas.request import VOICE_PATTERN

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

_STRENGTH_MS = {"none": 0, "x-weak": 100, "weak": 200, "medium": 400, "strong": 700, "x-strong": 1000}
_RATE_WORDS = {"x-slow": 0.6, "slow": 0.8, "medium": 1.0, "default": 1.0, "fast": 1.25, "x-fast": 1.5}
_TIME_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)\s*$")
_RATE_RE = re.compile(r"^\s*([+-]?\d+(?:\.\d+)?)\s*(%?)\s*$")
_WS_RE = re.compile(r"\s+")
_SPACE_BEFORE_PUNCT_RE = re.compile(r" +([\ue001]?[.,!?;:])")
_MARKS = CODE_OPEN + CODE_CLOSE

# Elements read as they are (their text is spoken); the others have their own handling.
_CONTAINERS = frozenset({"speak", "p", "s", "prosody", "lang", "voice"})
_LEAVES = frozenset({"say-as", "sub", "phoneme"})
_KNOWN = _CONTAINERS | _LEAVES | {"break", "mark"}


class InvalidSsml(SegmentationError):
    """Malformed or refused SSML; the message says what and where (line, column)."""

    reason = "invalid_ssml"


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


def looks_like_ssml(text: str) -> bool:
    """True for text that is an SSML document (starts with `<speak` or an XML declaration)."""
    head = text.lstrip()[:64].lower()
    return head.startswith("<speak") or (head.startswith("<?xml") and "<speak" in text[:512].lower())


class _Parser:
    def __init__(self, source: str, *, unknown: str, known_voice: Callable[[str], bool] | None) -> None:
        # Lone surrogates cannot be UTF-8 (what expat reads); one character each keeps positions.
        source = "".join("\ufffd" if "\ud800" <= c <= "\udfff" else c for c in source)
        self.source = source
        self.unknown = unknown
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
        self.blocks: list[Block] = []
        self.current: list[MappedText] = []
        self.current_style = Style()
        self.marks: list[tuple[str, int]] = []
        self.given = GivenTable()
        self.notes: list[str] = []
        self.doc_lang: str | None = None
        self.silence_ms = 0
        """The breaks' silence so far (bounded by MAX_DOCUMENT_BREAK_MS)."""
        self.pending: tuple[str, int] | None = None
        """Character data whose end is known only at the next event."""
        self.saw_root = False
        self.p = xml.parsers.expat.ParserCreate()
        # Kept as text arrives, so no handler rescans the document or the block (a document
        # of 1000 say-as elements must parse in linear time).
        self._tail = ""
        """The current block's last non-space character."""
        self._letter_lang: str | None = None
        """The language of the current block's last letter."""
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
        self._append(piece.sub(_WS_RE, " ").map_chars(blank_placeholders))

    def _in_leaf(self) -> bool:
        return any(f.tag in _LEAVES for f in self.stack)

    def _leaf(self) -> _Frame | None:
        return next((f for f in self.stack if f.tag in _LEAVES), None)

    def _append(self, piece: MappedText) -> None:
        if not piece.text:
            return
        style = self.stack[-1].style if self.stack else Style()
        if style != self.current_style:
            self._close_block()
            self.current_style = style
        self._track(piece.text)
        self.current.append(piece)

    def _track(self, text: str) -> None:
        stripped = text.rstrip()
        if stripped:
            self._tail = stripped[-1]
        for ch in reversed(text):
            lang = _SCRIPT_LANG.get(script_of(ch))
            if lang is not None:
                self._letter_lang = lang
                break

    def _close_block(self, pause_ms: int | None = None) -> None:
        text = MappedText.join(self.current).sub(_SPACE_BEFORE_PUNCT_RE, lambda m: m.group(1))
        self._tail, self._letter_lang = "", None
        if text.text.strip():
            if len(self.blocks) >= MAX_BLOCKS:
                raise self._error(
                    f"more than {MAX_BLOCKS} blocks of text "
                    "(each break, voice, language or rate change starts one)"
                )
            self.blocks.append(Block(text, self.current_style, pause_ms))
        elif pause_ms is not None and self.blocks:
            prev = self.blocks[-1]
            prev.pause_after_ms = min(MAX_BREAK_MS, (prev.pause_after_ms or 0) + pause_ms)
        self.current = []

    def _boundary(self, paragraph: bool) -> None:
        """End the text so far with a sentence end ("\n" for a paragraph)."""
        last = self._tail
        if not last:
            return
        at = self._pos()
        if paragraph:
            mark = "\n"
        elif last == ".":
            mark = " "  # a period ends a sentence only before a space ("3.14" does not)
        elif last in SENTENCE_STOPS:
            return
        else:
            mark = "。" if script_of(last) in ("han", "kana", "hangul") else "."
        self._track(mark)
        self.current.append(MappedText(mark, (at,) * len(mark), (at,) * len(mark)))

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
            self._unknown(tag, inside=self._leaf().tag)  # type: ignore[union-attr]
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
            self._unknown(tag)
        self.stack.append(_Frame(tag, style, attrs, self._after_tag()))

    def _after_tag(self) -> int:
        # Where the element's content begins: after the start tag's ">".
        end = self.source.find(">", self._pos())
        return end + 1 if end >= 0 else self._pos()

    def end(self, name: str) -> None:
        self._flush_pending()
        frame = self.stack.pop()
        if frame.tag in _LEAVES and not self._in_leaf():
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
                self._note(f"xml:lang {lang_attr[:20]!r} is not a language we speak; ignored")
            if tag == "speak":
                self.doc_lang = lang
            style = Style(lang, style.voice, style.rate) if lang else style
        if tag == "voice":
            name = attrs.get("name", "").strip()
            if not name:
                self._note("<voice> without a name; ignored")
            elif not re.match(VOICE_PATTERN, name) or (
                self.known_voice is not None and not self.known_voice(name)
            ):
                self._note(f"voice {name[:60]!r} is not known; the request's voice speaks instead")
            else:
                style = Style(style.lang, name, style.rate)
        if tag == "prosody":
            rate = attrs.get("rate")
            if rate is not None:
                style = Style(style.lang, style.voice, self._rate(rate, style.rate))
            for other in sorted(set(attrs) - {"rate"}):
                self._note(f"prosody {other} is not supported; ignored")
        return style

    def _rate(self, value: str, current: float) -> float:
        word = _RATE_WORDS.get(value.strip().lower())
        if word is not None:
            return current * word
        m = _RATE_RE.match(value)
        if not m:
            raise self._error(f"prosody rate {value[:40]!r} is not a rate (x-slow … x-fast, 80%, +20%, 1.2)")
        number, percent = float(m.group(1)), m.group(2)
        if percent:
            factor = (1 + number / 100) if value.strip()[0] in "+-" else number / 100
        else:
            factor = number
        if factor <= 0:
            raise self._error(f"prosody rate {value[:40]!r} must be above zero")
        return current * factor

    def _break(self, attrs: dict[str, str]) -> None:
        time = attrs.get("time")
        if time is not None:
            m = _TIME_RE.match(time)
            if not m:
                raise self._error(f"break time {time[:40]!r} is not a duration like 500ms or 1.5s")
            ms = float(m.group(1)) * (1000 if m.group(2) == "s" else 1)
        else:
            strength = attrs.get("strength", "medium").strip().lower()
            if strength not in _STRENGTH_MS:
                raise self._error(f"break strength {strength[:20]!r} is not one of {', '.join(_STRENGTH_MS)}")
            ms = _STRENGTH_MS[strength]
        if ms == 0:
            return
        if ms > MAX_BREAK_MS:
            self._note(f"a break of {ms:.0f} ms was shortened to {MAX_BREAK_MS} ms")
            ms = MAX_BREAK_MS
        if self.silence_ms + ms > MAX_DOCUMENT_BREAK_MS:
            self._note(f"breaks past {MAX_DOCUMENT_BREAK_MS // 1000} s of silence in all were dropped")
            ms = MAX_DOCUMENT_BREAK_MS - self.silence_ms
            if ms <= 0:
                return  # as strength="none": no pause, no boundary
        self.silence_ms += int(ms)
        self._close_block(int(ms))

    def _leaf_done(self, frame: _Frame) -> None:
        content = _WS_RE.sub(" ", "".join(frame.text)).strip()
        start = frame.content_start if frame.content_start is not None else frame.start
        end = frame.content_end if frame.content_end is not None else start
        style = frame.style
        lang = style.lang or self._letter_lang or self.doc_lang or self._document_lang()
        spoken: str
        if frame.tag == "sub":
            alias = frame.attrs.get("alias")
            if alias is None:
                raise self._error("<sub> needs an alias")
            spoken = _WS_RE.sub(" ", alias).strip()
        elif frame.tag == "say-as":
            kind = frame.attrs.get("interpret-as", "").strip().lower()
            if kind not in INTERPRETATIONS:
                self._unknown(f"say-as interpret-as={kind!r}")
                spoken = blank_placeholders(content)
            else:
                try:
                    spoken = say_as(kind, content, lang, frame.attrs.get("format"))
                except (SayAsError, UnreadableNumber) as err:
                    self._note(f"{err}; read as written")
                    spoken = content
        else:  # phoneme
            spoken = self._phoneme(frame, content, lang)
        if frame.tag != "phoneme":
            spoken = blank_placeholders(spoken)
        if not spoken:
            return
        if frame.tag == "say-as":
            # Kept whole: the splitter never cuts a phone number or an amount in two.
            spoken = CODE_OPEN + spoken + CODE_CLOSE
        piece = MappedText(spoken, (start,) * len(spoken), (end,) * len(spoken))
        if frame.tag != "phoneme":
            # Words read out stay words of their own beside the text around them ("Code"
            # + "ay, bee" must not glue into one word); the segmenter folds double spaces.
            before = MappedText(" ", (start,), (start,)) if spoken.strip(_MARKS)[:1].isascii() else None
            after = MappedText(" ", (end,), (end,)) if spoken.strip(_MARKS)[-1:].isascii() else None
            piece = MappedText.join([p for p in (before, piece, after) if p is not None])
        self._append(piece)

    def _document_lang(self) -> str:
        """The language the document's script says (computed once)."""
        if self._source_lang is None:
            self._source_lang = _script_lang(self.source)
        return self._source_lang

    def _phoneme(self, frame: _Frame, content: str, lang: str) -> str:
        alphabet = frame.attrs.get("alphabet", "ipa").strip().lower()
        ph = frame.attrs.get("ph", "").strip()
        if not ph:
            raise self._error("<phoneme> needs a ph attribute")
        if alphabet == "ipa":
            import unicodedata

            if not IPA_CHARS.match(unicodedata.normalize("NFD", ph)):
                raise self._error(f"phoneme ph {ph[:40]!r} is not IPA")
            ipa = unicodedata.normalize("NFC", ph)
        elif alphabet in ("pinyin", "x-pinyin") and PINYIN_RE.match(ph.lower().replace("v", "ü")):
            from streamtts.processors.segment.lexicon import pinyin_ipa

            try:
                ipa = pinyin_ipa(ph)
            except ValueError as err:
                raise self._error(f"phoneme ph {ph[:40]!r}: {err}") from None
            lang = "zh"
        else:
            self._unknown(f"phoneme alphabet={alphabet!r}")
            return blank_placeholders(content)
        if not content:
            raise self._error("<phoneme> needs the text it pronounces")
        if len(content) > MAX_GIVEN_CHARS:
            raise self._error(f"<phoneme> pronounces at most {MAX_GIVEN_CHARS} characters (a word or a name)")
        return self.given.add(Given(content, ipa, lang))

    def _unknown(self, what: str, inside: str | None = None) -> None:
        label = f"<{what}>" if not what.startswith("say-as") and not what.startswith("phoneme") else what
        if inside:
            label = f"<{what}> inside <{inside}>"
        if self.unknown == "reject":
            raise InputRejected("unsupported_ssml", f"SSML {label} is not supported")
        self._note(f"SSML {label} is not supported; its text is read as written")

    def _note(self, note: str) -> None:
        if note not in self.notes and len(self.notes) < 32:
            self.notes.append(note[:200])

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
        self._close_block()
        lang = self.doc_lang or self._document_lang()
        return SsmlDocument(self.blocks, self.marks, self.given, self.notes, lang)

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


_CHAR_REF_RE = re.compile(r"&#([xX][0-9a-fA-F]{1,8}|[0-9]{1,10});")
_SCRIPT_LANG = {"han": "zh", "kana": "ja", "hangul": "ko", "latin": "en"}


def _script_lang(source: str) -> str:
    text = re.sub(r"<[^>]*>", " ", source)
    scripts = {script_of(c) for c in text}
    if "kana" in scripts:
        return "ja"
    if "hangul" in scripts:
        return "ko"
    if "han" in scripts:
        return "zh"
    return "en"


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
