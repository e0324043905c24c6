"""Per-run language tagging of one sentence by script, with CJK disambiguation and text
identification for scripts several languages share.

Script decides first: kana → ja, hangul → ko. Latin, Cyrillic, Devanagari, Arabic (...) text is
identified per sentence among the language table's rows of that script (`identify`,
lingua-language-detector); the request's language wins for its own script, a Latin word
inside a CJK sentence stays English (as before), and a sentence lingua is unsure of takes the
request text's language (or English for Latin). Letters of a script no row has → "other".
Han characters are ambiguous: kana anywhere in the same sentence make them Japanese; otherwise
the request's language hint decides (zh, ja or yue), and obvious Cantonese-only characters
(嘅 咗 唔 佢 冇 哋 ...) make them Cantonese unless Japanese won. Digits and punctuation have no
language of their own: they join a neighbouring run (see `_attach_neutral`).
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from streamtts.processors.segment.exceptions import UnsupportedLanguageHint
from streamtts.processors.segment.number_tokens import TOKEN_RE
from streamtts.schemas.languages import BY_TAG, ROWS, TAGS

LANGS: frozenset[str] = frozenset({*TAGS, "other"})
CJK_LANGS: frozenset[str] = frozenset({"zh", "ja", "ko", "yue"})

# Characters used in written Cantonese but (practically) never in Mandarin or Japanese.
_CANTONESE_MARKERS = frozenset("嘅咗唔佢冇哋嘢喺啲嚟乜咩嗰噉冚攞睇揾搵")
# 係 is Cantonese "to be" but also the traditional form in 關係/聯係: only count it elsewhere.
_CANTONESE_HAI_RE = re.compile(r"(?<![關关聯联干幹])係")

_HINT_ALIASES: dict[str, str] = {
    "zh": "zh",
    "zh-cn": "zh",
    "zh-hans": "zh",
    "zh-tw": "zh",
    "zh-hant": "zh",
    "cmn": "zh",
    "zh-sg": "zh",
    "chinese": "zh",
    "mandarin": "zh",
    "yue": "yue",
    "zh-hk": "yue",
    "zh-yue": "yue",
    "zh-mo": "yue",
    "cantonese": "yue",
    "ja": "ja",
    "jp": "ja",
    "ja-jp": "ja",
    "japanese": "ja",
    "en": "en",
    "en-us": "en",
    "en-gb": "en",
    "english": "en",
    "ko": "ko",
    "ko-kr": "ko",
    "korean": "ko",
}

# A number token with its attached sign, currency, unit or percent travels as one piece so that
# "5kg" or "$3.50" is verbalized by one language (the one it is attached to).
NUMBER_RE = TOKEN_RE


@dataclass(frozen=True)
class Run:
    """A maximal piece of one sentence in one language."""

    text: str
    """The characters of the run, punctuation and spaces included."""
    lang: str
    """One of `LANGS`."""
    phonemes: str | None = None
    """Given IPA for the run (a lexicon entry, an SSML phoneme): no G2P reads it."""


def normalize_lang_hint(hint: str | None) -> str | None:
    """Map a BCP-47-ish hint ("zh-CN", "ja", "zh-HK", "auto") to zh/en/ja/ko/yue or None.

    Raises:
        SegmentationError: for a hint that names no supported language.
    """
    if hint is None:
        return None
    key = hint.strip().lower().replace("_", "-")
    if key in ("", "auto", "und", "mixed"):
        return None
    if key in _HINT_ALIASES:
        return _HINT_ALIASES[key]
    base = key.split("-", 1)[0]
    if base in _HINT_ALIASES:
        return _HINT_ALIASES[base]
    if base in BY_TAG:
        return base
    if base == "no":
        return "nb"
    raise UnsupportedLanguageHint(
        f"unsupported language hint {hint!r}; use one of {', '.join(TAGS)} (or omit it)"
    )


# -- text identification ------------------------------------------------------------------------

IDENTIFY_MIN_CONFIDENCE = 0.5
"""Below this, lingua's pick is not trusted and the sentence keeps the default language (short
texts: "OK, thanks!" scored Afrikaans 0.29, "iPhone 15 Pro" German 0.44)."""
ENGLISH_MARGIN = 2.0
"""A Latin sentence is another language than English only when lingua gives it this many
times English's confidence."""
_LINGUA_LOCK = threading.Lock()
_WORD_RE = re.compile(r"[^\W\d_]{2,}(?:['’-][^\W\d_]+)*")


def _script_rows(script: str) -> tuple[str, ...]:
    return tuple(r.tag for r in ROWS if r.script == script)


