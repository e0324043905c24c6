"""Bench arithmetic without Kafka or a model: percentiles, summaries, Poisson arrivals,
workload mixes and the capacity search."""

from __future__ import annotations

import itertools
import math
import random
import statistics

import pytest

from streamtts.bench.capacity import Step, round_rate, search
from streamtts.bench.loadgen import burst_schedule, poisson_schedule
from streamtts.bench.stats import Dist, RequestRecord, percentile, summarize
from streamtts.bench.workloads import BurstPhase, draw_mix, load_burst_profile, load_texts, speakable


def test_percentile_interpolates_like_numpy() -> None:
    values = [1.0, 2.0, 3.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 100) == 4.0
    assert percentile(values, 50) == 2.5
    assert percentile(values, 99) == pytest.approx(3.97)
    assert percentile([5.0], 99) == 5.0
    assert math.isnan(percentile([], 50))
    with pytest.raises(ValueError):
        percentile(values, 101)


def test_dist_of_ignores_nan_and_orders() -> None:
    d = Dist.of([0.3, float("nan"), 0.1, 0.2])
    assert (d.n, d.p50, d.max) == (3, 0.2, 0.3)
    assert d.mean == pytest.approx(0.2)
    assert Dist.of([]).n == 0


def _rec(sent: float, first: float | None, done: float | None, audio: float = 1.0) -> RequestRecord:
    r = RequestRecord("r", 10, "en", "short", sent_at=sent, first_chunk_at=first, audio_s=audio)
    r.audio_done_at = r.result_at = done
    return r


def test_summary_counts_lost_and_throughput() -> None:
    recs = [_rec(0.0, 0.1, 1.0), _rec(1.0, 1.2, 2.0), _rec(2.0, 2.5, None)]
    s = summarize(recs)
    assert (s.sent, s.completed, s.lost) == (3, 2, 1)
    assert s.wall_s == pytest.approx(2.0)  # first send → last completion
    assert s.throughput_rps == pytest.approx(1.0)
    assert s.audio_per_wall == pytest.approx(1.0)
    assert s.ttfa.max == pytest.approx(0.5)  # a lost request's first chunk still counts
    assert summarize(recs, wall_s=4.0).throughput_rps == pytest.approx(0.5)


def test_failed_request_is_not_completed() -> None:
    r = _rec(0.0, 0.1, 1.0)
    r.failed = True
    assert r.completed_at is None and summarize([r]).lost == 1


def test_poisson_schedule_rate_and_exponential_gaps() -> None:
    rng = random.Random(1)
    times = poisson_schedule(5.0, 2000.0, rng)
    assert times == sorted(times) and 0 < times[0] and times[-1] < 2000.0
    assert len(times) / 2000.0 == pytest.approx(5.0, rel=0.05)
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # Exponential: mean = stdev = 1/rate.
    assert statistics.mean(gaps) == pytest.approx(0.2, rel=0.05)
    assert statistics.stdev(gaps) == pytest.approx(0.2, rel=0.08)
    assert poisson_schedule(0, 10, rng) == []
    assert poisson_schedule(1, 10, random.Random(3)) == poisson_schedule(1, 10, random.Random(3))


def test_burst_schedule_follows_phases() -> None:
    phases = [BurstPhase(500, 0.5), BurstPhase(500, 4.0)]
    times = burst_schedule(2.0, phases, random.Random(2))
    quiet = sum(1 for t in times if t < 500)
    loud = len(times) - quiet
    assert quiet / 500 == pytest.approx(1.0, rel=0.15)
    assert loud / 500 == pytest.approx(8.0, rel=0.1)
    assert load_burst_profile()  # the shipped profile parses


def test_customer_service_file_and_mix_proportions() -> None:
    items = load_texts("customer_service")
    assert all(len(i.text) < 50 for i in items if i.kind == "short")
    assert all(len(i.text) > 200 for i in items if i.kind == "long")
    assert {i.lang for i in items} == {"en", "zh", "mixed"}
    mix = draw_mix(items, 1000, random.Random(4))
    assert len(mix) == 1000
    assert sum(i.kind == "short" for i in mix) == 800
    assert {i.lang for i in mix} == {"en", "zh", "mixed"}
    small = draw_mix(items, 10, random.Random(5))
    assert sum(i.kind == "short" for i in small) == 8
    assert len({i.text for i in small}) == 10  # no repeats before the pool is used up


def test_speakable_keeps_only_the_voice_languages() -> None:
    items = load_texts("customer_service")
    english = speakable(items, {"en"})
    assert english and all(i.lang == "en" for i in english)
    assert len(speakable(items, {"zh", "en", "ja"})) == len(items)
    assert all(i.kind == "paragraph" for i in load_texts("long_form"))


def test_round_rate_two_significant_digits() -> None:
    assert round_rate(1.234) == 1.2
    assert round_rate(0.04567) == 0.046
    assert round_rate(12.6) == 13.0
    assert round_rate(0) == 0.0


async def test_capacity_search_brackets_and_refines() -> None:
    true_capacity = 2.3

    async def measure(rate: float) -> Step:
        recs = [_rec(0.0, 0.5 if rate <= true_capacity else 2.0, 1.0)]
        return Step(rate, summarize(recs))

    cap = await search("v", measure, 1.0, growth=1.5, max_steps=8, refine=2)
    rates = [s.rate for s in cap.steps]
    assert rates[:4] == [1.0, 1.5, 2.2, 3.3]
    assert cap.best is not None and cap.best.rate <= true_capacity
    assert cap.first_fail is not None and cap.first_fail.rate > true_capacity
    assert cap.rate == 2.2 or cap.rate > 2.2


async def test_capacity_search_goes_down_when_the_start_fails() -> None:
    async def measure(rate: float) -> Step:
        return Step(rate, summarize([_rec(0.0, 0.5 if rate <= 0.5 else 3.0, 1.0)]))

    cap = await search("v", measure, 1.0, growth=2.0, max_steps=5, refine=0)
    assert [s.rate for s in cap.steps] == [1.0, 0.5]
    assert cap.rate == 0.5
