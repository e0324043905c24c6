"""A request → numbered segments with one request context (pure, no Kafka)."""

from __future__ import annotations

import pytest

from streamtts.processors.segment.exceptions import InputRejected, TextTooLong
from streamtts.processors.segment.planner import plan_segments
from tests.factories import request

LIMITS = {"first_max_chars": 40, "max_chars": 120, "max_text_chars": 500}


def test_segments_are_numbered_with_one_last_and_the_request_context() -> None:
    req = request("Hello there, my friend. This is a second sentence. And a third one!", tenant="acme")
    segs = plan_segments(req, **LIMITS)
    assert [s.seq for s in segs] == list(range(len(segs))) and len(segs) >= 3
    assert all(s.total == len(segs) for s in segs)
    assert [s.last for s in segs] == [False] * (len(segs) - 1) + [True]
    assert {s.request.request_id for s in segs} == {req.request_id}
    assert all(s.request.tenant == "acme" for s in segs)
    assert len(segs[0].text) <= 40, "the first span is short: first audio leaves fast"


def test_mixed_text_gets_per_span_languages() -> None:
    segs = plan_segments(request("您好，欢迎光临。Thank you for calling."), **LIMITS)
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
        plan_segments(request(text), **LIMITS)
    assert getattr(caught.value, "reason", None) == reason