@lru_cache(maxsize=32)
def _detector(tags: tuple[str, ...], accurate: bool = False) -> Any:
    """A lingua detector restricted to `tags`: low-accuracy mode (trigram models only, loads in
    under a second for all ~30 Latin rows) or high accuracy (~0.6 s of loading per language on
    2 cores, so only for `CORE_LATIN`)."""
    from lingua import Language, LanguageDetectorBuilder

    languages = [getattr(Language, BY_TAG[t].lingua or "") for t in tags]
    builder = LanguageDetectorBuilder.from_languages(*languages)
    return builder.build() if accurate else builder.with_low_accuracy_mode().build()


CORE_LATIN: tuple[str, ...] = ("en", "es", "it", "pt", "de", "fr", "nl", "pl", "tr", "ca", "ro")
"""Latin rows told apart by lingua's high-accuracy models: the neural ones and the formant
ones closest to them (low accuracy alone read a Spanish price sentence as Catalan, a Turkish
one as English, "Your verification code is …" as French and an Italian price sentence as
Romanian, 0.96)."""
SURE = 0.8
"""A low-accuracy pick outside `CORE_LATIN` (Swedish, Czech, …) is taken at this confidence."""
SIBLINGS: tuple[frozenset[str], ...] = (
    frozenset({"hr", "bs"}),
    frozenset({"ms", "id"}),
    frozenset({"cs", "sk"}),
)
"""Languages lingua splits its confidence between on short text (a Croatian greeting: hr 0.6,
bs 0.4): together they count towards `SURE`, and the best of them is taken."""
OTHER_LATIN_MIN_WORDS = 4
"""... and only from this many words: "Hello world." scored Vietnamese 0.8 in low accuracy;
shorter texts are told apart among `CORE_LATIN` by the accurate models."""


def _best(detector: Any, text: str, tags: tuple[str, ...]) -> tuple[str | None, float, float, float]:
    """(lingua's best tag, its confidence — with its `SIBLINGS`' —, English's confidence, the
    best `CORE_LATIN` confidence) for `text`."""
    values = detector.compute_language_confidence_values(text)
    if not values:
        return None, 0.0, 0.0, 0.0
    by_name = {BY_TAG[t].lingua: t for t in tags}
    english = next((v.value for v in values if v.language.name == "ENGLISH"), 0.0)
    core = max((v.value for v in values if by_name.get(v.language.name) in CORE_LATIN), default=0.0)
    best = by_name.get(values[0].language.name)
    group = next((g for g in SIBLINGS if best in g), frozenset({best}))
    confidence = sum(float(v.value) for v in values if by_name.get(v.language.name) in group)
    return best, confidence, float(english), float(core)


_WARM_TEXT = "Hello there, thank you for calling today"
"""Long enough for every n-gram order lingua uses (it loads each language's models lazily)."""


def warm_identification() -> None:
    """Load lingua's models now (the accurate Latin ones take ~5 s on 2 cores), so that no
    request waits for them: a segment worker's first "Hello there." cost 5 s more without."""
    for script in sorted({r.script for r in ROWS}):
        tags = tuple(t for t in _script_rows(script) if BY_TAG[t].lingua)
        if len(tags) > 1:
            with _LINGUA_LOCK:
                detector = _detector(tags)
            detector.compute_language_confidence_values(_WARM_TEXT)  # lingua loads models lazily
    latin = tuple(t for t in _script_rows("latin") if BY_TAG[t].lingua)
    with _LINGUA_LOCK:
        detector = _detector(tuple(t for t in CORE_LATIN if t in latin), True)
    detector.compute_language_confidence_values(_WARM_TEXT)


def identify(text: str, script: str = "latin", default: str | None = None) -> str | None:
    """The table language of `text` among the rows of `script` that lingua knows; `default`
    when lingua is unsure (confidence under `IDENTIFY_MIN_CONFIDENCE`, one word only, or
    another language not clearly ahead of English) or none fits."""
    tags = tuple(t for t in _script_rows(script) if BY_TAG[t].lingua)
    if not tags:
        return default
    if len(tags) == 1:
        return tags[0]
    words = _WORD_RE.findall(text)
    if len(words) < 2:
        return default  # one word: lingua guesses ("Hello." came back Norwegian)
    text = " ".join(words)
    with _LINGUA_LOCK:
        quick = _detector(tags)
    found, confidence, _, core_confidence = _best(quick, text, tags)
    if script != "latin":
        return found if found is not None and confidence >= IDENTIFY_MIN_CONFIDENCE else default
    if found == "en" and confidence >= IDENTIFY_MIN_CONFIDENCE:
        return "en"
    if (
        found is not None
        and found not in CORE_LATIN
        and len(words) >= OTHER_LATIN_MIN_WORDS
        and confidence >= SURE
        and core_confidence < 0.1
    ):
        return found  # an Italian price sentence scored Romanian 0.8: a core language close by vetoes
    core = tuple(t for t in CORE_LATIN if t in tags)
    with _LINGUA_LOCK:
        accurate = _detector(core, True)
    found, confidence, english, _ = _best(accurate, text, core)
    if found is None or confidence < IDENTIFY_MIN_CONFIDENCE:
        return default
    # English is the product's Latin default: another language must clearly beat it.
    if found != "en" and confidence < ENGLISH_MARGIN * english:
        return default
    return found


