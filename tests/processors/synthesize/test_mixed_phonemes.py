"""A mixed zh/en span's phonemes: an English word that ends a clause has its punctuation set
off by a space, as the zh G2P writes a Latin word inside a Chinese sentence ("ˈæp ."). Glued
to it, Kokoro swallowed the word (eval mx02: "…下载我们的app。" heard as "…的R")."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from streamtts.processors.synthesize.engine import VoiceSpec
from streamtts.processors.synthesize.registry import VoiceRegistry
from streamtts.processors.synthesize.synthesizer import ResolvedVoice, SpeechRun, Synthesizer

READINGS = {
    ("您可以在", "zh"): "ni↗n kʰɤ↓i↓ ʦai↘",
    ("下载我们的", "zh"): "ɕja↘ʦai↘ wo↓mən tɤ",
    ("设置。", "zh"): "ʂɤ↘ꭧɨ↘.",
    ("app。", "en"): "ˈæp.",
    ("app", "en"): "ˈæp",
    ("Privacy?!", "en"): "pɹˈIvəsi?!",
    ("Settings，", "en"): "sˈɛTɪŋz,",
    ("Call us.", "en"): "kˈɔːl ˌʌs.",
    ("コードは", "ja"): "koːdo wa",
}


@dataclass
class _Engine:
    name: str = "kokoro"
    model_id: str = "fake"

    def phonemize(self, text: str, lang: str) -> str:
        return READINGS[(text, lang)]


def _phonemes(*runs: tuple[str, str]) -> str:
    voice = ResolvedVoice(
        VoiceSpec("v", "kokoro", frozenset({"zh", "en", "ja"}), 24_000, 1.0, None), _Engine(), False
    )  # type: ignore[arg-type]
    return Synthesizer(VoiceRegistry(threads=1)).phonemize(voice, [SpeechRun(t, lang) for t, lang in runs])


@pytest.mark.parametrize(
    ("runs", "expected"),
    [
        ((("下载我们的", "zh"), ("app。", "en")), "ɕja↘ʦai↘ wo↓mən tɤ ˈæp ."),
        ((("下载我们的", "zh"), ("Privacy?!", "en")), "ɕja↘ʦai↘ wo↓mən tɤ pɹˈIvəsi ?!"),
        (
            (("您可以在", "zh"), ("Settings，", "en"), ("下载我们的", "zh")),
            "ni↗n kʰɤ↓i↓ ʦai↘ sˈɛTɪŋz , ɕja↘ʦai↘ wo↓mən tɤ",
        ),
        # Nothing to set off: no punctuation after the word, or the sentence ends in Chinese.
        ((("下载我们的", "zh"), ("app", "en")), "ɕja↘ʦai↘ wo↓mən tɤ ˈæp"),
        ((("您可以在", "zh"), ("app", "en"), ("设置。", "zh")), "ni↗n kʰɤ↓i↓ ʦai↘ ˈæp ʂɤ↘ꭧɨ↘."),
        # Only inside a Chinese sentence: English alone, or with Japanese, as its G2P writes it.
        ((("Call us.", "en"),), "kˈɔːl ˌʌs."),
        ((("コードは", "ja"), ("app。", "en")), "koːdo wa ˈæp."),
    ],
)
def test_an_english_word_ending_a_chinese_clause_is_set_off_from_its_punctuation(
    runs: tuple[tuple[str, str], ...], expected: str
) -> None:
    assert _phonemes(*runs) == expected
