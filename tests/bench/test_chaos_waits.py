"""The chaos report's "longest wait after a fault": measured from the fault that delayed the
result — the last to end before it, or one that began since and was still on."""

from __future__ import annotations

from streamtts.bench.chaos_report import ChaosReport, FaultWindow


def _report(faults: list[FaultWindow], sent_at: float, result_at: float) -> ChaosReport:
    report = ChaosReport("exactly_once", faults=faults)
    report.tally({"r": sent_at}, (), {"r": [("completed", result_at)]}, {})
    return report


def test_a_result_after_the_last_fault_ended_waited_since_its_end() -> None:
    report = _report([FaultWindow("kill_front", 10.0, 24.0)], sent_at=5.0, result_at=30.0)
    assert report.longest_wait_after_fault_s == 6.0 and report.wait_after == {"kill_front": 6.0}


def test_a_result_that_came_during_a_later_fault_waited_since_that_fault_began() -> None:
    faults = [FaultWindow("kill_front", 10.0, 24.0), FaultWindow("kafka_during_start", 30.0, 62.0)]
    report = _report(faults, sent_at=5.0, result_at=54.5)
    assert report.longest_wait_after_fault_s == 24.5
    assert set(report.wait_after) == {"kafka_during_start"}


def test_a_request_sent_after_every_fault_waited_since_it_was_sent() -> None:
    report = _report([FaultWindow("stop_minio", 1.0, 3.0)], sent_at=10.0, result_at=10.5)
    assert report.longest_wait_after_fault_s == 0.5
