"""The release guard's judgement, without Kafka: rates, latency, sample minimums, canary."""

from __future__ import annotations

import pytest

from streamtts.features.releases.guard import Outcome, ReleaseGuard, p99, wilson_lower
from streamtts.schemas import GuardLimits

LIMITS = GuardLimits(min_samples=10, window=50)


def _feed(
    guard: ReleaseGuard, release: str, n: int, *, failed: int = 0, degraded: int = 0, ms: float = 300
) -> None:
    for i in range(n):
        guard.observe(Outcome(release, failed=i < failed, degraded=i < degraded, first_audio_ms=ms))


def test_a_healthy_candidate_is_left_alone() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)
    _feed(guard, "stable", 40, failed=1, degraded=2)
    _feed(guard, "v2", 20, degraded=1, ms=350)
    assert guard.verdict() is None


def test_nothing_is_judged_before_both_lanes_have_enough_samples() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)
    _feed(guard, "v2", 9, failed=9)
    _feed(guard, "stable", 100)
    assert guard.verdict() is None
    _feed(guard, "v2", 1, failed=1)
    assert guard.verdict() is not None
    lonely = ReleaseGuard("stable", "v2", LIMITS)
    _feed(lonely, "v2", 50, failed=50)
    _feed(lonely, "stable", 9)
    assert lonely.verdict() is None, "no stable baseline yet"


def test_a_higher_error_rate_is_a_breach_that_names_the_numbers() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)
    _feed(guard, "stable", 40, failed=0)
    _feed(guard, "v2", 20, failed=2)  # 10 % > 0 % + 2 %
    breach = guard.verdict()
    assert breach is not None and breach.reason == "error_rate"
    assert "10.0%" in breach.detail and "n=20 vs 40" in breach.detail


def test_the_error_margin_is_relative_to_stable() -> None:
    guard = ReleaseGuard(
        "stable", "v2", GuardLimits(min_samples=10, window=100, max_error_rate_increase=0.05)
    )
    _feed(guard, "stable", 100, failed=10)  # 10 %
    _feed(guard, "v2", 100, failed=20)  # 20 %: lower bound 13.3 % ≤ 15 %, could be chance
    assert guard.verdict() is None
    _feed(guard, "v2", 100, failed=30)  # the window keeps the newest 100: bound 22 % > 15 %
    assert (v := guard.verdict()) is not None and v.reason == "error_rate"


def test_one_bad_request_in_twenty_is_not_a_breach() -> None:
    """The reviewer's case: 1 failure in 20 (5 %) against a clean stable lane, and one cold
    start among 20 fast requests, are chance, not a worse release."""
    guard = ReleaseGuard("stable", "v2", GuardLimits(min_samples=20, window=200))
    _feed(guard, "stable", 200, ms=300)
    _feed(guard, "v2", 19, ms=300)
    guard.observe(Outcome("v2", failed=True, degraded=False, first_audio_ms=None))
    assert guard.verdict() is None
    slow = ReleaseGuard("stable", "v2", GuardLimits(min_samples=20, window=200))
    _feed(slow, "stable", 200, ms=300)
    _feed(slow, "v2", 19, ms=300)
    _feed(slow, "v2", 1, ms=2500)
    assert slow.verdict() is None


def test_wilson_lower_bounds() -> None:
    assert wilson_lower(0, 20) == 0.0
    assert 0.008 < wilson_lower(1, 20) < 0.01
    assert 0.83 < wilson_lower(20, 20) < 0.84


def test_degradations_are_a_breach() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)
    _feed(guard, "stable", 20)
    _feed(guard, "v2", 20, degraded=20)
    assert (v := guard.verdict()) is not None and v.reason == "degraded_rate"


def test_a_slower_first_audio_is_a_breach_beyond_ratio_and_slack() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)  # × 1.5 + 200 ms: 300 ms → 650 ms allowed
    _feed(guard, "stable", 20, ms=300)
    _feed(guard, "v2", 20, ms=640)
    assert guard.verdict() is None
    _feed(guard, "v2", 1, ms=2000)  # one slow request among 21: the median is judged
    assert guard.verdict() is None
    _feed(guard, "v2", 20, ms=700)  # now most are slow
    assert (v := guard.verdict()) is not None and v.reason == "first_audio_median"
    many = ReleaseGuard("stable", "v2", GuardLimits(min_samples=10, window=500))
    _feed(many, "stable", 200, ms=300)
    _feed(many, "v2", 180, ms=300)
    _feed(many, "v2", 20, ms=2000)  # 10 % slow: the P99 (judged from 100 samples) sees it
    assert (v := many.verdict()) is not None and v.reason == "first_audio_p99"


