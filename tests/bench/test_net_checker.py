"""The network-fault checker's verdicts on histories written by hand: each invariant fails for
its own counterexample and passes without one (the run itself is `chaos --hosts`)."""

from __future__ import annotations

import io
import wave

from streamtts.bench.net_checker import History, SeenResult, check, chunks_problem, object_problems
from streamtts.runtime.settings import S3Settings


def _result(
    status: str = "completed",
    key: str | None = "t/a.wav",
    size: int = 10,
    etag: str = "e",
    duration_ms: float = 500.0,
) -> SeenResult:
    return SeenResult(
        status=status, at_ms=0, key=key, size=size, etag=etag, duration_ms=duration_ms, chunks=1
    )


def _wav(ms: int, rate: int = 16000) -> bytes:
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(b"\0\0" * (rate * ms // 1000))
    return out.getvalue()


def test_chunks_complete_and_in_order_pass_and_a_gap_or_a_reorder_fails() -> None:
    assert chunks_problem([(0, 0, False, 2), (0, 1, True, 2), (1, 0, True, 2)]) is None
    # A redelivered chunk repeats: order is judged on first appearances.
    assert chunks_problem([(0, 0, True, 2), (1, 0, True, 2), (1, 0, True, 2)]) is None
    assert chunks_problem([]) == "no chunks"
    assert "incomplete" in (chunks_problem([(0, 0, True, 2)]) or "")
    assert "incomplete" in (chunks_problem([(0, 0, False, 1), (0, 2, True, 1)]) or "")
    assert "out of order" in (chunks_problem([(1, 0, True, 2), (0, 0, True, 2)]) or "")


def test_an_object_must_exist_match_its_result_and_decode_to_its_duration() -> None:
    data = _wav(500)
    objects = {"a": ("t/a.wav", len(data), "e")}
    good = {"a": _result(size=len(data))}
    assert object_problems(good, objects, lambda _k: data) == []
    assert object_problems(good, {}, lambda _k: data) == ["a missing"]
    assert "size/etag" in object_problems({"a": _result(size=len(data) + 1)}, objects, lambda _k: data)[0]
    short = _wav(200)
    assert "decodes to 200 ms" in object_problems(good, objects, lambda _k: short)[0]


def test_lost_duplicated_flipped_orphaned_and_dead_lettered_requests_are_each_named() -> None:
    s3 = S3Settings(endpoint="127.0.0.1:1")  # never reached: no result below is completed with an object
    history = History(
        results={
            "r1": [_result("failed", key=None)],
            "r2": [_result("failed", key=None), _result("failed", key=None)],
            "r3": [_result("cancelled", key=None), _result("completed", key=None)],
        },
        dead_letters={"r4": ["timeout"]},
        objects={"r9": ("t/r9.mp3", 1, "e")},
    )
    verdicts = {v.invariant: v for v in check(history, ["r1", "r2", "r3", "r4"], s3, exactly_once=True)}
    assert verdicts["results"].counterexamples == ["r4 lost", "r2 ×2", "r3 ×2 differing"]
    assert verdicts["no_flips"].counterexamples == ["r3"]
    assert verdicts["no_orphans"].counterexamples == ["r9"]
    assert verdicts["no_network_dead_letters"].counterexamples == ["r4 (timeout)"]
    assert [v.invariant for v in verdicts.values() if v.ok] == ["objects", "chunks"]
    # At-least-once allows a duplicate, when its audio is the same.
    alo = {v.invariant: v for v in check(history, ["r1", "r2"], s3, exactly_once=False)}
    assert alo["results"].ok
    assert alo["results"].note == "1 with more than one result, 1 of them identical"
    assert verdicts["results"].note == "", "exactly-once names duplicates as counterexamples instead"
