"""Scoring folds recognizer conventions away but keeps the difference between a code read
digit by digit and one read as a quantity; audio checks count clipping and clicks."""

from __future__ import annotations

import numpy as np
import pytest

from streamtts.bench.speech_eval import load_sentences
from streamtts.bench.speech_scoring import clipping_ratio, edit_distance, fold, join_clicks, score
from streamtts.errors import ConfigError


def test_chinese_folding() -> None:
    assert fold("驗證碼是三八二九一五。", "zh") == fold("验证码是382915", "zh")  # traditional, digits
    assert fold("打开App设置", "mixed") == fold("打开app设置。", "mixed")
    # The quantity reading keeps its 十/万/千/百: it must cost errors against the code.
    assert score("验证码是382915", "验证码是三十八万两千九百一十五", "zh").edits >= 5
    assert score("验证码是382915", "验证码是三八二九一五", "zh").edits == 0


def test_english_folding_uses_whispers_normalizer() -> None:
    assert fold("Call 555-123-4567.", "en") == fold(
        "call five five five one two three four five six seven", "en"
    )
    assert score("It costs $42.50.", "It costs forty-two dollars and fifty cents", "en").edits == 0
    assert score("Please hold the line.", "Please hold on the line.", "en").edits == 1


def test_japanese_folding_compares_readings() -> None:
    assert fold("少々お待ち下さい。", "ja") == fold("少々お待ちください", "ja")
    assert score("認証コードは382915です", "認証コードはさんはちにきゅういちごです", "ja").edits == 0


def test_edit_distance() -> None:
    assert edit_distance("kitten", "sitting") == 3
    assert edit_distance([], ["a"]) == 1
    assert score("", "", "zh").rate == 0.0


def test_clipping_and_join_clicks() -> None:
    t = np.arange(24_000) / 24_000
    tone = (0.5 * np.sin(2 * np.pi * 220 * t)).astype(np.float32)
    assert clipping_ratio(tone) == 0.0
    assert clipping_ratio(np.clip(tone * 4, -1, 1)) > 0.3
    faded = np.concatenate([tone[:1000] * np.linspace(1, 0, 1000), tone[:1000] * np.linspace(0, 1, 1000)])
    assert join_clicks(faded, [1000]) == 0
    cut = np.concatenate([tone[:1000], tone[300:1300]])  # no fades: the wave jumps at the join
    assert join_clicks(cut, [1000]) == 1


def test_the_bundled_set_has_sixty_sentences_in_eleven_languages() -> None:
    sentences = load_sentences()
    assert len(sentences) >= 60
    first_five = {"zh", "en", "ja", "mixed", "ko"}
    kokoro_v1 = {"es", "fr", "hi", "it", "pt", "de"}  # the languages of the language table's rows
    assert {s.lang for s in sentences} == first_five | kokoro_v1
    assert sum(any(c.isdigit() for c in s.text) for s in sentences) >= 12
    assert len(load_sentences(langs=["zh"], per_lang=2)) == 2
    with pytest.raises(ConfigError, match="unknown language"):
        load_sentences(langs=["tlh"])


@pytest.mark.parametrize(
    ("heard", "written", "lang"),
    [
        ("Ihre Bestellung mit der Nummer 5812 wird", "Ihre Bestellung mit der Nr. 5.812 wird", "de"),
        ("O valor é de 120 reais, com vencimento", "O valor é de R$ 120, com vencimento", "pt"),
        ("Der Betrag beträgt 89 Euro.", "Der Betrag beträgt 89 €.", "de"),
        ("Votre commande numéro 7340 sera livrée", "Votre commande n° 7 340 sera livrée", "fr"),
        ("आपका कुल बिल 250 रुपये है", "आपका कुल बिल ₹250 है", "hi"),
    ],
)
def test_alphabetic_folding_ignores_how_numbers_and_currency_are_written(
    heard: str, written: str, lang: str
) -> None:
    assert score(heard, written, lang).edits == 0


def test_alphabetic_folding_still_counts_a_wrong_number_or_amount() -> None:
    assert score("Nummer 5812", "Nr. 5.882", "de").edits == 1
    assert score("89 Euro", "9,80 €", "de").edits >= 1
    assert score("120 reais", "120 dólares", "pt").edits >= 3


def test_transcribe_sums_scores_over_leading_silences() -> None:
    from streamtts.bench.speech_eval import EvalSentence, Rendering, transcribe

    heard_lengths: list[int] = []

    class FakeASR:  # records what it was given; hears the sentence right only without padding
        def transcribe(self, samples: np.ndarray, rate: int, lang: str) -> object:
            heard_lengths.append(len(samples))
            return type("T", (), {"text": "hello world" if len(samples) == 100 else "hello"})()

    r = Rendering(
        EvalSentence("x", "en", "hello world", "hello world"), "core", np.ones(100, np.float32), 1000
    )
    transcribe(FakeASR(), [r], progress=lambda _: None, lead_ms=(0, 50))  # type: ignore[arg-type]
    assert heard_lengths == [100, 150]
    assert (r.score.edits, r.score.units) == (1, 4), "two words per pass, one missed in the padded pass"
    assert r.transcript == "hello world | hello"
