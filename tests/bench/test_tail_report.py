"""The --tail report: one row per scheduler setup, ratios against its own and fifo's idle p50."""

from __future__ import annotations

import pytest

from streamtts.bench.bench_plan import LoadRun
from streamtts.bench.stats import Dist, Summary
from streamtts.bench.tail import setups, tail_markdown


def _run(
    setup: str, load: str, p50: float, p99: float, rps: float = 1.0, offered: float | None = None
) -> LoadRun:
    dist = Dist(10, p50, p99, p99, p99, p50)
    summary = Summary(10, 10, 0, 0, dist, dist, 10.0, rps, 30.0, 3.0)
    run = LoadRun(
        f"{setup} {load}", "tail", "jm_kumo", "customer_service", "m", "t", summary, offered_rps=offered
    )
    run.extra = {"scheduler": setup, "load": load}
    return run


def test_each_setup_is_a_row_with_ratios_to_its_own_and_fifos_idle() -> None:
    runs = [
        _run("fifo", "idle", 1.0, 1.5),
        _run("fifo", "saturation", 3.0, 7.0, rps=0.2),
        _run("fifo", "50%", 1.3, 4.0, offered=0.1),
        _run("lanes1x2", "idle", 0.7, 1.2),
        _run("lanes1x2", "saturation", 3.0, 6.0, rps=0.21),
        _run("lanes1x2", "50%", 1.1, 1.4, offered=0.1),
    ]
    runs[4].extra["lanes"] = {"preemptions": 3.0, "wasted_ms": 50.0, "lane_run_ms": 10_000.0}
    text = "\n".join(tail_markdown(runs))
    fifo = next(line for line in text.splitlines() if line.startswith("| fifo "))
    lanes = next(line for line in text.splitlines() if line.startswith("| lanes1x2 "))
    assert "0.200" in fifo and "1300/4000 (4.0×, 4.0×)" in fifo
    assert "0.210" in lanes and "1100/1400 (2.0×, 1.4×)" in lanes  # ÷ its own 0.7 s, ÷ fifo's 1.0 s
    assert "3, 0.5% of lane time" in lanes
    assert "(p99 ÷ own, ÷ fifo idle p50)" in text  # the first setup run is the baseline
    assert tail_markdown([]) == []


def test_the_baseline_is_whichever_setup_ran_first() -> None:
    runs = [
        _run("lanes1x2", "idle", 0.5, 0.6),
        _run("lanes1x2", "50%", 0.6, 1.5, offered=0.1),
        _run("fifo", "idle", 1.0, 1.5),
        _run("fifo", "50%", 1.3, 4.0, offered=0.1),
    ]
    text = "\n".join(tail_markdown(runs))
    assert "(p99 ÷ own, ÷ lanes1x2 idle p50)" in text
    fifo = next(line for line in text.splitlines() if line.startswith("| fifo "))
    assert "1300/4000 (4.0×, 8.0×)" in fifo  # ÷ its own 1.0 s, ÷ the baseline's 0.5 s


def test_load_columns_come_from_the_runs_in_share_order() -> None:
    # --tail-loads 0.9,0.35: columns the default list lacks, in share order, no empty 20 % one.
    runs = [
        _run("fifo", "idle", 1.0, 1.5),
        _run("fifo", "90%", 2.0, 5.0, offered=0.2),
        _run("fifo", "35%", 1.2, 2.0, offered=0.1),
    ]
    header = next(line for line in tail_markdown(runs) if line.startswith("| scheduler"))
    assert header.index("35%:") < header.index("90%:")
    assert "20%" not in header


def test_setups_run_in_the_order_named_and_refuse_unknown_labels() -> None:
    # The first named is the baseline: naming them the other way round reverses the run.
    assert [s.label for s in setups(["lanes2x1-first2", "fifo"])] == ["lanes2x1-first2", "fifo"]
    assert [s.label for s in setups(["fifo", "lanes2x1-first2"])] == ["fifo", "lanes2x1-first2"]
    with pytest.raises(ValueError, match="names a setup twice"):
        setups(["fifo", "fifo"])
    assert len(setups([])) == 4
    # A topology setup runs only when named, with the sink alone in the worker topology.
    assert "lanes2x1-first2-sink1" not in [s.label for s in setups([])]
    (alone,) = setups(["lanes2x1-first2-sink1"])
    assert alone.sink_alone and alone.first_lanes == 2
    with pytest.raises(ValueError, match="unknown --tail-setups nope"):
        setups(["nope"])