def letter_script(ch: str) -> str:
    """The script of a letter outside Latin/CJK, by its Unicode name ("cyrillic",
    "devanagari", "greek", ...)."""
    try:
        return unicodedata.name(ch).split(" ", 1)[0].lower()
    except ValueError:
        return "other"


def _script_language(script: str, letters: str, hint: str | None, default: str | None) -> str:
    """The language of a sentence's letters of one (non-CJK) script."""
    rows = _script_rows(script)
    if hint is not None and hint in rows:
        return hint
    if not rows:
        return "other"
    if len(rows) == 1:
        return rows[0]
    fallback = default if default in rows else ("en" if script == "latin" else rows[0])
    return identify(only_script(letters, script), script, fallback) or fallback


def only_script(text: str, script: str) -> str:
    """`text` with the letters of every other script blanked (what lingua should weigh)."""
    out = []
    for ch in text:
        own = script_of(ch)
        if own == "neutral" or own == script or (own == "other" and letter_script(ch) == script):
            out.append(ch)
        else:
            out.append(" ")
    return "".join(out)


def text_language(text: str) -> str | None:
    """The language of a whole request text's Latin letters (None: unsure or no Latin): the
    default for its sentences too short to identify."""
    if not any(script_of(c) == "latin" for c in text):
        return None
    return identify(only_script(text, "latin"), "latin", None)


def script_of(ch: str) -> str:
    """Classify one character: han, kana, hangul, latin, other (letters) or neutral."""
    cp = ord(ch)
    if 0x3040 <= cp <= 0x30FF or 0x31F0 <= cp <= 0x31FF or 0xFF66 <= cp <= 0xFF9F:
        # ー (U+30FC) and ・ (U+30FB) are in this block; ・ is punctuation-like but Japanese.
        return "kana"
    if (
        0x4E00 <= cp <= 0x9FFF
        or 0x3400 <= cp <= 0x4DBF
        or 0x20000 <= cp <= 0x3134F
        or 0xF900 <= cp <= 0xFAFF
        or cp in (0x3005, 0x3007)
    ):
        return "han"
    if 0xAC00 <= cp <= 0xD7AF or 0x1100 <= cp <= 0x11FF or 0x3130 <= cp <= 0x318F:
        return "hangul"
    cat = unicodedata.category(ch)
    if cat[0] != "L":
        return "neutral"
    if cp < 0x250 or 0x1E00 <= cp <= 0x1EFF:  # Basic Latin .. Latin Extended-B, Latin Ext. Add.
        return "latin"
    return "other"


def han_language(sentence: str, hint: str | None) -> str:
    """Decide the language of Han characters in `sentence` (kana > Cantonese markers > hint)."""
    if any(script_of(c) == "kana" for c in sentence):
        return "ja"
    if hint == "ja":
        return "ja"
    if hint == "yue":
        return "yue"
    if any(c in _CANTONESE_MARKERS for c in sentence) or _CANTONESE_HAI_RE.search(sentence):
        return "yue"
    return "zh"


def _letter_langs(sentence: str, hint: str | None, default: str | None) -> dict[str, str]:
    """The language of each non-CJK script in `sentence` ("latin" and the Unicode script names
    of other letters)."""
    by_script: dict[str, list[str]] = {}
    cjk = False
    for ch in sentence:
        script = script_of(ch)
        if script in ("han", "kana", "hangul"):
            cjk = True
        elif script == "latin":
            by_script.setdefault("latin", []).append(ch)
        elif script == "other":
            by_script.setdefault(letter_script(ch), []).append(ch)
    out: dict[str, str] = {}
    for script in by_script:
        if script == "latin" and cjk and (hint is None or BY_TAG.get(hint, ROWS[0]).script != "latin"):
            out[script] = "en"  # a Latin word in a zh/ja/ko sentence: English, as always
        else:
            out[script] = _script_language(script, sentence, hint, default)
    return out


