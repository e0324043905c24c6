"""The SSML subset: every tag in zh and en, positions back into the document, and hostile
documents refused fast (real expat, no mocks)."""

from __future__ import annotations

import time

import pytest

from streamtts.processors.segment.exceptions import ExpandedTooLong, InputRejected
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.segmenter import PAUSE_PARAGRAPH_MS
from streamtts.processors.segment.span_limits import SpanLimits
from streamtts.processors.segment.ssml import parse_ssml
from streamtts.processors.segment.ssml_document import (
    MAX_BLOCKS,
    MAX_DOCUMENT_BREAK_MS,
    InvalidSsml,
    looks_like_ssml,
)
from streamtts.schemas import TTSRequest


def _plan(ssml: str, **fields: object) -> list:
    request = TTSRequest.new(ssml, text_type="ssml", **fields)
    return plan_segments(request, limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000))


def _spoken(ssml: str, **fields: object) -> str:
    return " | ".join(s.text for s in _plan(ssml, **fields))


@pytest.mark.parametrize(
    ("ssml", "expect"),
    [
        ('<speak>Code <say-as interpret-as="characters">AB</say-as> now.</speak>', "ay, bee"),
        ('<speak>PIN <say-as interpret-as="digits">2024</say-as>.</speak>', "two zero two four"),
        (
            '<speak>Call <say-as interpret-as="telephone">+1 555 0100</say-as>.</speak>',
            "plus one, five five five",
        ),
        (
            '<speak>We sold <say-as interpret-as="cardinal">1,234</say-as>.</speak>',
            "one thousand two hundred thirty-four",
        ),
        ('<speak>The <say-as interpret-as="ordinal">3</say-as> one.</speak>', "third"),
        (
            '<speak>On <say-as interpret-as="date" format="mdy">12/01/2026</say-as>.</speak>',
            "December first, twenty twenty-six",
        ),
        ('<speak>At <say-as interpret-as="time">14:30</say-as>.</speak>', "fourteen thirty"),
        (
            '<speak>Pay <say-as interpret-as="currency">$12.50</say-as>.</speak>',
            "twelve dollars and fifty cents",
        ),
        (
            '<speak>The <sub alias="World Wide Web Consortium">W3C</sub> says.</speak>',
            "World Wide Web Consortium says",
        ),
    ],
)
def test_say_as_and_sub_in_english(ssml: str, expect: str) -> None:
    assert expect in _spoken(ssml)


@pytest.mark.parametrize(
    ("ssml", "expect"),
    [
        ('<speak>验证码<say-as interpret-as="characters">AB</say-as>。</speak>', "A B"),
        ('<speak>验证码是<say-as interpret-as="digits">2024</say-as>。</speak>', "二 零 二 四"),
        (
            '<speak>请拨打<say-as interpret-as="telephone">138 0013 8000</say-as>。</speak>',
            "幺 三 八，零 零 幺 三，八 零 零 零",
        ),
        ('<speak>共<say-as interpret-as="cardinal">1234</say-as>件。</speak>', "一千二百三十四"),
        ('<speak>排名<say-as interpret-as="ordinal">3</say-as>。</speak>', "第三"),
        ('<speak>日期<say-as interpret-as="date">2026-12-01</say-as>。</speak>', "二零二六年十二月一日"),
        ('<speak>时间<say-as interpret-as="time">14:30</say-as>。</speak>', "十四点三十分"),
        ('<speak>价格<say-as interpret-as="currency">¥100</say-as>。</speak>', "一百元"),
        ('<speak>欢迎来到<sub alias="世界卫生组织">WHO</sub>。</speak>', "世界卫生组织"),
    ],
)
def test_say_as_and_sub_in_chinese(ssml: str, expect: str) -> None:
    assert expect in _spoken(ssml)


def test_breaks_paragraphs_and_sentences_become_pauses() -> None:
    segs = _plan(
        '<speak><p><s>Hello there</s><s>How are you</s></p><p>请稍等<break time="1.5s"/>马上好</p>'
        'Done <break strength="strong"/> now <break strength="none"/> later</speak>'
    )
    texts = [s.text for s in segs]
    assert texts[0].startswith("Hello there.")  # </s> ended the sentence
    by_text = {s.text: s for s in segs}
    wait = next(s for s in segs if s.text.startswith("请稍等"))
    assert wait.pause_after_ms == 1500 and wait.ends_sentence
    assert next(s for s in segs if s.text.startswith("马上好")).seq == wait.seq + 1
    done = next(s for s in segs if s.text.startswith("Done"))
    assert done.pause_after_ms == 700
    assert "now later" in " ".join(by_text)  # strength none: no boundary


