"""Matching our words with Whisper's, for the timestamp accuracy report."""

from __future__ import annotations

from streamtts.bench.asr import Word
from streamtts.bench.timestamp_eval import load_timestamp_sentences, read_out, word_start_errors
from streamtts.schemas import WordTiming


def _w(text: str, start: float, at: int = 0) -> WordTiming:
    return WordTiming(text=text, start_ms=start, end_ms=start + 100, char_start=at, char_end=at + len(text))


def test_english_words_pair_by_normalized_text() -> None:
    ours = [_w("Hello", 100), _w("world", 500), _w("4821", 900)]
    heard = [Word("Hello,", 0.05, 0.4), Word("World.", 0.56, 0.9), Word("four", 0.9, 1.0)]
    assert word_start_errors(ours, heard, "en") == [50.0, -60.0]  # "4821"/"four" never pair


def test_chinese_pairs_by_word_initial_characters_after_folding() -> None:
    ours = [_w("您好", 0), _w("订单", 400), _w("100元", 900)]
    heard = [Word("您", 0.0, 0.1), Word("好", 0.1, 0.2), Word("訂單", 0.42, 0.8), Word("100元", 1.1, 1.5)]
    to_simplified = {"訂": "订", "單": "单"}.get
    errors = word_start_errors(ours, heard, "zh", lambda c: to_simplified(c) or c)
    assert errors == [0.0, -20.0, -200.0]  # 您, 订 (folded from 訂), 1
    written = word_start_errors(ours, heard, "zh", lambda c: to_simplified(c) or c, written_only=True)
    assert written == [0.0, -20.0]  # "100元" was read out: its order may differ, left out
    assert read_out(_w("15%", 0)) and read_out(_w("4821", 0)) and not read_out(_w("don't", 0))


def test_default_set_has_every_timestamp_language() -> None:
    sentences = load_timestamp_sentences()
    by_lang = {s.lang for s in sentences}
    assert by_lang == {"zh", "en", "ja", "mixed"} and len(sentences) >= 70