def test_a_failing_canary_is_a_breach_without_samples_unless_disabled() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)
    guard.canary("stable", ok=False, why="stable is not judged here")
    assert guard.verdict() is None
    guard.canary("v2", ok=False, why="duration off by 40 %")
    assert (v := guard.verdict()) is not None and v.reason == "canary" and "40 %" in v.detail
    off = ReleaseGuard("stable", "v2", GuardLimits(canary=False))
    off.canary("v2", ok=False)
    assert off.verdict() is None


def test_other_lanes_are_not_counted() -> None:
    guard = ReleaseGuard("stable", "v2", LIMITS)
    _feed(guard, "v1-draining", 50, failed=50)
    assert guard.stats("stable").samples == 0 and guard.stats("v2").samples == 0


@pytest.mark.parametrize(
    ("values", "expected"), [([], None), ([5.0], 5.0), (list(range(1, 101)), 99), ([1, 2, 3], 3)]
)
def test_p99_is_nearest_rank(values: list[float], expected: float | None) -> None:
    assert p99([float(v) for v in values]) == expected


async def test_a_candidate_that_renders_nothing_is_a_breach() -> None:
    """No workers on the candidate lane: no result ever comes, so no rate can breach; the
    requests this process routed there and that have no result after `max_pending_s` do."""
    import time

    from streamtts.features.releases.auto_rollback import AutoRollback
    from streamtts.features.releases.watch import ReleaseWatch
    from streamtts.runtime.settings import KafkaSettings
    from streamtts.runtime.telemetry import Telemetry

    kafka = KafkaSettings(bootstrap_servers="127.0.0.1:1")  # never connected: pure bookkeeping
    watch = ReleaseWatch(kafka, "tts.config")
    auto = AutoRollback(kafka, Telemetry(), releases=watch)
    guard = ReleaseGuard("stable", "v2", GuardLimits(max_pending_s=60))
    watch.routed("r-stable", "stable")  # the base lane is not tracked
    watch.routed("r-fresh", "v2")
    assert "r-stable" not in watch.in_flight and auto._stalled(guard) is None
    watch.in_flight["r-old"] = ("v2", time.monotonic() - 61)
    watch.in_flight["r-other"] = ("v1", time.monotonic() - 600)  # another candidate's lane
    breach = auto._stalled(guard)
    assert breach is not None and breach.reason == "stalled" and breach.detail.startswith("1 request(s)")
    watch.in_flight.pop("r-old")  # its result arrived
    assert auto._stalled(guard) is None


async def test_a_lane_without_a_live_consumer_is_a_breach() -> None:
    """Segments waiting on a lane whose group has no member: a breach at once; a lane the
    segment stage kept requests off: after the grace, and only while it still has no member."""
    import time

    from streamtts.features.releases.auto_rollback import REFUSED_GRACE_S, AutoRollback
    from streamtts.features.releases.lane_health import LaneHealth, LaneState
    from streamtts.features.releases.watch import ReleaseWatch
    from streamtts.runtime.settings import KafkaSettings
    from streamtts.runtime.telemetry import Telemetry

    class Lanes(LaneHealth):
        found: list[LaneState]

        async def states(self, release: str) -> list[LaneState]:
            return self.found

    kafka = KafkaSettings(bootstrap_servers="127.0.0.1:1")  # never connected
    watch = ReleaseWatch(kafka, "tts.config")
    lanes = watch.lanes = Lanes(kafka)
    auto = AutoRollback(kafka, Telemetry(), releases=watch)
    guard = ReleaseGuard("stable", "v2", GuardLimits())
    lanes.found = [LaneState("v2", "short", "g", 1, 5), LaneState("v2", "long", "g-long", 0, 0)]
    assert await auto._no_consumer(guard) is None, "a live member drains its lane"
    lanes.found = [LaneState("v2", "short", "g", 0, 5), LaneState("v2", "long", "g-long", 0, 0)]
    breach = await auto._no_consumer(guard)
    assert (
        breach is not None
        and breach.reason == "no_consumer"
        and "5 segment(s) on the short lane" in breach.detail
    )
    lanes.found = [LaneState("v2", "short", "g", 0, 0), LaneState("v2", "long", "g-long", 0, 0)]
    assert await auto._no_consumer(guard) is None, "nothing routed there, nothing refused"
    lanes.refused["v2"] = time.monotonic()
    assert await auto._no_consumer(guard) is None, "within the grace (a worker may be joining)"
    lanes.refused["v2"] = time.monotonic() - REFUSED_GRACE_S
    breach = await auto._no_consumer(guard)
    assert breach is not None and "requests kept on stable" in breach.detail
    lanes.found = [LaneState("v2", "short", "g", 1, 0), LaneState("v2", "long", "g-long", 0, 0)]
    assert await auto._no_consumer(guard) is None, "a member joined meanwhile"
