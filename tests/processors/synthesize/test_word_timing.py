"""Word timing, pure parts: durations → bounds, labels → words, words → request text."""

from __future__ import annotations

import numpy as np

from streamtts.processors.synthesize.durations import phoneme_bounds
from streamtts.processors.synthesize.engine import AudioChunk
from streamtts.processors.synthesize.word_timing import (
    assign_phonemes,
    phoneme_times,
    span_words,
    word_units,
)


def test_bounds_tile_the_audio_and_skip_pads() -> None:
    # tokens: pad, a, b, pad: 2, 3, 1, 4 frames of 10 samples.
    bounds = phoneme_bounds(np.array([2, 3, 1, 4]), [(), (0,), (1,), ()], 2, 100)
    assert bounds is not None
    assert bounds.tolist() == [[20, 50], [50, 60]]
    # Frames that do not tile the audio give no bounds rather than wrong ones.
    assert phoneme_bounds(np.array([2, 3, 1, 4]), [(), (0,), (1,), ()], 2, 101) is None
    # The lead moves every bound earlier, never below zero.
    led = phoneme_bounds(np.array([2, 3, 1, 4]), [(), (0,), (1,), ()], 2, 100, lead_frames=3)
    assert led is not None and led.tolist() == [[0, 20], [20, 30]]


def test_unvoiced_characters_get_empty_spans_in_place() -> None:
    bounds = phoneme_bounds(np.array([1, 2, 2, 1]), [(), (0,), (2,), ()], 3, 60)
    assert bounds is not None
    assert bounds.tolist() == [[10, 30], [30, 30], [30, 50]]


def test_merged_function_words_are_split_between_their_words() -> None:
    # espeak speaks "of the" as one group "ʌvðə"; each word alone is "ʌv" and "ðə".
    phonemes = "tˈɛst ʌvðə sˈɪstəm."
    owners = assign_phonemes(phonemes, ["tˈɛst", "ʌv", "ðə", "sˈɪstəm"])
    group = phonemes.index("ʌvðə")
    assert owners[group : group + 4] == [1, 1, 2, 2]
    assert owners[phonemes.index(" ")] == -1 and owners[-1] == -1  # spaces and "." are silent


def test_a_group_no_label_matches_goes_to_the_word_between_its_neighbours() -> None:
    # "is a test": the label for "a" alone is the letter name "ˈeɪ", espeak says "ɐ" in context.
    phonemes = "ɪz ɐ tˈɛst"
    owners = assign_phonemes(phonemes, ["ɪz", "ˈeɪ", "tˈɛst"])
    assert owners[phonemes.index("ɐ")] == 1


def test_words_are_timed_and_mapped_to_the_request_text() -> None:
    phonemes = "ab cd"
    times = np.array([[0, 100], [100, 200], [200, 260], [260, 400], [400, 500]], dtype=float)
    owners = [0, 0, -1, 1, 1]
    # The span "一百 元" stands for request text "100元" at offset 10: chars 0-2 → 10-13.
    blocks = [(0, 2, 10, 13), (2, 3, 13, 13), (3, 4, 13, 14)]
    words = span_words([(0, 2), (3, 4)], owners, times, blocks, phonemes)
    assert [(w.char_start, w.char_end) for w in words] == [(10, 13), (13, 14)]
    # The space between them is shared: half to each word.
    assert words[0].start_ms == 0 and words[0].end_ms == 230
    assert words[1].start_ms == 230 and words[1].end_ms == 500


def test_units_read_out_as_one_number_are_one_word() -> None:
    times = np.array([[0, 100], [100, 200], [200, 300]], dtype=float)
    blocks = [(0, 3, 5, 9)]  # "一二三" stands for "1234"... all for one source stretch
    words = span_words([(0, 1), (1, 2), (2, 3)], [0, 1, 2], times, blocks, "abc")
    assert len(words) == 1 and (words[0].start_ms, words[0].end_ms) == (0, 300)


def test_phoneme_times_follow_chunks_split_at_spaces() -> None:
    # Kokoro splits long strings at spaces: two pieces, the space between them dropped.
    first = AudioChunk(np.zeros(100, np.float32), 1000, "ab", bounds=np.array([[0, 50], [50, 100]]))
    second = AudioChunk(np.zeros(60, np.float32), 1000, "cd", bounds=np.array([[0, 30], [30, 60]]))
    times = phoneme_times("ab cd", [first, second])
    assert times is not None
    assert times.tolist() == [[0, 50], [50, 100], [100, 100], [100, 130], [130, 160]]
    assert phoneme_times("ab", [AudioChunk(np.zeros(10, np.float32), 1000, "ab")]) is None


def test_word_units_per_language() -> None:
    assert word_units("Hello, world's end-game!", "en") == [(0, 5), (7, 14), (15, 23)]
    assert word_units("请在App里", "zh", zh_words=lambda han: list(han)) == [(0, 1), (1, 2), (2, 5), (5, 6)]


def test_trailing_leaves_out_ssml_tags_but_keeps_plain_angle_brackets() -> None:
    from streamtts.processors.synthesize.word_timing import SpanWord, contract_words

    plain = "if a < b then"
    words = [SpanWord(0, 100, 3, 4), SpanWord(100, 200, 7, 8)]
    assert contract_words(words, plain, 0, len(plain), 0.0)[0].trailing == " < "
    ssml = 'Hi <break time="1s"/>there'
    words = [SpanWord(0, 100, 0, 2), SpanWord(100, 200, 21, 26)]
    assert contract_words(words, ssml, 0, len(ssml), 0.0)[0].trailing == " "
