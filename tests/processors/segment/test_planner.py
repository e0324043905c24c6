"""A request → numbered segments with one request context (pure, no Kafka)."""

from __future__ import annotations

import pytest

from streamtts.processors.segment.exceptions import (
    ExpandedTooLong,
    InputRejected,
    TextTooLong,
    TooManySegments,
)
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from tests.factories import request

LIMITS = SpanLimits(first_max_chars=40, max_chars=120, max_text_chars=500)


def test_segments_are_numbered_with_one_last_and_the_request_context() -> None:
    req = request("Hello there, my friend. This is a second sentence. And a third one!", tenant="acme")
    segs = plan_segments(req, limits=LIMITS)
    assert [s.seq for s in segs] == list(range(len(segs))) and len(segs) >= 3
    assert all(s.total == len(segs) for s in segs)
    assert [s.last for s in segs] == [False] * (len(segs) - 1) + [True]
    assert {s.request.request_id for s in segs} == {req.request_id}
    assert all(s.request.tenant == "acme" for s in segs)
    assert len(segs[0].text) <= 40, "the first span is short: first audio leaves fast"


def test_mixed_text_gets_per_span_languages() -> None:
    segs = plan_segments(request("您好，欢迎光临。Thank you for calling."), limits=LIMITS)
    assert {s.lang for s in segs} == {"zh", "en"}


@pytest.mark.parametrize(
    ("text", "error", "reason"),
    [
        ("x" * 501, TextTooLong, "text_too_long"),
        ("Hello <b>there</b>", InputRejected, "markup_not_allowed"),
        ("bell \x07 here", InputRejected, "control_characters"),
    ],
)
def test_bad_text_is_refused_with_its_reason(text: str, error: type[Exception], reason: str) -> None:
    with pytest.raises(error) as caught:
        plan_segments(request(text), limits=LIMITS)
    assert getattr(caught.value, "reason", None) == reason


def test_more_segments_than_the_contract_allows_is_a_clear_refusal() -> None:
    with pytest.raises(TooManySegments) as caught:
        plan_segments(
            request("a\n" * 10_001),
            limits=SpanLimits(first_max_chars=40, max_chars=120, max_text_chars=30_000),
        )
    assert caught.value.reason == "too_many_segments" and "10001 segments" in str(caught.value)


def test_numbers_read_out_count_against_what_the_request_may_say() -> None:
    # "777,777 " says 64 characters for 8: twice the text limit at most (here 2 × 4,000).
    dense = "777,777 " * 500
    with pytest.raises(ExpandedTooLong) as caught:
        plan_segments(
            request(dense), limits=SpanLimits(first_max_chars=40, max_chars=120, max_text_chars=4_000)
        )
    assert caught.value.reason == "expanded_too_long"
    plain = plan_segments(request("I paid 1,234 dollars."), limits=LIMITS)
    assert "one thousand two hundred thirty-four" in " ".join(s.text for s in plain)
