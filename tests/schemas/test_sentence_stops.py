"""One set of sentence stops from the language table, used by the WebSocket's streamed text,
the splitter, SSML and captions: a Hindi or an Arabic sentence ends at its own punctuation
everywhere, not only in the splitter."""

from __future__ import annotations

import pytest

from streamtts.gateway.ws_sentences import split_new_sentences, split_sentences
from streamtts.processors.segment.splitter import SENTENCE_END
from streamtts.schemas import WordTiming
from streamtts.schemas.captions import cues
from streamtts.schemas.languages import ROWS, SENTENCE_STOPS
from streamtts.schemas.lexicon import LexiconEntry

STREAMED = {
    "hi": ("नमस्ते। आप कैसे हैं? मैं ठीक हूँ।", ["नमस्ते।", "आप कैसे हैं?", "मैं ठीक हूँ।"]),
    "ar": ("مرحبا؟ كيف يمكنني مساعدتك؟ شكرا", ["مرحبا؟", "كيف يمكنني مساعدتك؟"]),
    "hy": ("Բարև ձեզ։ Ինչով կարող եմ օգնել", ["Բարև ձեզ։"]),
}


def test_every_stop_of_the_table_ends_a_sentence_everywhere() -> None:
    for row in ROWS:
        assert set(row.sentence_end) <= SENTENCE_STOPS, row.tag
        assert set(row.sentence_end) <= SENTENCE_END, row.tag


@pytest.mark.parametrize("lang", sorted(STREAMED))
def test_streamed_text_is_cut_at_the_languages_own_punctuation(lang: str) -> None:
    """Fed one character at a time, as an LLM's tokens arrive over the WebSocket."""
    text, expected = STREAMED[lang]
    buffer, pending, done = "", 0, []
    for ch in text:
        new_from = len(buffer)
        buffer += ch
        sentences, buffer, pending = split_new_sentences(buffer, new_from, pending)
        done += sentences
    assert done == expected
    assert split_sentences(text)[0] == expected, "the same cuts on the whole text"


def test_a_latin_period_still_waits_for_its_space() -> None:
    assert split_sentences("It costs 3.5 dollars. And th") == (["It costs 3.5 dollars."], "And th")


def test_a_caption_cue_ends_at_a_danda() -> None:
    def word(text: str, at: int, start: int, trailing: str) -> WordTiming:
        return WordTiming(
            text=text,
            start_ms=start,
            end_ms=start + 200,
            char_start=at,
            char_end=at + len(text),
            trailing=trailing,
        )

    words = [word("नमस्ते", 0, 0, "। "), word("धन्यवाद", 8, 220, "।")]
    assert [c.text for c in cues(words)] == ["नमस्ते।", "धन्यवाद।"]


def test_a_lexicon_entry_may_name_any_language_of_the_table() -> None:
    assert LexiconEntry(grapheme="UPI", alias="यू पी आई", language="hi").language == "hi"
    assert LexiconEntry(grapheme="STC", alias="إس تي سي", language="ar").language == "ar"
    with pytest.raises(ValueError, match="unknown language 'klingon'"):
        LexiconEntry(grapheme="Qapla", alias="kapla", language="klingon")