def test_prosody_rate_voice_and_lang_make_their_own_spans() -> None:
    segs = _plan(
        '<speak>Normal words <prosody rate="slow">slow words</prosody> and '
        '<prosody rate="+50%">fast ones</prosody>.'
        '<voice name="jm_kumo">你好，欢迎光临</voice><lang xml:lang="ja-JP">東京</lang></speak>',
        speed=1.2,
    )
    slow = next(s for s in segs if s.text.startswith("slow"))
    fast = next(s for s in segs if s.text.startswith("fast"))
    assert slow.speed == pytest.approx(1.2 * 0.8) and fast.speed == pytest.approx(1.8)
    normal = segs[0]
    assert normal.speed is None and normal.pause_after_ms == 0 and not normal.ends_sentence  # mid-sentence
    assert slow.sentence_index == normal.sentence_index  # still one sentence
    zh = next(s for s in segs if "你好" in s.text)
    assert zh.ssml_voice == "jm_kumo" and zh.lang == "zh"
    assert next(s for s in segs if "東京" in s.text).lang == "ja"  # Han read as Japanese


def test_phoneme_gives_the_pronunciation_and_keeps_the_written_word() -> None:
    segs = _plan(
        '<speak>Say <phoneme alphabet="ipa" ph="təˈmɑːtoʊ">tomato</phoneme> please. '
        '<s>去<phoneme alphabet="pinyin" ph="zhao1 hang2">招行</phoneme>办理</s></speak>'
    )
    en = next(s for s in segs if "tomato" in s.text)
    assert en.text.startswith("Say tomato")
    given = [r for r in en.runs or [] if r.phonemes]
    assert [(r.text, r.phonemes) for r in given] == [("tomato", "təˈmɑːtoʊ")]
    zh = next(s for s in segs if "招行" in s.text)
    assert [r.text for r in zh.runs or [] if r.phonemes] == ["招行"]


def test_marks_are_placed_and_word_positions_point_into_the_document() -> None:
    ssml = '<speak>Hello <mark name="here"/>world, <say-as interpret-as="digits">42</say-as>.<mark name="end"/></speak>'
    segs = _plan(ssml, timestamps=True)
    marks = [(m.name, m.at) for s in segs for m in s.marks or []]
    assert marks == [("here", ssml.index('<mark name="here"/>')), ("end", ssml.index('<mark name="end"/>'))]
    seg = segs[0]
    assert seg.request.marks
    # The span's source is the document: "world" maps to the document's "world".
    assert seg.source_text is not None and "world" in seg.source_text
    assert ssml[seg.source_start : seg.source_start + len(seg.source_text)] == seg.source_text


def test_unknown_tags_are_read_with_a_note_or_refused_by_policy() -> None:
    ssml = '<speak>This is <emphasis level="strong">important</emphasis>.</speak>'
    segs = _plan(ssml)
    assert "important" in segs[0].text
    assert any("emphasis" in n for n in segs[0].request.notes)
    with pytest.raises(InputRejected) as err:
        plan_segments(
            TTSRequest.new(ssml, text_type="ssml"),
            limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000),
            ssml_unknown="reject",
        )
    assert err.value.reason == "unsupported_ssml"


def test_entities_and_whitespace() -> None:
    assert "Tom & Jerry" in _spoken("<speak>\n   Tom &amp; Jerry\n   say &#x48;i.\n</speak>")


@pytest.mark.parametrize(
    ("ssml", "where"),
    [
        ("<speak>unclosed", "line 1"),
        ("<speak><s>bad</p></speak>", "mismatched tag"),
        ("<speak>&nbsp;</speak>", "undefined entity"),
        ('<speak><break time="soon"/></speak>', "break time"),
        ('<speak><prosody rate="zoom">x</prosody></speak>', "prosody rate"),
        ("<p>not speak</p>", "root element"),
        ('<speak><phoneme ph="x\u0001">a</phoneme></speak>', ""),
    ],
)
def test_malformed_ssml_is_invalid_with_a_position(ssml: str, where: str) -> None:
    with pytest.raises((InvalidSsml, InputRejected)) as err:
        _plan(ssml)
    assert err.value.reason in ("invalid_ssml", "control_characters")
    assert where in str(err.value)


