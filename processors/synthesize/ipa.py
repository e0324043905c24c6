"""IPA (lexicon entries, SSML `<phoneme>`) → each engine's own phoneme alphabet (pure).

Kokoro speaks misaki's alphabet: IPA with one letter per diphthong and affricate ("eɪ" → A,
"dʒ" → ʤ), tone arrows for Mandarin; Piper speaks espeak-ng IPA, NFD-decomposed. Symbols an
engine has no token for are dropped; a pronunciation with nothing left is "" and the caller
falls back to the G2P's reading of the text.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Container

_TIE = "\u0361\u035c"
# misaki's espeak → Kokoro map (misaki.espeak.EspeakFallback.E2M), for IPA written by hand.
# fmt: off
_KOKORO_MAP = {
    "eɪ": "A", "aɪ": "I", "aʊ": "W", "ɔɪ": "Y", "oʊ": "O", "əʊ": "Q",
    "dʒ": "ʤ", "tʃ": "ʧ", "ts": "ʦ", "dz": "ʣ",
    "ɚ": "əɹ", "ɝ": "ɜɹ", "r": "ɹ", "ɡ": "g", "ɫ": "l", "ɐ": "ə",
}
# fmt: on
_KOKORO_MULTI = sorted(_KOKORO_MAP.items(), key=lambda kv: -len(kv[0]))
# IPA tone letters → the arrows misaki's Mandarin phonemes use.
_TONES = (("˧˩˧", "↓"), ("˨˩˦", "↓"), ("˧˥", "↗"), ("˥˩", "↘"), ("˥˥", "→"), ("˥", "→"))


def kokoro_phonemes(ipa: str, lang: str, vocab: Container[str]) -> str:
    """`ipa` in Kokoro's alphabet (characters without a token removed)."""
    s = unicodedata.normalize("NFC", ipa).translate({ord(c): None for c in _TIE})
    if lang in ("zh", "yue"):
        for old, new in _TONES:
            s = s.replace(old, new)
    for old, new in _KOKORO_MULTI:
        s = s.replace(old, new)
    if lang == "en":
        s = s.replace("ː", "")  # US English in Kokoro has no length marks
    return " ".join("".join(c for c in word if c in vocab) for word in s.split()).strip()


def espeak_phonemes(ipa: str, known: Container[str]) -> str:
    """`ipa` as Piper's espeak-ng IPA (NFD; characters without an id removed)."""
    s = unicodedata.normalize("NFD", ipa).translate({ord(c): None for c in _TIE}).replace("g", "ɡ")
    return " ".join("".join(c for c in word if c in known) for word in s.split()).strip()
