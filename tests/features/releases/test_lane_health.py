"""The lane check's cache: one admin round trip per lane per TTL, never one per request."""

from __future__ import annotations

from streamtts.features.releases.lane_health import LaneHealth, LaneState
from streamtts.runtime.settings import KafkaSettings


class _Counted(LaneHealth):
    def __init__(self, members: list[int | Exception]) -> None:
        self.now = 0.0
        super().__init__(KafkaSettings(bootstrap_servers="unused:1"), ttl_s=2.0, clock=lambda: self.now)
        self.answers = members
        self.calls = 0

    async def _count_members(self, groups: list[str]) -> dict[str, int]:
        answer = self.answers[min(self.calls, len(self.answers) - 1)]
        self.calls += 1
        if isinstance(answer, Exception):
            raise answer
        return dict.fromkeys(groups, answer)


async def test_answers_are_cached_for_the_ttl() -> None:
    health = _Counted([1, 0])
    assert all([await health.live("v2", "short") for _ in range(50)])
    assert health.calls == 1
    health.now = 2.5
    assert not await health.live("v2", "short")
    assert health.calls == 2 and health.refused == {"v2": 2.5}
    health.now = 3.0
    assert not await health.live("v2", "short")
    assert health.calls == 2, "a refusal is cached too"
    assert health.refused == {"v2": 2.5}, "the first refusal is the one remembered"


async def test_a_failed_check_does_not_move_traffic() -> None:
    health = _Counted([RuntimeError("broker down")])
    assert await health.live("v2", "long")
    assert health.refused == {}
    dead = _Counted([0, RuntimeError("broker down")])
    assert not await dead.live("v2", "long")
    dead.now = 5.0
    assert not await dead.live("v2", "long"), "the last answer holds while Kafka is unreachable"


def test_a_lane_is_stranded_only_with_records_and_no_member() -> None:
    assert LaneState("v2", "short", "g", members=0, unconsumed=3).stranded
    assert not LaneState("v2", "short", "g", members=1, unconsumed=3).stranded
    assert not LaneState("v2", "short", "g", members=0, unconsumed=0).stranded