def test_hostile_ssml_is_refused_at_once() -> None:
    laughs = (
        '<?xml version="1.0"?><!DOCTYPE lolz [<!ENTITY lol "lol">'
        + "".join(
            f'<!ENTITY lol{i} "{("&lol" + (str(i - 1) if i > 1 else "") + ";") * 10}">' for i in range(1, 10)
        )
        + "]><speak>&lol9;</speak>"
    )
    external = (
        '<?xml version="1.0"?><!DOCTYPE speak [<!ENTITY x SYSTEM "file:///etc/passwd">]><speak>&x;</speak>'
    )
    deep = "<speak>" + "<s>" * 10_000 + "x" + "</s>" * 10_000 + "</speak>"
    huge_attr = '<speak><mark name="' + "a" * 100_000 + '"/>x</speak>'
    many = "<speak>" + "<mark name='m'/>" * 6000 + "x</speak>"
    for hostile, message in [
        (laughs, "DOCTYPE"),
        (external, "DOCTYPE"),
        (deep, "deeper than"),
        (huge_attr, "longer than"),
        (many, "more than"),
    ]:
        started = time.perf_counter()
        with pytest.raises(InvalidSsml) as err:
            parse_ssml(hostile)
        assert message in str(err.value)
        assert time.perf_counter() - started < 1.0  # refused, not expanded


def test_detection_under_the_ssml_policy() -> None:
    assert looks_like_ssml('  <speak version="1.1">hi</speak>')
    assert looks_like_ssml('<?xml version="1.0"?>\n<speak>hi</speak>')
    assert not looks_like_ssml("a <b> c")
    request = TTSRequest.new("<speak>Hello <break time='300ms'/> there</speak>")
    segs = plan_segments(
        request, limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000), markup="ssml"
    )
    assert [s.text for s in segs] == ["Hello", "there"]
    with pytest.raises(InputRejected):
        plan_segments(  # default: reject
            request, limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000)
        )


def test_plain_text_type_is_never_read_as_ssml() -> None:
    """The OpenAI endpoint sends `text_type: "text"`: even under the "ssml" policy a
    `<speak>` input is markup to refuse, not a document."""
    request = TTSRequest.new("<speak>Hello</speak>", text_type="text")
    with pytest.raises(InputRejected) as err:
        plan_segments(
            request,
            limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000),
            markup="ssml",
        )
    assert err.value.reason == "markup_not_allowed"


def test_every_structural_tag_in_a_chinese_document() -> None:
    ssml = (
        '<speak xml:lang="zh-CN"><p><s>您好<mark name="greet"/>，欢迎致电</s><s>请稍候</s></p>'
        '<break time="800ms"/><prosody rate="slow">请记下您的工单号</prosody>'
        '<voice name="jm_kumo">我们会尽快处理</voice><lang xml:lang="ja">東京</lang>支店'
        '<phoneme alphabet="ipa" ph="ꭧau˥xaŋ˧˥">招行</phoneme>。<mark name="end"/></speak>'
    )
    segs = _plan(ssml)
    texts = [s.text for s in segs]
    assert texts[0].startswith("您好，欢迎致电")
    wait = next(s for s in segs if s.text.startswith("请稍候"))
    assert wait.pause_after_ms == 800  # the break after the paragraph
    slow = next(s for s in segs if s.text.startswith("请记下"))
    assert slow.speed == pytest.approx(0.8) and slow.lang == "zh"
    assert next(s for s in segs if s.text.startswith("我们会")).ssml_voice == "jm_kumo"
    assert next(s for s in segs if "東京" in s.text).lang == "ja"
    given = [(r.text, r.phonemes) for s in segs for r in s.runs or [] if r.phonemes]
    assert given == [("招行", "ꭧau˥xaŋ˧˥")]
    marks = [(m.name, s.seq) for s in segs for m in s.marks or []]
    assert [name for name, _ in marks] == ["greet", "end"] and marks[0][1] == 0


