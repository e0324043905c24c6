"""`auto` keeps one speaker: per request where one voice speaks everything, else per sentence,
and a voice change inside a sentence only when no single voice can speak it."""

from __future__ import annotations

from typing import ClassVar

import pytest

from streamtts.processors.segment.segmenter import segment_text
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.segment.voice_plan import VoicePlan, plan_voices
from streamtts.processors.synthesize.registry import VoiceRegistry


@pytest.fixture(scope="module")
def registry() -> VoiceRegistry:
    return VoiceRegistry()  # voice packs only: engines load lazily, never here


class OnlySingleLanguageVoices:
    """A catalog in which no voice speaks two languages (e.g. a site with Piper voices only)."""

    voices: ClassVar[dict[str, str]] = {"zh": "zh_only", "en": "en_only"}

    def languages_of(self, voice_id: str) -> frozenset[str]:
        return frozenset(k for k, v in self.voices.items() if v == voice_id)

    def voice_for_langs(self, langs: frozenset[str]) -> str | None:
        return self.voices[next(iter(langs))] if len(langs) == 1 else None


def test_a_mixed_request_gets_one_kokoro_voice_even_for_its_english_sentences(
    registry: VoiceRegistry,
) -> None:
    spans = segment_text("请在App里打开您的account设置。Thank you for waiting. 谢谢！")
    plans = [p for _, p in plan_voices(spans, None, registry)]
    assert {p.voice for p in plans} == {"jm_kumo"}
    assert {p.scope for p in plans} == {"request"}


@pytest.mark.parametrize(
    ("text", "voice"),
    [
        ("Thank you for calling. How can I help you today?", "en_joe"),  # native English voice
        ("您好，请问有什么可以帮您？", "jm_kumo"),
        ("お電話ありがとうございます。", "jf_alpha"),
        ("ご注文のiPhoneは明日届きます。", "jm_kumo"),  # ja + en: a voice that speaks both
    ],
)
def test_auto_picks_the_best_single_voice_for_the_request(
    registry: VoiceRegistry, text: str, voice: str
) -> None:
    plans = [p for _, p in plan_voices(segment_text(text), None, registry)]
    assert {p.voice for p in plans} == {voice}


def test_a_named_voice_that_cannot_speak_a_sentence_is_replaced_for_the_whole_sentence(
    registry: VoiceRegistry,
) -> None:
    spans = segment_text("Hello there, welcome back. 请在App里打开您的account设置，然后点保存。Bye now.")
    by_sentence = {(s.sentence_index, p) for s, p in plan_voices(spans, "en_joe", registry)}
    assert by_sentence == {
        (0, VoicePlan(None, None)),  # en_joe speaks it itself
        (1, VoicePlan("jm_kumo", "sentence")),  # every span of the sentence, English words too
        (2, VoicePlan(None, None)),
    }


def test_the_voice_changes_inside_a_sentence_only_when_no_voice_speaks_it() -> None:
    spans = segment_text("请在App里打开您的account设置。谢谢。", limits=SpanLimits(first_min_chars=0))
    planned = plan_voices(spans, None, OnlySingleLanguageVoices())
    first = [(s.text, s.lang, p) for s, p in planned if s.sentence_index == 0]
    assert first == [  # the mixed span is split: each run with the voice of its language
        ("请在", "zh", VoicePlan("zh_only", "span")),
        ("App", "en", VoicePlan("en_only", "span")),
        ("里打开您的", "zh", VoicePlan("zh_only", "span")),
        ("account", "en", VoicePlan("en_only", "span")),
        ("设置。", "zh", VoicePlan("zh_only", "span")),
    ]
    assert [s.ends_sentence for s, p in planned] == [False] * 4 + [True, True]
    assert [s.index for s, _ in planned] == list(range(6))
    second = [p for s, p in planned if s.sentence_index == 1]
    assert second == [VoicePlan("zh_only", "sentence")]


def test_unspeakable_scripts_do_not_change_the_choice(registry: VoiceRegistry) -> None:
    spans = segment_text("Hello. བཀྲ་ཤིས་བདེ་ལེགས. Goodbye.")
    assert {p.voice for _, p in plan_voices(spans, None, registry)} == {"en_joe"}