def _raw_pieces(
    sentence: str, han_lang: str, letter_langs: dict[str, str] | None = None
) -> list[tuple[str, str | None, bool]]:
    """Split into (text, lang or None for neutral, is_number) pieces, one per script change."""
    pieces: list[tuple[str, str | None, bool]] = []
    letters = letter_langs or {}
    script_lang = {"kana": "ja", "han": han_lang, "hangul": "ko", "latin": letters.get("latin", "en")}
    run_start, run_lang = -1, None  # the piece being extended (sliced once it ends: no re-joins)
    pos = 0
    while pos < len(sentence):
        # A number must not start inside a word ("abc123" keeps "123" neutral, not "c123");
        # asked before matching, so a long digit run after a letter is not matched per digit.
        prev = sentence[pos - 1] if pos else " "
        m = (
            NUMBER_RE.match(sentence, pos)
            if sentence[pos] in "$€£¥" or not (prev.isdigit() or script_of(prev) == "latin")
            else None
        )
        if m:
            if run_start >= 0:
                pieces.append((sentence[run_start:pos], run_lang, False))
                run_start = -1
            pieces.append((m.group(0), None, True))
            pos = m.end()
            continue
        script = script_of(sentence[pos])
        lang = (
            script_lang.get(script)
            if script != "other"
            else letters.get(letter_script(sentence[pos]), "other")
        )
        if run_start < 0 or run_lang != lang:
            if run_start >= 0:
                pieces.append((sentence[run_start:pos], run_lang, False))
            run_start, run_lang = pos, lang
        pos += 1
    if run_start >= 0:
        pieces.append((sentence[run_start:], run_lang, False))
    return pieces


def _attach_neutral(pieces: list[tuple[str, str | None, bool]]) -> list[Run]:
    """Give every neutral piece (digits, punctuation, spaces) a neighbour's language.

    Numbers join the run they touch without a space, preferring the preceding one
    ("共3个", "iPhone15"), else the following one ("2024年"); punctuation and spaces join the
    preceding run (so a clause keeps its trailing comma), or the following one at the start.
    """
    langs: list[str | None] = [lang for _, lang, _ in pieces]
    n = len(pieces)
    # The nearest language on each side of every piece, one pass each way (a walk from each
    # neutral piece was quadratic in "a 1 , 1 , 1 , …").
    before: list[str | None] = [None] * n
    after: list[str | None] = [None] * n
    seen: str | None = None
    for i in range(n):
        before[i] = seen
        seen = pieces[i][1] if pieces[i][1] is not None else seen
    seen = None
    for i in range(n - 1, -1, -1):
        after[i] = seen
        seen = pieces[i][1] if pieces[i][1] is not None else seen

    for i, (_, lang, is_number) in enumerate(pieces):
        if lang is not None:
            continue
        chosen: str | None = None
        if is_number:
            touches_prev = i > 0 and pieces[i - 1][1] is not None
            touches_next = i + 1 < n and pieces[i + 1][1] is not None
            if touches_prev:
                chosen = pieces[i - 1][1]
            elif touches_next:
                chosen = pieces[i + 1][1]
        langs[i] = chosen or before[i] or after[i]

    fallback = next((lang for lang in langs if lang is not None), "other")
    texts: list[list[str]] = []
    run_langs: list[str] = []
    for (text, _, _), lang in zip(pieces, langs, strict=True):
        lang = lang or fallback
        if run_langs and run_langs[-1] == lang:
            texts[-1].append(text)
        else:
            texts.append([text])
            run_langs.append(lang)
    return [Run("".join(parts), lang) for parts, lang in zip(texts, run_langs, strict=True)]


def tag_runs(sentence: str, lang_hint: str | None = None, default: str | None = None) -> list[Run]:
    """Split one sentence into language runs.

    Args:
        sentence: one normalized sentence.
        lang_hint: request language (already normalized by `normalize_lang_hint`), or None.
        default: the request text's language (`text_language`), for a sentence lingua is
            unsure of (None: English for Latin).
    Returns:
        Runs in order whose texts concatenate to `sentence`. A sentence with no letters at all
        (e.g. only digits) takes the hint's language, or "en" without a hint.
    """
    if not sentence:
        return []
    pieces = _raw_pieces(
        sentence, han_language(sentence, lang_hint), _letter_langs(sentence, lang_hint, default)
    )
    if all(lang is None for _, lang, _ in pieces):
        return [Run(sentence, lang_hint or "en")]
    return _attach_neutral(pieces)
