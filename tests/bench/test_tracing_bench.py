"""The tracing section (`bench --sections tracing`): each arm's workers get the settings that
make it what its name says, rounds pool per arm, and the table compares the pooled arms."""

from __future__ import annotations

import socket

from streamtts.bench.bench_plan import BenchResult, LoadRun, Plan
from streamtts.bench.stats import RequestRecord, summarize
from streamtts.bench.trace_hops import STEPS
from streamtts.bench.tracing_bench import (
    OFF,
    ON,
    PAIRED,
    _reachable,
    arm_env,
    paired_differences,
    paired_items,
    pooled,
    tracing_markdown,
)
from streamtts.bench.workloads import WorkItem


def _records(ttfa_ms: list[float], start: float, gap_s: float = 0.5) -> list[RequestRecord]:
    out = []
    for i, ms in enumerate(ttfa_ms):
        sent = start + i * gap_s
        rec = RequestRecord(f"r{start}-{i}", 20, "en", "short", sent_at=sent)
        rec.first_chunk_at = sent + ms / 1000
        rec.audio_done_at = rec.result_at = sent + 0.4
        rec.audio_s = 1.0
        out.append(rec)
    return out


def _run(arm: str, name: str, recs: list[RequestRecord], rnd: int) -> LoadRun:
    run = LoadRun(f"{arm} {name}", "tracing", "en_joe", "customer_service", "closed", "t", summarize(recs))
    run.records = recs
    run.extra = {"arm": arm, "round": rnd}
    return run


def _result(runs: list[LoadRun]) -> BenchResult:
    plan = Plan.make(
        quick=True, voices=("en_joe",), guarantees=None, scale_out=None, budget_s=None, seed=1, custom=None
    )
    return BenchResult(plan, "now", {}, runs=runs)


def test_the_off_arm_clears_an_inherited_endpoint_and_the_on_arm_records_everything() -> None:
    off = arm_env(OFF, "http://127.0.0.1:4318")
    assert off["STREAMTTS_OTLP_ENDPOINT"] == "" and off["OTEL_EXPORTER_OTLP_ENDPOINT"] == ""
    on = arm_env(ON, "http://collector:4318")
    assert on == {"STREAMTTS_OTLP_ENDPOINT": "http://collector:4318", "STREAMTTS_TRACE_SAMPLE_RATIO": "1.0"}


def test_rounds_pool_per_arm_and_the_table_compares_them() -> None:
    runs = [
        _run(OFF, "c=1", _records([100, 102, 104], 0), 1),
        _run(OFF, "c=4", _records([200] * 4, 10, gap_s=0.25), 1),
        _run(ON, "c=1", _records([101, 103, 105], 20), 2),
        _run(ON, "c=4", _records([200] * 4, 30, gap_s=0.5), 2),
        _run(ON, "c=1", _records([107, 109, 111], 40), 3),
        _run(ON, "c=4", _records([200] * 4, 50, gap_s=0.5), 3),
        _run(OFF, "c=1", _records([106, 108, 110], 60), 4),
        _run(OFF, "c=4", _records([200] * 4, 70, gap_s=0.25), 4),
    ]
    runs[2].extra["spans_seen"] = runs[4].extra["spans_seen"] = True
    arms = pooled(_result(runs))
    assert arms is not None
    (off1, offn), (on1, onn) = arms[OFF], arms[ON]
    assert off1.sent == on1.sent == 6  # both rounds of each arm
    assert round(off1.ttfa.p50 * 1000) == 105 and round(on1.ttfa.p50 * 1000) == 106
    # Throughput over the rounds' summed wall time: 8 requests in 2 × 1.15 s vs 2 × 1.9 s.
    assert abs(offn.throughput_rps - 8 / 2.3) < 1e-6 and abs(onn.throughput_rps - 8 / 3.8) < 1e-6
    text = "\n".join(tracing_markdown(_result(runs)))
    assert "| first audio p50, ms (c=1) | 105.0 | 106.0 | +1.0 ms |" in text
    assert f"{(8 / 3.8) / (8 / 2.3):.3f} ×" in text
    assert "traces found in it: yes" in text


