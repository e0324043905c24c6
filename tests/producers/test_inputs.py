"""JSONL/CLI input parsing: good lines survive bad ones, each bad line is named."""

from __future__ import annotations

from streamtts.producers.inputs import parse_jsonl

DEFAULTS = {"voice": "jm_kumo", "format": "opus", "delivery": {"chunks": True, "storage": False}}


def test_bad_lines_are_reported_with_numbers_and_good_lines_kept() -> None:
    lines = [
        b'{"text": "first"}',
        b"",
        b"{broken",
        b'{"text": "third", "format": "ogg"}',
        b'["not", "an", "object"]',
        b'{"text": "sixth", "voice": "jf_alpha", "request_id": "my-id"}',
        b'{"voice": "x"}',
    ]
    parsed = parse_jsonl(lines, DEFAULTS)
    assert [r.text for r in parsed.requests] == ["first", "sixth"]
    assert parsed.requests[0].voice == "jm_kumo" and parsed.requests[0].format == "opus"
    assert parsed.requests[1].voice == "jf_alpha" and parsed.requests[1].request_id == "my-id"
    assert [b.line_no for b in parsed.bad_lines] == [3, 4, 5, 7]
    assert "'format'" in parsed.bad_lines[1].reason
    assert "'text'" in parsed.bad_lines[3].reason
    assert str(parsed.bad_lines[0]).startswith("line 3: not valid JSON")


def test_generated_ids_are_unique() -> None:
    parsed = parse_jsonl([b'{"text": "a"}'] * 50, DEFAULTS)
    assert len({r.request_id for r in parsed.requests}) == 50
