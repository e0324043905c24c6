"""`streamtts eval --streamed` writes each sentence as an LLM streams it: the tokens, joined,
are the sentence exactly (nothing lost, added or moved), Latin words one a token with the
space before them, CJK a couple of characters a token."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from streamtts.bench.speech_eval import load_sentences
from streamtts.bench.token_stream import stream_tokens


def test_latin_text_goes_word_by_word_each_with_its_leading_space() -> None:
    assert stream_tokens("Your code is 382915. It expires.") == [
        "Your",
        " code",
        " is",
        " 382915.",
        " It",
        " expires.",
    ]


def test_chinese_and_japanese_go_two_characters_a_token() -> None:
    assert stream_tokens("您好，请问有什么可以帮您？") == [
        "您好",
        "，",
        "请问",
        "有什",
        "么可",
        "以帮",
        "您",
        "？",
    ]
    assert stream_tokens("お電話ありがとう") == ["お電", "話あ", "りが", "とう"]


def test_korean_words_are_cut_into_syllable_pairs_keeping_their_space() -> None:
    assert stream_tokens("주문이 완료되었습니다.") == ["주문", "이", " 완료", "되었", "습니", "다", "."]


def test_an_english_word_glued_to_chinese_is_one_token() -> None:
    assert stream_tokens("请点击Submit。") == ["请点", "击", "Submit。"]


def test_empty_and_blank_text() -> None:
    assert stream_tokens("") == []
    assert stream_tokens("   ") == ["   "]
    assert stream_tokens(" a \n") == [" a", " \n"]


def test_every_bundled_sentence_is_rebuilt_exactly_from_its_tokens() -> None:
    for sentence in load_sentences():
        tokens = stream_tokens(sentence.text)
        assert "".join(tokens) == sentence.text, sentence.id
        assert all(tokens), sentence.id  # no empty delta
        assert len(tokens) > 1, sentence.id  # streamed, not sent whole


@given(st.text(alphabet=st.sampled_from("ab Z9.,，。您好お안녕 \t\n-"), max_size=60) | st.text(max_size=60))
def test_the_tokens_always_join_back_to_the_text(text: str) -> None:
    tokens = stream_tokens(text)
    assert "".join(tokens) == text
    assert all(tokens)
