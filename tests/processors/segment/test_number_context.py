"""Numbers read the way people say them, by context: codes digit by digit, quantities as
quantities. The expectations are written by hand from how a call-centre agent reads them."""

from __future__ import annotations

import re

import pytest

from streamtts.processors.segment.number_context import CODE_CLOSE, CODE_OPEN
from streamtts.processors.segment.numbers import verbalize_numbers
from streamtts.processors.segment.segmenter import segment_text


def plain(text: str) -> str:
    """A code's digit words are marked (so the splitter keeps them whole)."""
    return text.replace(CODE_OPEN, "").replace(CODE_CLOSE, "")


ZH = [
    # codes after a code word
    ("您的验证码是382915。", "您的验证码是[三八二|九一五]。"),
    ("验证码：0451", "验证码：[零四五一]"),
    ("动态码为73，请勿泄露", "动态码为[七三]，请勿泄露"),
    ("尾号1234的银行卡", "尾号[一二三四]的银行卡"),
    ("卡号末尾5678", "卡号末尾[五六七八]"),
    ("订单号：20241115001已发货", "订单号：[二零二|四一一一|五零零一]已发货"),
    ("工单编号8812，请记录", "工单编号[八八一二]，请记录"),
    ("您的账号是6222021234", "您的账号是[六二二|二零二|一二三四]"),
    ("取件码5-2-1106", "取件码[五|二|一一零六]"),
    ("房间号1203", "房间号[一二零三]"),
    ("航班CA1501", "航班CA[一五零一]"),
    ("密码是2580", "密码是[二五八零]"),
    # phone numbers by shape
    ("请拨打138-1234-5678", "请拨打[一三八|一二三四|五六七八]"),
    ("客服热线4008208820", "客服热线[四零零|八二零|八八二零]"),
    ("手机13912345678", "手机[一三九|一二三四|五六七八]"),
    ("电话(010)88886666", "电话[零一零|八八八八|六六六六]"),
    ("座机021-6123 4567", "座机[零二一|六一二三|四五六七]"),
    ("号码+86 13800138000", "号码加[八六|一三八|零零一三|八零零零]"),
    # quantities stay quantities, even after a code word
    ("电话费100元", "电话费一百元"),
    ("订单金额为1250元", "订单金额为一千二百五十元"),
    ("订单共3件", "订单共三件"),
    ("共1234567个", "共一百二十三万四千五百六十七个"),
    ("价格是99.5元", "价格是九十九点五元"),
    ("增长了30%", "增长了百分之三十"),
    ("打8折", "打八折"),
    ("2024年3月15日", "二零二四年三月十五日"),
    ("10:30见", "十点三十分见"),
    ("第3名", "第三名"),
    # ranges
    ("3-5天送达", "三到五天送达"),
    ("增长10-20%", "增长百分之十到百分之二十"),
    ("1000-2000元", "一千到二千元"),
]

EN = [
    ("Your verification code is 382915.", "Your verification code is [three eight two|nine one five]."),
    ("Your code is 0451.", "Your code is [zero four five one]."),
    ("Enter PIN 42 now", "Enter PIN [four two] now"),
    ("the card ending in 4321", "the card ending in [four three two one]"),
    ("order #12345 has shipped", "order number [one two|three four five] has shipped"),
    ("Order number 20241115 is ready", "Order number [two zero two four|one one one five] is ready"),
    (
        "your account number is 6222021234",
        "your account number is [six two two|two zero two|one two three four]",
    ),
    ("reference 88123", "reference [eight eight|one two three]"),
    ("flight 302 is boarding", "flight [three zero two] is boarding"),
    ("room 1203, please", "room [one two zero three], please"),
    ("Call 555-123-4567 today", "Call [five five five|one two three|four five six seven] today"),
    ("Call (555) 123-4567.", "Call [five five five|one two three|four five six seven]."),
    ("dial +1 800 555 0199", "dial plus [one|eight zero zero|five five five|zero one nine nine]"),
    ("extension 2047", "extension [two zero four seven]"),
    ("ticket 4471 is open", "ticket [four four seven one] is open"),
    # quantities
    ("It costs $3.50.", "It costs three dollars and fifty cents."),
    ("We have 1,234 users", "We have one thousand two hundred thirty-four users"),
    ("I'll call you in 5 minutes", "I'll call you in five minutes"),
    ("a number of 150 people", "a number of one hundred fifty people"),
    ("room 12", "room twelve"),
    ("Up 30% this year", "Up thirty percent this year"),
    ("the 21st time", "the twenty-first time"),
    ("in 2024", "in twenty twenty-four"),
    ("at 10:30", "at ten thirty"),
    ("the iPhone15 is here", "the iPhone fifteen is here"),
    # ranges
    ("ships in 3-5 days", "ships in three to five days"),
    ("from 1999-2005", "from nineteen ninety-nine to two thousand five"),
    ("a 10-20% discount", "a ten percent to twenty percent discount"),
    ("pages 10–12", "pages ten to twelve"),
]