def test_document_limits_are_invalid_ssml_not_contract_dumps() -> None:
    many = "<speak>" + "".join(f'Word {i}. <mark name="m"/>' for i in range(501)) + "</speak>"
    with pytest.raises(InvalidSsml, match="more than 500 marks"):
        _plan(many)
    long_word = '<speak><phoneme ph="a">' + "word " * 40 + "</phoneme></speak>"
    with pytest.raises(InvalidSsml, match="at most 100 characters"):
        _plan(long_word)
    # Given pronunciations cost their written length: long ones never make an oversize span.
    names = " and ".join('<phoneme ph="a">' + "x" * 90 + "</phoneme>" for _ in range(30))
    segs = _plan(f"<speak>{names}.</speak>")
    assert max(len(s.text) for s in segs) <= 150


def test_odd_say_as_content_is_read_as_written_with_a_note() -> None:
    segs = _plan('<speak>Power <say-as interpret-as="digits">²³</say-as> and <say-as interpret-as="cardinal">'
                 + "9" * 80 + "</say-as>.</speak>")  # fmt: skip
    notes = segs[0].request.notes
    assert any("holds more than digits" in n for n in notes) and any("at most 64" in n for n in notes)


def test_an_unknown_phoneme_alphabet_cannot_forge_a_placeholder() -> None:
    segs = _plan(
        '<speak><phoneme alphabet="x-sampa" ph="a">\U00100000</phoneme> '
        '<phoneme ph="zɔrvɛks">Zorvex</phoneme>.</speak>'
    )
    assert [r.text for s in segs for r in s.runs or [] if r.phonemes] == ["Zorvex"]
    assert " ".join(s.text for s in segs).count("Zorvex") == 1


def test_the_breaks_of_a_document_add_up_to_a_bounded_silence() -> None:
    # Issue #30: each break was capped at 5 s, the document was not: 1,000 of them asked for
    # 5,000 s of silence in 1,000 segments.
    segs = _plan("<speak>" + 'a<break time="5s"/>' * 1000 + "</speak>")
    breaks = sum(s.pause_after_ms for s in segs) - PAUSE_PARAGRAPH_MS
    assert breaks == MAX_DOCUMENT_BREAK_MS
    assert len(segs) < 50
    assert any("in all were dropped" in note for note in segs[0].request.notes)


def test_a_document_of_more_blocks_than_the_bound_is_invalid() -> None:
    doc = "<speak>" + 'a <break time="1ms"/>' * (MAX_BLOCKS + 1) + "</speak>"
    with pytest.raises(InvalidSsml, match=f"more than {MAX_BLOCKS} blocks"):
        parse_ssml(doc)


def test_what_say_as_reads_out_counts_against_the_document() -> None:
    spell = '<say-as interpret-as="characters">' + "W" * 64 + "</say-as>"
    with pytest.raises(ExpandedTooLong):
        plan_segments(
            TTSRequest.new("<speak>" + spell * 60 + "</speak>", text_type="ssml"),
            # says at most 14,000; this says 46,080
            limits=SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=7_000),
        )


@pytest.mark.parametrize(
    ("ssml", "code"),
    [
        ("<speak>pay &#x202E;001 321&#x202C; now</speak>", "U+202E"),  # right-to-left override
        ("<speak>isolate &#x2067;here&#x2069;.</speak>", "U+2067"),
        ("<speak>bell &#7; here</speak>", "U+0007"),  # XML refuses it; the reason is the same
        ("<speak>escape &#27;[2J here</speak>", "U+001B"),
        ("<speak>del &#127; here</speak>", "U+007F"),
        ("<speak>c1 &#x85; here</speak>", "U+0085"),
        ('<speak>Say <sub alias="evil &#x202E;txt">it</sub>.</speak>', "U+202E"),  # spoken alias
        ('<speak>A <mark name="m&#x202D;x"/>mark.</speak>', "U+202D"),  # a mark name goes to results
        ("<speak><![CDATA[raw \u202e here]]></speak>", "U+202E"),
    ],
)
def test_control_and_bidi_characters_by_reference_are_refused_like_plain_text(ssml: str, code: str) -> None:
    """Plain text with U+202E is refused (`input_policy`); a character reference must not be
    the way around it: the parsed document holds the same characters."""
    with pytest.raises(InputRejected) as err:
        _plan(ssml)
    assert err.value.reason == "control_characters" and code in str(err.value)
    with pytest.raises(InputRejected) as direct:
        parse_ssml(ssml)  # the parser itself refuses, whoever calls it
    assert direct.value.reason == "control_characters"


def test_ordinary_character_references_are_still_read() -> None:
    assert "Hi, tab and é" in _spoken("<speak>&#x48;i, tab&#9;and &#233;.</speak>").replace("  ", " ")
