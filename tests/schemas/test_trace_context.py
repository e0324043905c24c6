"""W3C trace context (https://www.w3.org/TR/trace-context/): what is read, what is refused
(ignored, so a new trace starts), and how a replay links to what it replays."""

from __future__ import annotations

import pytest

from streamtts.schemas.headers import REPLAY_TRACE, TRACEPARENT, TRACESTATE
from streamtts.schemas.trace import (
    TraceContext,
    carried_with_trace,
    from_http,
    parse_traceparent,
    replay_trace,
    trace_of,
    without_trace,
)

W3C_EXAMPLE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_specs_example_is_read_field_by_field() -> None:
    ctx = parse_traceparent(W3C_EXAMPLE, "congo=t61rcWkgMzE, rojo=00f067aa0ba902b7")
    assert ctx is not None
    assert (ctx.trace_id, ctx.span_id, ctx.flags) == (
        "0af7651916cd43dd8448eb211c80319c",
        "b7ad6b7169203331",
        "01",
    )
    assert ctx.sampled
    assert ctx.state == "congo=t61rcWkgMzE,rojo=00f067aa0ba902b7"
    assert ctx.traceparent == W3C_EXAMPLE


@pytest.mark.parametrize(
    "value",
    [
        "",
        "bogus",
        "00-00000000000000000000000000000000-b7ad6b7169203331-01",  # all-zero trace id
        "00-0af7651916cd43dd8448eb211c80319c-0000000000000000-01",  # all-zero parent id
        "ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",  # version ff is invalid
        "00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01",  # upper case
        "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01-x",  # 00 has nothing after flags
        "00-0af7651916cd43dd8448eb211c80319-b7ad6b7169203331-01",  # 31 digits
        "0" * 100_000,  # hostile length: refused in one pass
    ],
)
def test_an_invalid_traceparent_is_ignored(value: str) -> None:
    assert parse_traceparent(value) is None


def test_a_later_version_is_read_by_the_00_layout() -> None:
    ctx = parse_traceparent("cc-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00-what-comes")
    assert ctx is not None and not ctx.sampled


def test_a_malformed_tracestate_is_dropped_and_the_traceparent_kept() -> None:
    ctx = parse_traceparent(W3C_EXAMPLE, "not a list member")
    assert ctx is not None and ctx.state == ""
    for state in ("a=" + "b" * 600, "a=1,a=2", "1v=x", "a@b@c=1", "K=v"):
        parsed = parse_traceparent(W3C_EXAMPLE, state)
        assert parsed is not None and parsed.state == "", state
    kept = parse_traceparent(W3C_EXAMPLE, "t@sys=1, k=v")
    assert kept is not None and kept.state == "t@sys=1,k=v"


def test_a_new_trace_is_random_sampled_and_valid() -> None:
    a, b = TraceContext.start(), TraceContext.start()
    assert a.trace_id != b.trace_id
    assert parse_traceparent(a.traceparent) == a
    child = a.child()
    assert child.trace_id == a.trace_id and child.span_id != a.span_id


def test_http_headers_are_read_case_insensitively_as_starlette_gives_them() -> None:
    from starlette.datastructures import Headers

    ctx = from_http(Headers({"TraceParent": W3C_EXAMPLE, "tracestate": "k=v"}))
    assert ctx is not None and ctx.state == "k=v"
    assert from_http(Headers({})) is None


def test_the_first_stage_keeps_a_valid_trace_and_replaces_a_broken_one() -> None:
    record = [("ce_id", b"x"), (TRACEPARENT, W3C_EXAMPLE.encode()), (TRACESTATE, b"k=v")]
    assert trace_of(carried_with_trace(record)) == parse_traceparent(W3C_EXAMPLE, "k=v")
    for broken in ([(TRACEPARENT, b"garbage")], []):
        out = carried_with_trace(broken)
        assert [k for k, _ in out] == [TRACEPARENT], "one traceparent, a new valid one"
        assert trace_of(out) is not None


def test_a_replay_is_a_new_trace_linked_to_the_original() -> None:
    original = [(TRACEPARENT, W3C_EXAMPLE.encode()), (TRACESTATE, b"k=v"), ("other", b"1")]
    headers = replay_trace(original)
    new = trace_of(headers)
    assert new is not None and new.trace_id != "0af7651916cd43dd8448eb211c80319c"
    assert (REPLAY_TRACE, W3C_EXAMPLE.encode()) in headers
    assert without_trace(original) == [("other", b"1")]
    assert REPLAY_TRACE not in dict(replay_trace([]))


@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.5, 1.0])
def test_a_trace_we_begin_is_sampled_as_opentelemetrys_ratio_sampler_decides(ratio: float) -> None:
    """The deployment's sample ratio applies to the traces a producer or the gateway begins:
    the sampled flag is the decision OpenTelemetry's own `TraceIdRatioBased` makes for the
    same trace id, so every worker's parent-based sampler agrees with it."""
    from opentelemetry.sdk.trace.sampling import Decision, TraceIdRatioBased

    sampler = TraceIdRatioBased(ratio)
    begun = [TraceContext.start(sample_ratio=ratio) for _ in range(2000)]
    for trace in begun:
        decision = sampler.should_sample(None, int(trace.trace_id, 16), "request").decision
        assert trace.sampled == (decision == Decision.RECORD_AND_SAMPLE), trace
    share = sum(t.sampled for t in begun) / len(begun)
    assert abs(share - ratio) < 0.05, share  # 2,000 draws: 0.05 is > 7 standard deviations


def test_a_trace_begun_without_a_ratio_is_sampled_unless_told_not_to_be() -> None:
    assert TraceContext.start().sampled and not TraceContext.start(sampled=False).sampled
