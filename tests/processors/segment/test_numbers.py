"""Number, date, currency and unit verbalization."""

from __future__ import annotations

import sys
import unicodedata

import pytest

from streamtts.processors.segment.exceptions import UnreadableNumber
from streamtts.processors.segment.number_tokens import ascii_digits
from streamtts.processors.segment.numbers import verbalize_numbers
from streamtts.processors.segment.numbers_en import int_to_words_en, ordinal_en, year_en
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.segmenter import segment_text
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.schemas import TTSRequest

LIMITS = SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=1_000)


@pytest.mark.parametrize(
    ("n", "words"),
    [
        (0, "zero"),
        (13, "thirteen"),
        (21, "twenty-one"),
        (105, "one hundred five"),
        (1_234_567, "one million two hundred thirty-four thousand five hundred sixty-seven"),
    ],
)
def test_english_cardinals(n: int, words: str) -> None:
    assert int_to_words_en(n) == words


def test_english_ordinals_and_years() -> None:
    assert [ordinal_en(n) for n in (1, 2, 3, 12, 21, 40)] == [
        "first",
        "second",
        "third",
        "twelfth",
        "twenty-first",
        "fortieth",
    ]
    assert [year_en(y) for y in (1984, 2005, 2024, 1900)] == [
        "nineteen eighty-four",
        "two thousand five",
        "twenty twenty-four",
        "nineteen hundred",
    ]


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("It costs $3.50.", "It costs three dollars and fifty cents."),
        (
            "Up 30% to 1,234 users",
            "Up thirty percent to one thousand two hundred thirty-four users",
        ),
        ("On 2024-03-15 at 10:30", "On March fifteenth, twenty twenty-four at ten thirty"),
        (
            "It was -5°C and 12.5 km away",
            "It was minus five degrees Celsius and twelve point five kilometers away",
        ),
        ("the 21st time, 1 kg", "the twenty-first time, one kilogram"),
        ("call 007", "call zero zero seven"),
    ],
)
def test_english_verbalization(text: str, spoken: str) -> None:
    assert verbalize_numbers(text, "en").replace("\ue000", "").replace("\ue001", "") == spoken


@pytest.mark.parametrize(
    ("text", "spoken"),
    [
        ("增长了30%", "增长了百分之三十"),
        ("花了$5和12.5元", "花了五美元和十二点五元"),
        ("2024年3月15日", "二零二四年三月十五日"),
        ("2024-03-15", "二零二四年三月十五日"),
        ("10:30见", "十点三十分见"),
        ("重5kg，共1234567个", "重五千克，共一百二十三万四千五百六十七个"),
        ("电话13800138000", "电话一 三 八，零 零 一 三，八 零 零 零"),
    ],
)
def test_chinese_verbalization(text: str, spoken: str) -> None:
    assert verbalize_numbers(text, "zh").replace("\ue000", "").replace("\ue001", "") == spoken


def test_japanese_keeps_digits_for_openjtalk_but_rewrites_symbols() -> None:
    assert verbalize_numbers("2024-03-15に$5と30%、5kgです。10:30", "ja") == (
        "2024年3月15日に5ドルと30パーセント、5キログラムです。10時30分"
    )


def test_numbers_follow_the_language_of_their_run() -> None:
    spans = segment_text("I paid $5. 我付了5元。")
    assert [(s.text, s.lang) for s in spans] == [
        ("I paid five dollars.", "en"),
        ("我付了五元。", "zh"),
    ]


# One zero of every Unicode decimal digit class (category Nd: Arabic-Indic, Devanagari,
# Thai, Adlam, mathematical …): its digits follow it in code point order.
DIGIT_ZEROS = [
    chr(c)
    for c in range(sys.maxunicode + 1)
    if unicodedata.category(chr(c)) == "Nd" and unicodedata.digit(chr(c)) == 0
]


def test_every_unicode_digit_class_is_found() -> None:
    assert len(DIGIT_ZEROS) >= 60 and "٠" in DIGIT_ZEROS and "०" in DIGIT_ZEROS


def test_arabic_indic_digits_in_chinese_are_read_as_the_number() -> None:
    # Issue #30: dead-lettered with cn2an's own message ("输入的数据不在转化范围内：١！").
    segs = plan_segments(TTSRequest.new("价格是١٢٣元。", language="zh"), limits=LIMITS)
    assert [s.text for s in segs] == ["价格是一百二十三元。"]


@pytest.mark.parametrize("zero", DIGIT_ZEROS, ids=lambda z: f"U+{ord(z):04X}")
def test_digits_of_every_script_are_read_like_ascii_ones(zero: str) -> None:
    num = "".join(chr(ord(zero) + d) for d in (1, 2, 3))
    assert verbalize_numbers(f"价格是{num}元。", "zh") == "价格是一百二十三元。"
    assert verbalize_numbers(f"It costs ${num}.", "en") == "It costs one hundred twenty-three dollars."
    assert ascii_digits(num) == "123"


def test_a_number_its_reader_fails_on_is_a_clear_refusal(monkeypatch: pytest.MonkeyPatch) -> None:
    import cn2an

    def broken(*args: object) -> str:
        raise ValueError("输入的数据不在转化范围内")

    monkeypatch.setattr(cn2an, "an2cn", broken)
    with pytest.raises(UnreadableNumber) as caught:
        plan_segments(TTSRequest.new("价格是123元。", language="zh"), limits=LIMITS)
    assert caught.value.reason == "unreadable_number"
    assert str(caught.value) == "the number '123' cannot be read out in zh"
