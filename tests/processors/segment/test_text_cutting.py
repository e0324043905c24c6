"""The cutting policy of streamed text: early first span, whole later sentences, never a
number, an abbreviation or a word cut in two, bounded work on hostile text."""

from __future__ import annotations

import time

import pytest

from streamtts.processors.segment.text_cutting import CutPolicy

POLICY = CutPolicy(first_min_cost=12, max_cost=150)


def stream(text: str, policy: CutPolicy = POLICY, step: int = 1) -> list[str]:
    """Feed `text` `step` characters at a time (no timer); the spans said, then the rest at the end."""
    said: list[str] = []
    held = ""
    for i in range(0, len(text), step):
        held += text[i : i + step]
        n = policy.cut(held, first=not said)
        if n:
            said.append(held[:n])
            held = held[n:]
    if held:
        said.append(held)
    return said


def test_first_span_goes_at_the_first_clause_with_enough_text() -> None:
    said = stream("Thanks for calling, I can help with that. Your order shipped on Monday. It arrives soon.")
    assert said[0] == "Thanks for calling, "
    # later spans are whole sentences, never clauses
    assert said[1] == "I can help with that. "
    assert said[2] == "Your order shipped on Monday. "
    assert (
        "".join(said)
        == "Thanks for calling, I can help with that. Your order shipped on Monday. It arrives soon."
    )


def test_a_clause_too_short_waits_for_the_next() -> None:
    said = stream("Hi, so, well, the thing is this. Then more.")
    assert said[0] == "Hi, so, well, "  # 12 characters reached only at the third comma


def test_cjk_clause_punctuation_cuts_a_short_first_span() -> None:
    said = stream("您好，欢迎致电客服中心。请问有什么可以帮您？")
    assert said[0] == "您好，欢迎致电客服中心。"  # "您好，" costs 6 (< 12): the sentence end is the first cut
    said = stream("非常感谢您的耐心等待，我们已经为您查到了订单。")
    assert said[0] == "非常感谢您的耐心等待，"  # 10 Han characters cost 20: the clause goes at once


@pytest.mark.parametrize(
    "text",
    [
        "The total is 3.5 million dollars, paid in full today. Thank you.",
        "It costs 1,000 dollars, which is fair. Thanks.",
        "Dr. Smith will see you at 3:45 today, in room two. Bye.",
        "Visit example.com for details, or call us tomorrow. Bye.",
    ],
)
def test_numbers_abbreviations_and_addresses_are_never_cut(text: str) -> None:
    for said in (stream(text), stream(text, step=3)):
        assert "".join(said) == text
        for span in said[:-1]:
            assert span.endswith((", ", ". ")), said
        assert not any(s.endswith(("3.", "1,", "Dr. ", "3:", "example.")) for s in said), said


def test_a_boundary_is_final_only_once_the_next_character_shows_it() -> None:
    assert POLICY.cut("It is about 3.", first=True) == 0
    assert POLICY.cut("It is about 3.5", first=True) == 0
    assert POLICY.cut("It is about 3. Then", first=True) == len("It is about 3. ")
    assert POLICY.cut("您好，欢迎致电客服中心。", first=True) == len("您好，欢迎致电客服中心。")


def test_the_timer_speaks_up_to_the_last_whole_word() -> None:
    held = "I am checking your account stat"
    n = POLICY.cut(held, first=True, force="words")
    assert held[:n] == "I am checking your account "
    assert POLICY.cut("您好欢迎致电客服中", first=True, force="words") == len("您好欢迎致电客服")
    assert POLICY.cut("Supercalifragilistic", first=True, force="words") == 0  # one word: it waits
    assert POLICY.cut("half a wor", first=True, force="all") == len("half a wor")
    # A mark after a word ends it, even before the next word shows the mark is a boundary;
    # a digit's "." does not ("3." may be "3.5").
    assert POLICY.cut("Thanks for holding,", first=True, force="words") == len("Thanks for holding,")
    assert POLICY.cut("Hello there!", first=True, force="words") == len("Hello there!")
    assert POLICY.cut("It costs 3.", first=True, force="words") == len("It costs ")


def test_the_timer_never_cuts_inside_a_chinese_word() -> None:
    """An eval transcript heard "IT部, 门处理" for 部门处理: the timer had cut 部|门, the last
    Han character kept as if any two characters were two words. Cuts fall where a word ends
    (jieba, as the Chinese G2P reads it); the run's last word stays held, it may go on."""
    held = "这个问题已经提交给我们的IT部门"
    assert held[: POLICY.cut(held, first=True, force="words")] == "这个问题已经提交给我们的IT"
    held = "您好我已经查到您的订单"
    assert held[: POLICY.cut(held, first=True, force="words")] == "您好我已经查到您的"
    # The word the last cut held, alone at the next tick: still one word, still held (a tick
    # later it had been spoken as 部|门).
    assert POLICY.cut("部门", first=False, force="words") == 0
    assert POLICY.cut("您好", first=True, force="words") == 0
    # Kana is not jieba's: its cut is as before (before the last character).
    assert POLICY.cut("ありがとうございま", first=True, force="words") == len("ありがとうございま") - 1
    # Korean puts spaces between words: a Hangul word ends only at one (the eval heard
    # "도착합니 | 다." cut before its last syllable).
    held = "주문하신 상품은 내일 도착합니"
    assert held[: POLICY.cut(held, first=True, force="words")] == "주문하신 상품은 내일 "


def test_later_spans_cut_at_a_clause_only_when_long() -> None:
    long_sentence = "and then, " * 20
    assert POLICY.cut("and then, we went home", first=False) == 0
    n = POLICY.cut(long_sentence, first=False)
    assert 0 < n and long_sentence[:n].endswith(", ")


def test_hindi_and_arabic_sentences_end_at_their_own_marks() -> None:
    assert stream("नमस्ते, आपका स्वागत है। आप कैसे हैं?")[0] == "नमस्ते, आपका स्वागत है।"
    assert stream("مرحبا بكم في خدمة العملاء؟ كيف أساعدك")[0] == "مرحبا بكم في خدمة العملاء؟"


def test_hostile_text_is_cut_hard_and_each_delta_costs_its_size() -> None:
    policy = CutPolicy(max_cost=150)
    for text in ("a" * 20_000, "," * 20_000, "." * 20_000, "中" * 20_000):
        started = time.perf_counter()
        said = stream(text, policy, step=7)
        elapsed = time.perf_counter() - started
        assert "".join(said) == text
        assert max(len(s) for s in said) <= 2 * 150 + 7
        assert elapsed < 5.0, f"{text[:3]!r}: {elapsed:.1f} s"  # quadratic would take minutes
