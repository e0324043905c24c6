"""Planning one request has a deadline (pure): past it, the planner stops at its next
sentence, block or span check with TooCostly (reason too_costly) and says how far it got."""

from __future__ import annotations

import re
import time

import pytest

from streamtts.processors.segment.exceptions import TooCostly
from streamtts.processors.segment.plan_budget import PlanDeadline
from streamtts.processors.segment.planner import plan_segments
from streamtts.processors.segment.span_limits import SpanLimits
from tests.factories import request

LIMITS = SpanLimits(first_max_chars=40, max_chars=150, max_text_chars=20_000)
# 2,500 sentences of Chinese with numbers to read: ~0.7 s to plan on the 2-core CI machine.
ADVERSARIAL_20K = ("价格是123元。" * 2500)[:20_000]


class Ticks:
    """A clock that advances one second per reading: a deadline of n s passes at the
    (n+2)th check, whatever the machine's speed."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def _position(err: TooCostly) -> int:
    found = re.search(r"stopped at character (\d+) of (\d+)", str(err))
    assert found, str(err)
    return int(found[1])


def test_a_plan_past_its_deadline_stops_with_too_costly_and_its_position() -> None:
    text = " ".join(f"Sentence number {i} is here." for i in range(50))
    deadline = PlanDeadline.start(5.0, len(text), clock=Ticks())
    with pytest.raises(TooCostly) as caught:
        plan_segments(request(text), limits=LIMITS, deadline=deadline)
    assert caught.value.reason == "too_costly"
    at = _position(caught.value)
    # Five sentences were planned (ticks 1, 2-6: start, checks), the sixth was not started.
    fifth_end = text.index("Sentence number 4 is here.") + len("Sentence number 4 is here.")
    assert fifth_end <= at < text.index("Sentence number 6")
    assert f"of {len(text)}" in str(caught.value)


def test_a_plan_within_its_deadline_is_the_same_plan() -> None:
    text = "Hello there. How are you today? Fine, thanks."
    timed = plan_segments(request(text), limits=LIMITS, deadline=PlanDeadline.start(60.0, len(text)))
    plain = plan_segments(request(text), limits=LIMITS)
    assert [s.text for s in timed] == [s.text for s in plain]


def test_an_ssml_document_reports_its_position_in_the_document() -> None:
    doc = "<speak>" + "".join(f'Part {i}.<break time="100ms"/>' for i in range(40)) + "</speak>"
    req = request(doc, text_type="ssml")
    with pytest.raises(TooCostly) as caught:
        plan_segments(req, limits=LIMITS, deadline=PlanDeadline.start(10.0, len(doc), clock=Ticks()))
    at = _position(caught.value)
    assert doc.index("Part 1.") < at < doc.index("Part 39.")


def test_a_20000_character_adversarial_request_costs_at_most_its_budget() -> None:
    started = time.perf_counter()
    plan_segments(request(ADVERSARIAL_20K, language="zh"), limits=LIMITS)
    whole_s = time.perf_counter() - started
    budget = min(0.25, whole_s / 4)  # well below what the whole plan costs here
    started = time.perf_counter()
    with pytest.raises(TooCostly) as caught:
        plan_segments(
            request(ADVERSARIAL_20K, language="zh"),
            limits=LIMITS,
            deadline=PlanDeadline.start(budget, len(ADVERSARIAL_20K)),
        )
    spent_s = time.perf_counter() - started
    print(f"whole plan {whole_s:.3f} s; with a {budget:.3f} s budget stopped after {spent_s:.3f} s")
    assert 0 <= _position(caught.value) < len(ADVERSARIAL_20K)
    # One sentence past the deadline at most (a sentence here costs well under 10 ms).
    assert spent_s < budget + 0.1
