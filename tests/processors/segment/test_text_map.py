"""Text maps: every character of a span knows where it came from in the request text."""

from __future__ import annotations

import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from streamtts.processors.segment.normalize import normalize_mapped, normalize_text
from streamtts.processors.segment.segmenter import segment_text
from streamtts.processors.segment.text_map import MappedText
from streamtts.schemas.segment import text_map_range


def test_a_rewrite_points_at_what_it_replaced() -> None:
    source = MappedText.of("价格100元，共5件。")
    spoken = source.rewritten("价格一百元，共五件。")
    assert spoken.source_range(2, 4) == (2, 5)  # 一百 stands for "100"
    assert spoken.source_range(0, 2) == (0, 2)  # copied characters map to themselves
    assert spoken.source_range(7, 8) == (8, 9)  # 五 for "5"
    # The compressed form answers the same questions.
    blocks = spoken.blocks()
    for a, b in [(0, 2), (2, 4), (4, 5), (7, 8), (0, len(spoken))]:
        assert text_map_range(blocks, a, b) == spoken.source_range(a, b)


def test_sub_strip_and_without_keep_the_map() -> None:
    text = "  a <b>bold</b>  word "
    mapped = MappedText.of(text).sub(re.compile(r"</?b>"), "").strip()
    assert mapped.text == "a bold  word"
    start, end = mapped.source_range(2, 6)
    assert text[start:end] == "bold"
    marked = MappedText.of("x\ue000123\ue001y").without("\ue000\ue001")
    assert marked.text == "x123y" and marked.source_range(1, 4) == (2, 5)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
@example("Ｈｅｌｌｏ１２３，世界！ <b>x</b>... e\u0301te\r\nx")
@example("\ud83d\ude00a\u200bb\x00c")
@example("ﬁ ① ㍿ カ\u3099")
def test_normalize_mapped_is_normalize_text(text: str) -> None:
    mapped = normalize_mapped(text)
    assert mapped.text == normalize_text(text)
    assert len(mapped.starts) == len(mapped.text) == len(mapped.ends)
    assert all(0 <= s <= e <= len(text) for s, e in zip(mapped.starts, mapped.ends, strict=True))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            [
                "您好，",
                "Hello, ",
                "价格100元。",
                "Call 4008208820 now. ",
                "東京駅まで。",
                "请在App里打开",
                "  ",
                "\n",
                "😀",
                "3-5天",
            ]
        ),
        min_size=1,
        max_size=12,
    )
)
@example(["请在App里打开", "请在App里打开", "3-5天", "价格100元。"])
def test_spans_map_into_the_request_text_in_order(parts: list[str]) -> None:
    text = "".join(parts)
    try:
        spans = segment_text(text, mapped=True)
    except Exception:
        return  # nothing speakable: the segmenter's own tests cover that
    last_end = 0
    last_char: tuple[int, int] | None = None
    for span in spans:
        assert span.source is not None and span.source.text == span.text
        start, end = span.source.source_range(0, len(span.source))
        assert 0 <= start < end <= len(text)
        # Spans follow the text: they share a comma at most, or the one number whose
        # reading the split cut in two ("一 | 百元" for "100元": both halves stand for "100").
        split_reading = last_char == (span.source.starts[0], span.source.ends[0])
        assert start >= last_end - 1 or split_reading, (span.text, start, last_end)
        last_end = end
        last_char = (span.source.starts[-1], span.source.ends[-1])
        # Characters copied verbatim map to the same character of the request.
        for ch, s, e in zip(span.text, span.source.starts, span.source.ends, strict=True):
            if e - s == 1 and ch.isalpha() and text[s].isalpha() and ch.isascii() and text[s].isascii():
                assert text[s].lower() == ch.lower()


def test_a_read_out_number_maps_to_the_digits() -> None:
    text = "您的订单100元已经发货。"
    [span] = segment_text(text, mapped=True)
    assert "一百" in span.text
    assert span.source is not None
    at = span.text.index("一百")
    start, end = span.source.source_range(at, at + 2)
    assert text[start:end] == "100"


def test_long_repetitive_text_is_aligned_in_bounded_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """difflib is quadratic on long repetitive text (a 10k-character run once took minutes in
    the segment stage): every alignment it is given stays small, and plain requests build
    no map at all."""
    import difflib

    from streamtts.processors.segment import text_map

    sizes: list[int] = []
    real = difflib.SequenceMatcher

    def recording(isjunk, a, b, autojunk=True):  # type: ignore[no-untyped-def]
        sizes.append(len(a) + len(b))
        return real(isjunk, a, b, autojunk=autojunk)

    monkeypatch.setattr(text_map.difflib, "SequenceMatcher", recording)
    text = "we went to the park at 3 pm, then we had 2 coffees, " * 190
    spans = segment_text(text, mapped=True)
    assert sizes and max(sizes) <= 4 * text_map._DIFF_LIMIT
    joined = "".join(s.text for s in spans)
    assert "three" in joined and "two coffees" in joined
    first = spans[0]
    assert first.source is not None and text[slice(*first.source.source_range(0, 2))] == "we"
    sizes.clear()
    plain = segment_text(text)
    assert not sizes and all(s.source is None for s in plain)
    assert [s.text for s in plain] == [s.text for s in spans]  # the same speech either way