JA = [
    ("認証コードは382915です。", "認証コードは[さんはちに|きゅういちご]です。"),
    ("暗証番号は0451です", "暗証番号は[ゼロよんごいち]です"),
    ("電話番号は03-1234-5678です。", "電話番号は[ゼロさん|いちにさんよん|ごろくななはち]です。"),
    ("注文番号12345をご確認ください", "注文番号[いちに|さんよんご]をご確認ください"),
    ("カード番号の下4桁は9876です", "カード番号の下4桁は[きゅうはちななろく]です"),
    ("会員番号：7001234", "会員番号：[ななゼロゼロ|いちにさんよん]"),
    ("携帯090-1234-5678まで", "携帯[ゼロきゅうゼロ|いちにさんよん|ごろくななはち]まで"),
    # quantities: Arabic numerals are left to OpenJTalk, which reads them with counters
    ("3個ください", "3個ください"),
    ("1500円です", "1500円です"),
    ("30%オフ", "30パーセントオフ"),
    ("3-5日で届きます", "3から5日で届きます"),
]


def spelled(expected: str, lang: str) -> str:
    """Expand the table's code notation, "[382|915]" for digit words in groups: digits are
    separate words (zh, en), groups are apart by a comma (a breath)."""

    def code(m: re.Match[str]) -> str:
        groups = m.group(1).split("|")
        if lang == "zh":
            return "，".join(" ".join(g) for g in groups)
        if lang == "ja":
            return "、".join(groups)
        return ", ".join(groups)

    return re.sub(r"\[([^\]]*)\]", code, expected)


@pytest.mark.parametrize(("text", "spoken"), ZH)
def test_chinese(text: str, spoken: str) -> None:
    assert plain(verbalize_numbers(text, "zh")) == spelled(spoken, "zh")


@pytest.mark.parametrize(("text", "spoken"), EN)
def test_english(text: str, spoken: str) -> None:
    assert plain(verbalize_numbers(text, "en")) == spelled(spoken, "en")


@pytest.mark.parametrize(("text", "spoken"), JA)
def test_japanese(text: str, spoken: str) -> None:
    assert plain(verbalize_numbers(text, "ja")) == spelled(spoken, "ja")


def test_the_table_covers_sixty_cases_across_three_languages() -> None:
    assert len(ZH) + len(EN) + len(JA) >= 60 and min(len(ZH), len(EN), len(JA)) >= 10


def test_a_code_word_in_another_run_counts() -> None:
    # "PIN" is an English run; the digits are in the Chinese run after it.
    spans = segment_text("您的PIN是1234。")
    assert spans[0].text == "您的PIN是一 二 三 四。"
    spans = segment_text("Your 验证码 is 382915.")
    assert any("three eight two, nine one five" in s.text for s in spans)


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("Your verification code is 382915, valid for 5 minutes.", "three eight two, nine one five"),
        ("您好您好您好您好您好您好您的验证码是382915678", "三 八 二，九 一 五，六 七 八"),
    ],
)
def test_a_code_is_never_split_across_spans(text: str, code: str) -> None:
    spans = segment_text(text)
    assert any(code in s.text for s in spans), [s.text for s in spans]
    marks = (CODE_OPEN, CODE_CLOSE)
    assert not any(m in s.text or any(m in r.text for r in s.runs) for s in spans for m in marks)
