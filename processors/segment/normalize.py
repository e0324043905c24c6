"""Unicode clean-up before segmentation: never raises, whatever the input string holds."""

from __future__ import annotations

import re
import unicodedata

from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN
from streamtts.processors.segment.pronunciations import is_placeholder
from streamtts.processors.segment.text_map import MappedText

# NFKC folds full-width ASCII (Ｈｅｌｌｏ１２３ → Hello123) and half-width katakana, but it would
# also turn CJK punctuation into ASCII (，→ ,  ！→ !), which loses the hint that the
# surrounding text is CJK and changes pause handling. These are kept as they are.
_KEEP_CJK_PUNCT = "，！？：；（）～"
_KEEP_RE = re.compile(f"([{re.escape(_KEEP_CJK_PUNCT)}]+)")

# SSML-like markup: <speak>, </p>, <break time="1s"/>, <prosody rate='slow'>. Only tags that look
# like markup are removed so that "a < b > c" stays speakable.
_TAG_RE = re.compile(r"</?[A-Za-z][A-Za-z0-9:_-]*(?:\s[^<>]{0,500})?/?>")
_SPACES_RE = re.compile(r"[^\S\n]+")
_NEWLINES_RE = re.compile(r" *\n[\s]*")

# Ellipsis variants that NFKC turns into "..." keep one code point for the splitter.
_ELLIPSIS_RE = re.compile(r"\.{3,}")


_CODE_MARKS = CODE_OPEN + CODE_CLOSE


def fix_surrogates(text: str) -> str:
    """Join valid surrogate pairs (as left by some JSON decoders) and drop lone surrogates.

    Args:
        text: any Python string, possibly holding code points U+D800..U+DFFF.
    Returns:
        A string that encodes to UTF-8 without error.
    """
    if not any("\ud800" <= c <= "\udfff" for c in text):
        return text
    repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
    return repaired.replace("\ufffd", "")


def _char_filter(text: str) -> str:
    """Controls → space (newline kept), format / private-use / unassigned chars dropped."""
    out: list[str] = []
    for ch in text:
        if ch == "\n":
            out.append(ch)
            continue
        cat = unicodedata.category(ch)
        if cat == "Cc" or cat in ("Zl", "Zp"):
            # \r, \t, \x00 ... and line/paragraph separators: \r\n and U+2029 act as a newline.
            out.append("\n" if ch in "\r\u2028\u2029\x0b\x0c\x85" else " ")
        elif cat == "Co" and (is_placeholder(ch) or ch in _CODE_MARKS):
            out.append(ch)  # a given pronunciation, an SSML say-as kept whole (see `ssml`)
        elif cat in ("Cf", "Co", "Cn", "Cs"):
            continue  # zero-width joiners, BOM, bidi marks, private use: not speakable
        else:
            out.append(ch)
    return "".join(out)


def _nfkc_keep_cjk_punct(text: str) -> str:
    parts = _KEEP_RE.split(text)
    # split() with one capture group alternates: even indices are text, odd indices kept punct.
    return "".join(p if i % 2 else unicodedata.normalize("NFKC", p) for i, p in enumerate(parts))


def normalize_text(text: str, *, strip_markup: bool = True) -> str:
    """Clean text for the front-end.

    Args:
        text: raw request text (any Unicode, may contain lone surrogates or control chars).
        strip_markup: remove SSML/HTML-like tags such as ``<break time="1s"/>``.
    Returns:
        NFKC-normalized text (CJK punctuation preserved), controls and format characters
        removed, runs of spaces collapsed to one, newlines kept (collapsed) as paragraph
        boundaries, "..." folded to "…", stripped at both ends.
    """
    text = fix_surrogates(text)
    text = text.replace("\r\n", "\n")
    text = _char_filter(text)
    if strip_markup:
        text = _TAG_RE.sub(" ", text)
    text = _nfkc_keep_cjk_punct(text)
    text = _ELLIPSIS_RE.sub("…", text)
    text = _SPACES_RE.sub(" ", text)
    text = _NEWLINES_RE.sub("\n", text)
    return text.strip()


_CRLF_RE = re.compile(r"\r\n")
_COMBINING_RE = re.compile(
    r".[\u0300-\u036f\u1ab0-\u1aff\u1dc0-\u1dff\u20d0-\u20ff\ufe20-\ufe2f\u3099\u309a]*", re.S
)


def _filter_char(ch: str) -> str:
    """`_char_filter` for one character."""
    return _char_filter(ch)


def _nfkc_mapped(text: MappedText) -> MappedText:
    """`_nfkc_keep_cjk_punct` with the map kept: NFKC per base character and its combining
    marks (what composes), falling back to aligning the whole when that differs."""
    wanted = _nfkc_keep_cjk_punct(text.text)
    pieces: list[MappedText] = []
    for m in _COMBINING_RE.finditer(text.text):
        cluster = m.group()
        new = cluster if cluster in _KEEP_CJK_PUNCT else unicodedata.normalize("NFKC", cluster)
        a, b = text.source_range(m.start(), m.end())
        if new == cluster:
            pieces.append(text.slice(m.start(), m.end()))
        else:
            pieces.append(MappedText(new, (a,) * len(new), (b,) * len(new)))
    out = MappedText.join(pieces)
    return out if out.text == wanted else text.rewritten(wanted)


def normalize_mapped(text: str, *, strip_markup: bool = True, tracked: bool = True) -> MappedText:
    """`normalize_text`, keeping where each character came from in `text` (for word
    timestamps; untracked: the text alone); `normalize_mapped(t).text == normalize_text(t)`
    for every string."""
    if not tracked:
        return MappedText.of(normalize_text(text, strip_markup=strip_markup), tracked=False)
    fixed = fix_surrogates(text)
    mapped = MappedText.of(text) if fixed == text else MappedText.of(text).rewritten(fixed)
    mapped = mapped.sub(_CRLF_RE, "\n").map_chars(_filter_char)
    if strip_markup:
        mapped = mapped.sub(_TAG_RE, " ")
    mapped = _nfkc_mapped(mapped)
    mapped = mapped.sub(_ELLIPSIS_RE, "…").sub(_SPACES_RE, " ").sub(_NEWLINES_RE, "\n")
    return mapped.strip()


def is_speakable_char(ch: str) -> bool:
    """True for letters, digits and given pronunciations: the characters that produce speech."""
    return unicodedata.category(ch)[0] in ("L", "N") or is_placeholder(ch)


def has_speakable(text: str) -> bool:
    """True if any character of `text` is a letter or a digit."""
    return any(is_speakable_char(c) for c in text)
