"""phonemizer's "words count mismatch" warning (espeak reads "21st" as two words) is harmless
for us (word_timing aligns words itself) and filled every worker's log: it is dropped at
phonemizer's logger; every other warning of that logger still gets through."""

from __future__ import annotations

import logging

import pytest

from streamtts.processors.synthesize.g2p import EnglishG2P, KoreanG2P
from streamtts.processors.synthesize.piper import _EspeakPhonemizer

MISMATCH = "twenty-one 21st"  # espeak makes three words of these two


@pytest.mark.parametrize("make", [EnglishG2P, lambda: _EspeakPhonemizer("en-us")], ids=["kokoro_en", "piper"])
def test_word_count_mismatch_is_not_logged_and_other_warnings_are(
    make, caplog: pytest.LogCaptureFixture
) -> None:  # type: ignore[no-untyped-def]
    phonemize = make()
    with caplog.at_level(logging.WARNING):
        assert phonemize(MISMATCH)
        logging.getLogger("phonemizer").warning("espeak data not found")  # what must still show
    messages = [r.getMessage() for r in caplog.records if r.name == "phonemizer"]
    assert messages == ["espeak data not found"]


def test_korean_g2p_is_quiet_too(caplog: pytest.LogCaptureFixture) -> None:
    phonemize = KoreanG2P()
    with caplog.at_level(logging.WARNING):
        phonemize("안녕하세요 21st")
    assert not [r for r in caplog.records if "words count mismatch" in r.getMessage()]