def test_without_both_arms_there_is_no_table_and_unrecorded_traces_are_said() -> None:
    only_off = [_run(OFF, "c=1", _records([100], 0), 1), _run(OFF, "c=4", _records([100], 5), 1)]
    assert pooled(_result(only_off)) is None and tracing_markdown(_result(only_off)) == []
    runs = [*only_off, _run(ON, "c=1", _records([100], 10), 2), _run(ON, "c=4", _records([100], 15), 2)]
    runs[2].extra["spans_seen"] = False
    assert "traces found in it: no" in "\n".join(tracing_markdown(_result(runs)))


def test_a_collector_that_does_not_listen_is_found_before_any_worker_starts() -> None:
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert _reachable(f"http://127.0.0.1:{port}")
    assert not _reachable(f"http://127.0.0.1:{port}", timeout_s=0.5)  # closed now


def test_the_on_arms_hops_are_tabled_beside_the_baseline() -> None:
    runs = [
        _run(OFF, "c=1", _records([100], 0), 1),
        _run(OFF, "c=4", _records([100], 5), 1),
        _run(ON, "c=1", _records([100], 10), 2),
        _run(ON, "c=4", _records([100], 15), 2),
    ]
    step = dict.fromkeys(STEPS, 10.0)
    runs[2].extra["hops"] = [step | {"first audio": 70.0}, step | {"first audio": 90.0}, {"segment": 1.0}]
    direct = _run("direct", "direct", _records([60, 60, 60], 20), 0)
    direct.section, direct.name = "direct", "direct"
    text = "\n".join(tracing_markdown(_result([*runs, direct])))
    assert "(2 requests one at a time)" in text  # the incomplete third is left out
    assert (
        "| send → segment | 10.0 |" in text
        and "| first audio (send → first chunk at the subscriber) | 80.0 |" in text
    )
    assert (
        "| in-process baseline's first audio (same texts) | 60.0 |" in text
        and "| added by the pipeline | +20.0 |" in text
    )


def test_an_endpoint_without_a_scheme_or_with_a_bad_port_is_not_reachable_rather_than_an_error() -> None:
    assert not _reachable("127.0.0.1:1", timeout_s=0.5)
    assert not _reachable("http://127.0.0.1:99999")


def test_the_paired_pass_sends_each_text_once_sampled_once_not_alternating() -> None:
    texts = [WorkItem(f"text {i}", "en", "short") for i in range(4)]
    items = paired_items(texts * 2)
    flags = [item.traced for item in items]
    assert flags == [True, False, True, False, False, True, False, True]  # neighbours differ
    for i in range(4):  # each text: once each way
        assert {items[i].traced, items[i + 4].traced} == {True, False}
        assert items[i].text == items[i + 4].text


def test_the_paired_difference_is_per_text_sampled_minus_not() -> None:
    # Texts 0..2 sent twice with flipped flags; sampled costs text 0 +4 ms, text 1 +2 ms, and
    # text 2's second send is lost (no pair).
    items = paired_items([WorkItem(f"t{i}", "en", "short") for i in range(3)] * 2)
    recs = _records([104, 208, 300, 100, 210, 300], 0)
    for rec, item in zip(recs, items, strict=True):
        rec.traced = item.traced
    recs[5].first_chunk_at = None
    runs = [
        _run(OFF, "c=1", _records([100], 0), 1),
        _run(OFF, "c=4", _records([100], 5), 1),
        _run(ON, "c=1", _records([100], 10), 2),
        _run(ON, "c=4", _records([100], 15), 2),
        _run(PAIRED, "c=1", recs, 2),
    ]
    diffs = paired_differences(_result(runs))
    assert [round(d * 1000, 6) for d in diffs] == [4.0, 2.0]
    text = "\n".join(tracing_markdown(_result(runs)))
    assert "median +3.0 (quartiles" in text and "2 pairs)" in text
