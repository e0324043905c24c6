"""Scoring transcripts against what a listener should have heard, and audio sanity checks.

Error rates are corpus-level (edits over reference units, summed over sentences):
character error rate (CER) for zh, ja, ko and mixed zh/en, word error rate (WER) for en.

Both the reference and the transcript are folded the same way before scoring, so that
spelling conventions of the recognizer do not count as errors:
- Chinese: traditional → simplified (Whisper often writes traditional), single digit
  characters (零一二…九, 两, 幺) → Arabic digits, Latin lower-cased, punctuation and spaces
  removed. A code read digit by digit ("三八二九一五") and written as "382915" both fold to
  "382915"; read as a quantity ("三十八万…") it keeps 十/万 and costs errors — that is the
  difference the check must see.
- Japanese: both sides become their katakana reading (pyopenjtalk), after Arabic digits are
  spelled one by one, so 下さい/ください or 一/1 do not count; punctuation removed.
- English: Whisper's own English normalizer (spelling, numbers → digits), then a run of digit
  tokens becomes one token ("555 123 4567" = "5551234567").
- Korean: punctuation and spaces removed.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np

_ZH_DIGITS = {c: str(i) for i, c in enumerate("零一二三四五六七八九")} | {"〇": "0", "两": "2", "幺": "1"}
_JA_DIGIT_KANA = ("ゼロ", "イチ", "ニ", "サン", "ヨン", "ゴ", "ロク", "ナナ", "ハチ", "キュウ")
_EN_DIGIT_WORDS = {
    w: str(i) for i, w in enumerate("zero one two three four five six seven eight nine".split())
}
_EN_DIGIT_WORDS["oh"] = "0"


def _strip_punct(text: str) -> str:
    return "".join(c for c in text if unicodedata.category(c)[0] in "LN")


@cache
def _zhconv() -> Any:
    import zhconv

    return zhconv


@cache
def _en_normalizer() -> Any:
    from whisper_normalizer.english import EnglishTextNormalizer

    return EnglishTextNormalizer()


def fold_zh(text: str) -> str:
    text = _zhconv().convert(unicodedata.normalize("NFKC", text), "zh-cn").lower()
    return "".join(_ZH_DIGITS.get(c, c) for c in _strip_punct(text))


_JA_O_ROW = "オコソトノホモヨロゴゾドボポョ"
_JA_PARTICLES = str.maketrans({"ワ": "ハ", "ヲ": "オ", "ヘ": "エ"})


def fold_ja(text: str) -> str:
    import pyopenjtalk

    text = unicodedata.normalize("NFKC", text)
    text = re.sub(r"\d", lambda m: _JA_DIGIT_KANA[int(m.group(0))], text)
    kana = _strip_punct(str(pyopenjtalk.g2p(text, kana=True, use_sudachi_kanji_yomi=False)))
    # The reading of kana-only text differs from that of kanji in how particles and long
    # vowels are written (は: ワ/ハ, きゅう: キュウ/キュー): fold those both ways.
    kana = kana.replace("ー", "").replace("ュウ", "ュ").translate(_JA_PARTICLES)
    return re.sub(f"(?<=[{_JA_O_ROW}])ウ", "", kana)


def fold_ko(text: str) -> str:
    return _strip_punct(unicodedata.normalize("NFKC", text)).lower()


def en_words(text: str) -> list[str]:
    normalized = str(_en_normalizer()(text))
    tokens = [_EN_DIGIT_WORDS.get(t, t) for t in normalized.split()]
    out: list[str] = []
    for token in tokens:
        if out and token.isdigit() and out[-1].isdigit():
            out[-1] += token
        else:
            out.append(token)
    return out


def fold(text: str, lang: str) -> list[str]:
    """Scoring units of `text`: characters (zh, mixed, yue, ja, ko) or words (en)."""
    if lang == "en":
        return en_words(text)
    if lang == "ja":
        return list(fold_ja(text))
    if lang == "ko":
        return list(fold_ko(text))
    if lang in ("zh", "mixed", "yue"):
        return list(fold_zh(text))
    return list(fold_alphabetic(text))


# How a number is grouped or a currency written is the recognizer's spelling, not what was
# heard: "5.812" / "5 812" = "5812", "89 €" = "89 Euro", "R$ 120" = "120 reais".
_GROUPING = re.compile(r"(?<=\d)[.,'\u00a0\u202f ](?=\d{3}(?!\d))")
_CURRENCY_WORDS = (
    (re.compile(r"\b(?:euros?|eur)\b"), "€"),
    (re.compile(r"\breais\b"), "r$"),
    (re.compile(r"\b(?:dollars?|dólares|dolares)\b"), "$"),
    (re.compile(r"(?:rupees?|रुपये|रुपए|روپے)"), "₹"),
)
_SYMBOL_FIRST = re.compile(r"(r\$|€|\$|₹)\s*(\d+)")  # text is lower-cased by then
_SYMBOL_NAMES = {"r$": " brl ", "€": " eur ", "$": " usd ", "₹": " inr "}
_ABBREVIATIONS = re.compile(r"\b(?:nr|no|n°|nº|n\.º)\.?(?=\s*\d)")
"""'Nr. 5812', 'n° 7340', 'No. 4': the word "number" in any of these languages."""


def fold_alphabetic(text: str) -> str:
    """Letters and digits of an alphabetic language, lower-cased, without spaces or punctuation
    (a character error rate, as the issue's trial measured); number grouping, currency symbols
    and "No."-style abbreviations folded the same way on both sides."""
    text = unicodedata.normalize("NFC", text).lower()
    text = _GROUPING.sub("", text)
    for pattern, symbol in _CURRENCY_WORDS:
        text = pattern.sub(symbol, text)
    text = _SYMBOL_FIRST.sub(r"\2 \1", text)
    for symbol, name in _SYMBOL_NAMES.items():
        text = text.replace(symbol, name)
    text = _ABBREVIATIONS.sub(" # ", text)
    text = re.sub(r"\b(?:nummer|numéro|numero|número|number|नंबर)\b", " # ", text)
    return "".join(c for c in text if c.isalnum() or c == "#" or unicodedata.category(c)[0] == "M")


def edit_distance(ref: Sequence[str], hyp: Sequence[str]) -> int:
    """Levenshtein distance between two token sequences."""
    prev = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        cur = [i]
        for j, h in enumerate(hyp, 1):
            cur.append(min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (r != h)))
        prev = cur
    return prev[-1]


@dataclass(frozen=True)
class Score:
    edits: int
    units: int

    @property
    def rate(self) -> float:
        return self.edits / self.units if self.units else 0.0

    def __add__(self, other: Score) -> Score:
        return Score(self.edits + other.edits, self.units + other.units)


def score(reference: str, transcript: str, lang: str) -> Score:
    """Edits between what should have been heard and what the recognizer heard."""
    ref, hyp = fold(reference, lang), fold(transcript, lang)
    return Score(edit_distance(ref, hyp), len(ref))


# -- audio checks ------------------------------------------------------------------------------

CLIP_LEVEL = 32_700 / 32_768
"""A sample at or above this magnitude counts as clipped (int16 full scale, minus rounding)."""
JOIN_STEP = 0.05
"""A step this large between the last sample before a join and the first after it is a click
(chunks are faded to zero at their edges, so a clean join steps by almost nothing)."""


def clipping_ratio(samples: np.ndarray) -> float:
    """Fraction of samples at full scale."""
    x = np.asarray(samples, np.float32)
    return float(np.mean(np.abs(x) >= CLIP_LEVEL)) if x.size else 0.0


def join_clicks(samples: np.ndarray, joins: Sequence[int]) -> int:
    """Joins (sample offsets where one chunk ends and the next begins) with a click."""
    x = np.asarray(samples, np.float32)
    return sum(1 for j in joins if 0 < j < x.size and abs(float(x[j]) - float(x[j - 1])) >= JOIN_STEP)
