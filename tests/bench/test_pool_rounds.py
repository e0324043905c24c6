"""Arms run in several rounds (`--sections encode`, ABBA) are reported as one column each:
records pooled, measures averaged round by round, arms in the order they first ran."""

from __future__ import annotations

from streamtts.bench.bench_facts import pool_rounds
from streamtts.bench.bench_plan import BenchResult, LoadRun, Plan
from streamtts.bench.report import _wire_table
from streamtts.bench.stats import RequestRecord, summarize


def _run(arm: str, start: float, cpu: float, kafka: dict[str, float]) -> LoadRun:
    recs = []
    for i in range(4):
        rec = RequestRecord(f"{arm}{start}{i}", 20, "en", "short", sent_at=start + i * 0.5)
        rec.first_chunk_at = rec.sent_at + 0.1
        rec.audio_done_at = rec.result_at = rec.sent_at + 0.5
        recs.append(rec)
    run = LoadRun(f"{arm} c=4", "encode", "en_joe", "customer_service", "closed", "t", summarize(recs))
    run.records = recs
    run.extra = {
        "arm": arm,
        "outside_inference_cpu_ms_per_request": cpu,
        "kafka_bytes_per_audio_s": kafka,
        "subscriber_cpu_ms_per_request": None,
        "cpu_ms_per_request": {"front": cpu / 2, "kafka": cpu / 4},
    }
    return run


def _result(runs: list[LoadRun]) -> BenchResult:
    plan = Plan.make(
        quick=True, voices=("en_joe",), guarantees=None, scale_out=None, budget_s=None, seed=1, custom=None
    )
    return BenchResult(plan, "now", {}, runs=runs)


def test_rounds_of_an_arm_become_one_column_in_first_run_order() -> None:
    runs = [
        _run("two encodes", 0, 250.0, {"tts.pcm": 100.0, "tts.file.parts": 50.0}),
        _run("one encode", 10, 190.0, {"tts.pcm": 100.0, "tts.file.parts": 8.0}),
        _run("one encode", 20, 200.0, {"tts.pcm": 102.0}),
        _run("two encodes", 30, 240.0, {"tts.pcm": 98.0, "tts.file.parts": 52.0}),
    ]
    two, one = pool_rounds(runs)
    assert two.extra["arm"] == "two encodes" and one.extra["arm"] == "one encode"
    assert two.extra["outside_inference_cpu_ms_per_request"] == 245.0
    assert one.extra["outside_inference_cpu_ms_per_request"] == 195.0
    assert two.extra["kafka_bytes_per_audio_s"] == {"tts.pcm": 99.0, "tts.file.parts": 51.0}
    assert one.extra["kafka_bytes_per_audio_s"] == {"tts.pcm": 101.0, "tts.file.parts": 8.0}  # absent ≠ 0
    assert one.extra["subscriber_cpu_ms_per_request"] is None and one.extra["rounds"] == 2
    assert len(one.records) == 8 and one.summary.completed == 8
    assert abs(one.summary.wall_s - 2 * 2.0) < 1e-9  # the rounds' walls summed, not first → last
    assert pool_rounds(runs[:2]) == runs[:2]  # an arm run once is as it was


def test_the_encode_table_has_one_column_per_arm_and_the_change_against_the_first() -> None:
    runs = [
        _run("two encodes", 0, 250.0, {"tts.pcm": 100.0}),
        _run("one encode", 10, 190.0, {"tts.pcm": 100.0}),
        _run("one encode", 20, 200.0, {"tts.pcm": 100.0}),
        _run("two encodes", 30, 240.0, {"tts.pcm": 100.0}),
    ]
    text = "\n".join(_wire_table(_result(runs), "encode"))
    assert "One encode vs two, ABBA" in text and "8 requests in 2 rounds" in text
    assert "| CPU outside inference, ms / request | 245.0 | 195.0 | -20.4 % |" in text
    assert _wire_table(_result(runs), "wire") == []  # another section's runs are not its own
